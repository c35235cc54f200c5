// Command eventtime counts events per key in tumbling event-time windows
// made of keyed state and event-time timers, for the event-time tests:
// each window's count is emitted once, when the watermark passes its end,
// as "key end count how" (how: "wm" when a watermark fired it, "end" when
// the end of event time did).
//
//	--events N       events in all (default 1000); event i has key k(i%keys) and time base+10*i ms
//	--keys K         keys (default 3)
//	--window MS      window size (default 100)
//	--source-p P     source parallelism (default 1); subtask s emits the events i ≡ s (mod P)
//	--silent S       source subtask S emits nothing (default -1: none)
//	--forever        the sources never end (they fall silent after their events)
//	--strategy S     guest (default), monotonous or bounded (1s)
//	--wm-every M     guest strategy: a watermark after every M events (default 50)
//	--idle D         idle timeout (a Go duration; default none)
//	--per-poll N     events per poll at most (default 100)
//	--log            log every fired window
package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

const base = 1_700_000_000_000

func init() {
	guest.Job(func(env *guest.Env) {
		o := parse(env)
		var next int64 = -1
		src := env.Source("events", func(ctx *guest.Context, max int, out *guest.Collector) bool {
			s, p := int64(ctx.Subtask()), int64(o.sourceP)
			if next < 0 {
				next = s
			}
			if int(s) == o.silent {
				return !o.forever
			}
			emitted := int64(0)
			for k := 0; k < max && k < o.perPoll && next < o.events; k++ {
				t := base + 10*next
				out.Emit(guest.Record{Key: []byte(fmt.Sprintf("k%d", next%int64(o.keys))), HasKey: true,
					Value: []byte(strconv.FormatInt(next, 10)), Time: t, HasTime: true})
				emitted++
				if o.strategy == "guest" && (next/p+1)%int64(o.wmEvery) == 0 {
					ctx.EmitWatermark(t)
				}
				next += p
			}
			if next >= o.events && emitted > 0 && o.strategy == "guest" {
				ctx.EmitWatermark(base + 10*(next-p))
			}
			return next >= o.events && !o.forever
		}).SetParallelism(o.sourceP).
			OnOpen(func(ctx *guest.Context) {
				if b, ok := ctx.OperatorState("next"); ok {
					next = guest.AsInt64(b)
				}
			}).
			OnBarrier(func(ctx *guest.Context, _ int64) { ctx.SetOperatorState("next", guest.Int64(next)) })
		var w guest.WatermarkStrategy
		switch o.strategy {
		case "guest":
			w = guest.GuestWatermarks()
		case "monotonous":
			w = guest.Monotonous()
		default:
			w = guest.BoundedOutOfOrderness(time.Second)
		}
		if o.idle != 0 {
			w = w.WithIdleness(o.idle)
		}
		src.WithWatermarks(w).
			KeyBy("key", func(r guest.Record) []byte { return r.Key }).
			Process("windows", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
				if r.Time <= ctx.Watermark() {
					ctx.Count("late", 1) // its window may have fired: drop it
					return
				}
				end := r.Time - r.Time%o.window + o.window
				name := "w" + strconv.FormatInt(end, 10)
				n, _ := ctx.GetInt64(name)
				ctx.PutInt64(name, n+1)
				ctx.RegisterEventTimer(end - 1)
			}).
			OnEventTimer(func(ctx *guest.KeyedContext, t int64, out *guest.Collector) {
				wm := ctx.Watermark()
				if wm < t {
					panic(fmt.Sprintf("timer %d fired at watermark %d", t, wm))
				}
				name := "w" + strconv.FormatInt(t+1, 10)
				n, ok := ctx.GetInt64(name)
				if !ok {
					panic(fmt.Sprintf("timer %d of key %s fired twice (its window state is gone)", t, ctx.Key()))
				}
				ctx.Delete(name)
				ctx.Count("fired", 1)
				how := "wm"
				if wm == math.MaxInt64 {
					how = "end"
				}
				line := fmt.Sprintf("%s %d %d %s", ctx.Key(), t+1, n, how)
				if o.log {
					guest.Logger().Info("fired " + line)
				}
				out.EmitValue([]byte(line))
			}).
			Collect("out")
	})
}

type options struct {
	events                int64
	keys, sourceP, silent int
	wmEvery, perPoll      int
	window                int64
	forever, log          bool
	strategy              string
	idle                  time.Duration
}

func parse(env *guest.Env) options {
	o := options{events: 1000, keys: 3, sourceP: 1, silent: -1, wmEvery: 50, perPoll: 100, window: 100, strategy: "guest"}
	args := env.Args()
	num := func(i int) int64 {
		if i+1 >= len(args) {
			env.Fail(fmt.Errorf("%s needs a value", args[i]))
			return 0
		}
		n, err := strconv.ParseInt(args[i+1], 10, 64)
		if err != nil {
			env.Fail(fmt.Errorf("%s %q: %v", args[i], args[i+1], err))
		}
		return n
	}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--events":
			o.events = num(i)
		case "--keys":
			o.keys = int(num(i))
		case "--window":
			o.window = num(i)
		case "--source-p":
			o.sourceP = int(num(i))
		case "--silent":
			o.silent = int(num(i))
		case "--wm-every":
			o.wmEvery = int(num(i))
		case "--per-poll":
			o.perPoll = int(num(i))
		case "--strategy":
			if i+1 < len(args) {
				o.strategy = args[i+1]
			}
		case "--idle":
			if i+1 < len(args) {
				d, err := time.ParseDuration(args[i+1])
				if err != nil {
					env.Fail(err)
				}
				o.idle = d
			}
		case "--forever":
			o.forever = true
			continue
		case "--log":
			o.log = true
			continue
		default:
			env.Fail(fmt.Errorf("unknown argument %q", args[i]))
			continue
		}
		i++
	}
	return o
}

func main() {}
