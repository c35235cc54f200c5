// Command chatty is a test guest for task logs and stack samples.
//
//	log N      a source that prints "line 0" .. "line N-1" to stdout on its
//	           first poll, then "done via the log import" through
//	           guest.Logger, and ends
//	trickle N  a source that prints one "tick i" line per poll, with some
//	           work between, N in all, then ends
//	hot        a source that spends every poll in hotLoop (a few
//	           milliseconds of work each) and never ends
package main

import (
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() {
	guest.Job(func(env *guest.Env) {
		args := env.Args()
		mode, n := "log", 10
		if len(args) > 0 {
			mode = args[0]
		}
		if len(args) > 1 {
			n, _ = strconv.Atoi(args[1])
		}
		var src guest.SourceFunc
		switch mode {
		case "log":
			src = func(ctx *guest.Context, _ int, _ *guest.Collector) bool {
				for i := range n {
					fmt.Println("line " + strconv.Itoa(i))
				}
				guest.Logger().Info("done via the log import", "lines", n)
				return true
			}
		case "trickle":
			i := 0
			src = func(ctx *guest.Context, _ int, out *guest.Collector) bool {
				fmt.Println("tick " + strconv.Itoa(i))
				out.EmitValue(guest.Int64(int64(hotLoop(20000))))
				i++
				return i >= n
			}
		case "hot":
			src = func(ctx *guest.Context, _ int, out *guest.Collector) bool {
				out.EmitValue(guest.Int64(int64(hotLoop(2_000_000))))
				return false
			}
		default:
			panic("unknown mode " + mode)
		}
		env.Source("chatter", src).Sink("drop", func(*guest.Context, guest.Record) {})
	})
}

var sink uint64

// hotLoop is where the hot mode spends its time: a stack sample names it.
//
//go:noinline
func hotLoop(n int) uint64 {
	x := sink + 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 29
	}
	sink = x
	return x
}

func main() {}
