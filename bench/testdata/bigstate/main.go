// Command bigstate builds keyed state of a chosen size and then holds it: a
// source emits --keys records with --value-bytes values, a keyed process
// stores each value under its key, and the source then stays idle (not
// finished) for --hold, so checkpoints of that state can be measured. It
// paces by real time: run it with -C sandbox.clock=wall.
package main

import (
	"errors"
	"flag"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() { guest.Job(plan) }

func main() {}

func plan(env *guest.Env) {
	fs := flag.NewFlagSet("bigstate", flag.ContinueOnError)
	keys := fs.Int("keys", 100_000, "number of keys")
	size := fs.Int("value-bytes", 1000, "bytes of state per key")
	hold := fs.Duration("hold", time.Minute, "how long to keep the state after the last record")
	if err := fs.Parse(env.Args()); err != nil {
		env.Fail(err)
		return
	}
	var emitted int
	var done int64
	value := make([]byte, *size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var key []byte
	env.SetName("bigstate")
	env.Source("keys", func(ctx *guest.Context, max int, out *guest.Collector) bool {
		if ctx.Now() == 0 {
			panic(errors.New("bigstate paces by real time: run it with -C sandbox.clock=wall"))
		}
		for n := 0; n < max && emitted < *keys; n++ {
			key = strconv.AppendInt(append(key[:0], 'k'), int64(emitted), 10)
			out.EmitKeyValue(key, value)
			emitted++
		}
		if emitted < *keys {
			return false
		}
		if done == 0 {
			done = ctx.Now()
		}
		return ctx.Now()-done >= hold.Milliseconds()
	}).SetParallelism(1).
		KeyBy("key", func(r guest.Record) []byte { return r.Key }).
		Process("store", func(ctx *guest.KeyedContext, r guest.Record, _ *guest.Collector) {
			ctx.Put("v", r.Value)
		}).
		Sink("discard", func(*guest.Context, guest.Record) {})
}
