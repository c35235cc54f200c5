// Command testguest is the guest the wasmhost tests run. Its first argument
// picks the job it declares; the hostile ones misbehave on purpose.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/wasmhost/internal/benchfn"
)

func main() {}

func init() { guest.Job(plan) }

func plan(env *guest.Env) {
	mode := "identity"
	if len(env.Args()) > 0 {
		mode = env.Args()[0]
	}
	in := func() *guest.Stream { return env.TextSource("in", "input.txt") }
	switch mode {
	case "identity":
		in().Map("identity", func(r guest.Record) guest.Record { return r }).Collect("out")
	case "bench":
		var buf []byte
		in().Map("upper", func(r guest.Record) guest.Record {
			buf = benchfn.Upper(buf[:0], r.Value)
			r.Value = buf
			return r
		}).Collect("out")
	case "bench-compute":
		// The bench function alone, 100 times per record: how fast Go's wasm
		// code runs, without the boundary.
		var buf []byte
		in().Map("upper100", func(r guest.Record) guest.Record {
			for i := 0; i < 100; i++ {
				buf = benchfn.Upper(buf[:0], r.Value)
			}
			r.Value = buf
			return r
		}).Collect("out")
	case "keyed":
		// Counts records per key in keyed state, sets a timer per key, and
		// counts barriers in operator state.
		barriers := 0
		in().KeyBy("key", func(r guest.Record) []byte { return r.Value }).
			Process("count", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
				n, _ := ctx.GetInt64("n")
				n++
				ctx.PutInt64("n", n)
				ctx.RegisterTimer(ctx.Now() + 10)
				guest.Count("records", 1)
				out.EmitValue([]byte(fmt.Sprintf("%s=%d", ctx.Key(), n)))
			}).
			OnTimer(func(ctx *guest.KeyedContext, t int64, out *guest.Collector) {
				n, _ := ctx.GetInt64("n")
				out.EmitValue([]byte(fmt.Sprintf("timer %s@%d n=%d", ctx.Key(), t, n)))
			}).
			OnOpen(func(ctx *guest.Context) {
				if b, ok := ctx.OperatorState("barriers"); ok {
					barriers, _ = strconv.Atoi(string(b))
				}
			}).
			OnBarrier(func(ctx *guest.Context, id int64) {
				barriers++
				guest.Count("barriers", 1)
				ctx.SetOperatorState("barriers", []byte(strconv.Itoa(barriers)))
				ctx.SetOperatorState("last", []byte(strconv.FormatInt(id, 10)))
			}).
			Collect("out")
	case "reduce", "reduce-each":
		// A word count; "reduce-each" emits every update instead of the
		// final counts.
		var opts []guest.ReduceOption
		if mode == "reduce" {
			opts = append(opts, guest.EmitFinal())
		}
		in().FlatMap("split", func(r guest.Record, out *guest.Collector) {
			for _, w := range strings.Fields(string(r.Value)) {
				out.EmitValue([]byte(w))
			}
		}).
			KeyBy("word", func(r guest.Record) []byte { return r.Value }).
			Reduce("sum", func(acc []byte, r guest.Record) []byte {
				return guest.PutInt64(acc, guest.AsInt64(acc)+1)
			}, opts...).
			Map("format", func(r guest.Record) guest.Record {
				return guest.Record{Value: []byte(fmt.Sprintf("%s\t%d", r.Key, guest.AsInt64(r.Value)))}
			}).
			Collect("out")
	case "source":
		// Emits "0".."n-1" (n = Args()[1]), keeping its position in operator state.
		n, _ := strconv.Atoi(env.Args()[1])
		pos := 0
		env.Source("numbers", func(ctx *guest.Context, max int, out *guest.Collector) bool {
			for i := 0; i < max && pos < n; i++ {
				out.EmitValue([]byte(strconv.Itoa(pos)))
				pos++
			}
			return pos >= n
		}).
			OnOpen(func(ctx *guest.Context) {
				if b, ok := ctx.OperatorState("pos"); ok {
					pos, _ = strconv.Atoi(string(b))
				}
			}).
			OnBarrier(func(ctx *guest.Context, id int64) {
				ctx.SetOperatorState("pos", []byte(strconv.Itoa(pos)))
			}).
			Map("twice", func(r guest.Record) guest.Record {
				r.Value = append(append([]byte{}, r.Value...), r.Value...)
				return r
			}).
			Collect("out")
	case "hostile":
		in().Map("hostile", hostile(env.Args()[1])).Collect("out")
	case "plan-hostile": // the plan itself misbehaves
		hostile(env.Args()[1])(guest.Record{})
		in().Collect("out")
	default:
		panic("unknown mode " + mode)
	}
}

//go:wasmimport sluice emit
func rawEmit(ptr, n uint32)

//go:wasmimport sluice state_get
func rawStateGet(vertex int32, name, nameLen, key, keyLen, buf, bufCap uint32) int32

var sink []byte

func hostile(what string) guest.MapFunc {
	return func(r guest.Record) guest.Record {
		switch what {
		case "loop":
			for i := 0; ; i++ {
				sink = strconv.AppendInt(sink[:0], int64(i), 10)
			}
		case "membomb":
			var keep [][]byte
			for {
				keep = append(keep, bytes.Repeat([]byte{1}, 1<<20))
			}
		case "recurse":
			return guest.Record{Value: []byte(strconv.Itoa(recurse(1 << 30)))}
		case "panic":
			var m map[string]int
			m["boom"]++ // a nil map write panics
		case "emit-out-of-range":
			rawEmit(0xffff0000, 100)
		case "emit-overflow":
			rawEmit(0xffffffff, 0xffffffff)
		case "emit-garbage":
			b := []byte{9, 9, 9, 9, 9}
			rawEmit(uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)))
		case "state-overflow":
			rawStateGet(1, 0xfffffff0, 0x20, 0, 0, 0, 0)
		case "openfile":
			f, err := os.Open("/etc/passwd")
			if err == nil {
				f.Close()
				return guest.Record{Value: []byte("opened")}
			}
			return guest.Record{Value: []byte("open failed: " + err.Error())}
		case "writefile":
			err := os.WriteFile("/tmp/sluice-escape", []byte("x"), 0o644)
			return guest.Record{Value: []byte(fmt.Sprint("write: ", err))}
		case "env":
			return guest.Record{Value: []byte(fmt.Sprintf("environ=%d HOME=%q", len(os.Environ()), os.Getenv("HOME")))}
		case "stdout":
			for i := 0; i < 1000; i++ {
				fmt.Println("line", i, strings.Repeat("x", 100))
			}
			fmt.Fprintln(os.Stderr, "to stderr")
			return r
		case "exit":
			os.Exit(3)
		}
		return r
	}
}

//go:noinline
func recurse(n int) int {
	if n == 0 {
		return 0
	}
	var pad [8 << 10]byte
	pad[n%len(pad)] = byte(n)
	return recurse(n-1) + int(pad[n%len(pad)]&1)
}
