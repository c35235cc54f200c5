// Command taskguest is the guest the tm/task tests run. Its first argument
// picks the job it declares.
package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sdk/guest"
)

func main() {}

func init() { guest.Job(plan) }

func plan(env *guest.Env) {
	mode := env.Args()[0]
	in := func() *guest.Stream { return env.TextSource("lines", "input.txt") }
	switch mode {
	case "wordcount":
		// Split -> hash by word -> final count per word -> collect.
		in().FlatMap("split", func(r guest.Record, out *guest.Collector) {
			for _, w := range strings.Fields(string(r.Value)) {
				guest.Count("words", 1)
				out.EmitValue([]byte(w))
			}
		}).
			KeyBy("word", func(r guest.Record) []byte { return r.Value }).
			Reduce("count", func(acc []byte, r guest.Record) []byte {
				return guest.PutInt64(acc, guest.AsInt64(acc)+1)
			}, guest.EmitFinal()).
			Map("format", func(r guest.Record) guest.Record {
				return guest.Record{Value: []byte(fmt.Sprintf("%s\t%d", r.Key, guest.AsInt64(r.Value)))}
			}).
			Collect("out")
	case "upper":
		// Text -> rebalance -> map (upper) -> collect.
		in().Rebalance().Map("upper", func(r guest.Record) guest.Record {
			return guest.Record{Value: []byte(strings.ToUpper(string(r.Value)))}
		}).Collect("out")
	case "source":
		n, _ := strconv.Atoi(env.Args()[1])
		pos := 0
		env.Source("numbers", func(ctx *guest.Context, max int, out *guest.Collector) bool {
			for i := 0; i < max && pos < n; i++ {
				out.EmitValue([]byte(strconv.Itoa(pos)))
				pos++
			}
			return pos >= n
		}).Collect("out")
	case "panic":
		in().Map("explode", func(r guest.Record) guest.Record {
			if string(r.Value) == "boom" {
				var m map[string]int
				m["boom"]++ // a nil map write panics
			}
			return r
		}).Collect("out")
	case "poisonop":
		// panic's job, whose map skips its poison records whatever the
		// job says.
		in().Map("explode", func(r guest.Record) guest.Record {
			if string(r.Value) == "boom" {
				var m map[string]int
				m["boom"]++
			}
			return r
		}).SetPoisonRecords(guest.PoisonSkip).Collect("out")
	case "poisonsum":
		// A running count per line, like sum, whose reduce fails on the
		// line "boom": a poison record behind an exchange, in a chain with
		// state cached in guest memory.
		in().KeyBy("key", func(r guest.Record) []byte { return r.Value }).
			Reduce("count", func(acc []byte, r guest.Record) []byte {
				if string(r.Value) == "boom" {
					panic("poison record " + string(r.Value))
				}
				return guest.PutInt64(acc, guest.AsInt64(acc)+1)
			}).
			Map("format", func(r guest.Record) guest.Record {
				return guest.Record{Value: []byte(fmt.Sprintf("%s\t%d", r.Key, guest.AsInt64(r.Value)))}
			}).
			Collect("out")
	case "timer":
		// Each key registers a timer; its firing emits a line.
		in().KeyBy("key", func(r guest.Record) []byte { return r.Value }).
			Process("arm", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
				ctx.RegisterTimer(ctx.Now() + 1)
			}).
			OnTimer(func(ctx *guest.KeyedContext, t int64, out *guest.Collector) {
				out.EmitValue([]byte("timer " + string(ctx.Key())))
			}).
			Collect("out")
	case "sum":
		// A running count per line, emitted on every update ("key\tcount"):
		// keyed state that checkpoints carry across a restore.
		in().KeyBy("key", func(r guest.Record) []byte { return r.Value }).
			Reduce("count", func(acc []byte, r guest.Record) []byte {
				return guest.PutInt64(acc, guest.AsInt64(acc)+1)
			}).
			Map("format", func(r guest.Record) guest.Record {
				return guest.Record{Value: []byte(fmt.Sprintf("%s\t%d", r.Key, guest.AsInt64(r.Value)))}
			}).
			Collect("out")
	case "counter":
		// Emits 0..n-1, keeping its position in operator state.
		n, _ := strconv.ParseInt(env.Args()[1], 10, 64)
		var pos int64
		env.Source("counter", func(ctx *guest.Context, max int, out *guest.Collector) bool {
			for i := 0; i < max && pos < n; i++ {
				out.EmitValue([]byte(strconv.FormatInt(pos, 10)))
				pos++
			}
			return pos >= n
		}).
			OnOpen(func(ctx *guest.Context) {
				if v, ok := ctx.OperatorState("pos"); ok {
					pos = guest.AsInt64(v)
				}
			}).
			OnBarrier(func(ctx *guest.Context, id int64) { ctx.SetOperatorState("pos", guest.Int64(pos)) }).
			Collect("out")
	default:
		panic("unknown mode " + mode)
	}
}
