// Command poison is the guest of the poison-record end-to-end tests: a
// running count per input line ("<line>\t<count>", written to files) whose
// reduce panics on the line "boom". The key function burns some CPU per
// record, so the source stays busy (and checkpoints complete) while a test
// kills a TaskManager.
//
//	poison --input FILE --out DIR [--burn N]
package main

import (
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() { guest.Job(plan) }

func main() {}

func plan(env *guest.Env) {
	var in, out string
	burn := 0
	args := env.Args()
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--input":
			in = args[i+1]
		case "--out":
			out = args[i+1]
		case "--burn":
			n, err := strconv.Atoi(args[i+1])
			if err != nil {
				env.Fail(fmt.Errorf("--burn %q: %v", args[i+1], err))
				return
			}
			burn = n
		default:
			env.Fail(fmt.Errorf("unknown argument %q: usage: poison --input FILE --out DIR [--burn N]", args[i]))
			return
		}
	}
	if in == "" || out == "" {
		env.Fail(fmt.Errorf("usage: poison --input FILE --out DIR [--burn N]"))
		return
	}
	env.TextSource("lines", in).
		KeyBy("key", func(r guest.Record) []byte {
			spin(burn)
			return r.Value
		}).
		Reduce("count", func(acc []byte, r guest.Record) []byte {
			if string(r.Value) == "boom" {
				panic("poison record " + string(r.Value))
			}
			return guest.PutInt64(acc, guest.AsInt64(acc)+1)
		}).
		Map("format", func(r guest.Record) guest.Record {
			return guest.Record{Value: []byte(fmt.Sprintf("%s\t%d", r.Key, guest.AsInt64(r.Value)))}
		}).
		WriteFiles("out", out)
}

var sink uint64

//go:noinline
func spin(n int) {
	x := sink
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
}
