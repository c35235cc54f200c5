// Command windowjob is a keyed window job for the window tests (the
// table test beside it, and the cluster tests in local/): a Go source of
// events with guest watermarks feeds a window operator "win" whose results
// and late records both end in the collect sink.
//
//	--events N       events in all (default 1000); event i has key k(i%keys), value i and time base+10*i ms
//	--keys K         keys (default 3)
//	--kind K         tumbling (default), sliding or session
//	--size MS        window size, or a session's gap (default 100)
//	--slide MS       sliding windows' slide (default 50)
//	--lateness MS    allowed lateness (default 0)
//	--fn F           aggregate (default), reduce or process
//	--proc           processing-time windows
//	--late-every M   after every M-th event, a record late by --late-lag (default 0: none)
//	--late-lag MS    how far behind the event the late record is (default 10000)
//	--per-poll N     events per poll at most (default 100)
//	--forever        the source never ends (it falls silent after its events)
//
// The source emits a watermark at each event's time after the event (and,
// restored, first the watermark it had reached). Main
// output lines are "key start end result" (process: the values, comma
// separated; aggregate and reduce: their sum; reduce has no start, "-");
// late records come out as "late key value".
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

// Base is the first event's time.
const Base = 1_700_000_000_000

func init() {
	guest.Job(func(env *guest.Env) {
		o := parse(env)
		var next int64
		restored := false
		src := env.Source("events", func(ctx *guest.Context, max int, out *guest.Collector) bool {
			if restored {
				// A restored task's watermark starts over (watermarks are
				// not in checkpoints): the first poll only says again where
				// event time was, so that a late record after a restore is
				// late as it was before.
				restored = false
				ctx.EmitWatermark(Base + 10*(next-1))
				return false
			}
			for k := 0; k < max && k < o.perPoll && next < o.events; k++ {
				t := Base + 10*next
				key := []byte("k" + strconv.FormatInt(next%int64(o.keys), 10))
				out.Emit(guest.Record{Key: key, HasKey: true, Value: []byte(strconv.FormatInt(next, 10)), Time: t, HasTime: true})
				if o.lateEvery > 0 && next%o.lateEvery == o.lateEvery-1 {
					out.Emit(guest.Record{Key: key, HasKey: true, Value: []byte("late" + strconv.FormatInt(next, 10)), Time: t - o.lateLag, HasTime: true})
				}
				ctx.EmitWatermark(t)
				next++
			}
			return next >= o.events && !o.forever
		}).SetParallelism(1).
			OnOpen(func(ctx *guest.Context) {
				if b, ok := ctx.OperatorState("next"); ok {
					next = guest.AsInt64(b)
					restored = next > 0
				}
			}).
			OnBarrier(func(ctx *guest.Context, _ int64) { ctx.SetOperatorState("next", guest.Int64(next)) })
		var w guest.Windows
		switch o.kind {
		case "tumbling":
			w = guest.Tumbling(o.size)
		case "sliding":
			w = guest.Sliding(o.size, o.slide)
		case "session":
			w = guest.Session(o.size)
		default:
			env.Fail(fmt.Errorf("--kind %q: want tumbling, sliding or session", o.kind))
		}
		if o.proc {
			w = w.InProcessingTime()
		} else {
			w = w.WithAllowedLateness(o.lateness)
		}
		ws := src.WithWatermarks(guest.GuestWatermarks()).
			KeyBy("key", func(r guest.Record) []byte { return r.Key }).
			Window(w)
		var win *guest.Stream
		switch o.fn {
		case "aggregate":
			win = ws.Aggregate("win", guest.Aggregator{
				Add:   func(acc []byte, r guest.Record) []byte { return guest.PutInt64(acc, guest.AsInt64(acc)+atoi(r.Value)) },
				Merge: func(a, b []byte) []byte { return guest.PutInt64(a, guest.AsInt64(a)+guest.AsInt64(b)) },
				Result: func(dst, key []byte, w guest.Window, acc []byte) []byte {
					return fmt.Appendf(dst, "%s %d %d %d", key, w.Start, w.End, guest.AsInt64(acc))
				},
			})
		case "reduce":
			win = ws.Reduce("win", func(acc, v []byte) []byte {
				return strconv.AppendInt(acc[:0], atoi(acc)+atoi(v), 10)
			})
		case "process":
			win = ws.Process("win", func(ctx *guest.KeyedContext, w guest.Window, recs []guest.Record, out *guest.Collector) {
				vs := make([]string, len(recs))
				for i, r := range recs {
					vs[i] = string(r.Value)
				}
				out.EmitKeyValue(ctx.Key(), fmt.Appendf(nil, "%s %d %d %s", ctx.Key(), w.Start, w.End, strings.Join(vs, ",")))
			})
		default:
			env.Fail(fmt.Errorf("--fn %q: want aggregate, reduce or process", o.fn))
			return
		}
		main := win
		if o.fn == "reduce" {
			main = win.Map("format", func(r guest.Record) guest.Record {
				return guest.Record{Value: fmt.Appendf(nil, "%s - %d %s", r.Key, r.Time+1, r.Value)}
			})
		}
		main.Collect("out")
		if !o.proc {
			win.Late("late").
				Map("format-late", func(r guest.Record) guest.Record {
					return guest.Record{Value: fmt.Appendf(nil, "late %s %s", r.Key, r.Value)}
				}).
				Collect("late-out")
		}
	})
}

func atoi(b []byte) int64 {
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

type options struct {
	events, lateEvery, lateLag int64
	keys, perPoll              int
	kind, fn                   string
	size, slide, lateness      time.Duration
	proc, forever              bool
}

func parse(env *guest.Env) options {
	o := options{events: 1000, keys: 3, perPoll: 100, kind: "tumbling", fn: "aggregate",
		size: 100 * time.Millisecond, slide: 50 * time.Millisecond, lateLag: 10000}
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
	str := func(i int) string {
		if i+1 >= len(args) {
			env.Fail(fmt.Errorf("%s needs a value", args[i]))
			return ""
		}
		return args[i+1]
	}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--events":
			o.events = num(i)
		case "--keys":
			o.keys = int(num(i))
		case "--kind":
			o.kind = str(i)
		case "--size":
			o.size = time.Duration(num(i)) * time.Millisecond
		case "--slide":
			o.slide = time.Duration(num(i)) * time.Millisecond
		case "--lateness":
			o.lateness = time.Duration(num(i)) * time.Millisecond
		case "--fn":
			o.fn = str(i)
		case "--late-every":
			o.lateEvery = num(i)
		case "--late-lag":
			o.lateLag = num(i)
		case "--per-poll":
			o.perPoll = int(num(i))
		case "--proc":
			o.proc = true
			continue
		case "--forever":
			o.forever = true
			continue
		default:
			env.Fail(fmt.Errorf("unknown argument %q", args[i]))
			return o
		}
		i++
	}
	return o
}

func main() {}
