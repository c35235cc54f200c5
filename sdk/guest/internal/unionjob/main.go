// Command unionjob is a two-input job for the union and join tests (the
// tests beside it, and the cluster tests in local/): two Go sources, "a"
// with the even events and "b" with the odd ones, each with guest
// watermarks, are either united and summed in tumbling windows per key
// (--mode union) or joined in tumbling windows on their key (--mode join).
//
//	--mode M         union (default), join, cogroup, interval or typed-interval (interval
//	                 with the typed SDK's IntervalJoin)
//	--lower MS, --upper MS
//	                 interval: an a event at t joins the b events of its key in [t+lower, t+upper] (default -50, 50)
//	--slide MS       join, cogroup: sliding windows of --size every MS (default 0: tumbling)
//	--events N       events in all (default 1000); event i has key k((i/2)%keys), value i and time base+10*i ms
//	--keys K         keys (default 3)
//	--size MS        window size (default 100)
//	--per-poll N     events per poll at most (default 100)
//	--forever        the sources never end (they fall silent after their events)
//	--b-wait N       source b emits nothing in its first N polls (default 0; an empty poll pauses the source
//	                 up to 10 ms on a cluster, so 50 hold it back about half a second)
//
// Output lines: union "key start end sum" (and late records as "late key
// value", which a correct watermark never makes); join, for each pair of
// an a and a b event of one key and window, "key start a b"; cogroup, for
// each key and window, "key start as bs" with each side's values comma
// separated in arrival order ("-" for none); interval, for each pair, "key
// a b".
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
)

// Base is the first event's time.
const Base = 1_700_000_000_000

func init() {
	guest.Job(func(env *guest.Env) {
		o := parse(env)
		a := source(env, "a", 0, o)
		b := source(env, "b", 1, o)
		key := func(r guest.Record) []byte { return r.Key }
		w := guest.Tumbling(o.size)
		if o.slide > 0 {
			w = guest.Sliding(o.size, o.slide)
		}
		switch o.mode {
		case "union":
			win := a.Union("both", b).KeyBy("key", key).Window(w).Aggregate("win", guest.Aggregator{
				Add: func(acc []byte, r guest.Record) []byte { return guest.PutInt64(acc, guest.AsInt64(acc)+atoi(r.Value)) },
				Result: func(dst, key []byte, w guest.Window, acc []byte) []byte {
					return fmt.Appendf(dst, "%s %d %d %d", key, w.Start, w.End, guest.AsInt64(acc))
				},
			})
			win.Collect("out")
			win.Late("late").Map("format-late", func(r guest.Record) guest.Record {
				return guest.Record{Value: fmt.Appendf(nil, "late %s %s", r.Key, r.Value)}
			}).Collect("late-out")
		case "join":
			// The window's start, from the time Apply's output carries.
			start := func(t int64) int64 { return t + 1 - o.size.Milliseconds() }
			a.Join(b, key, key).Window(w).Apply("win", func(l, r guest.Record, out *guest.Collector) {
				out.Emit(guest.Record{Value: fmt.Appendf(nil, "%s %s %s", l.Key, l.Value, r.Value)})
			}).Map("format", func(r guest.Record) guest.Record {
				k, rest, _ := strings.Cut(string(r.Value), " ")
				return guest.Record{Value: fmt.Appendf(nil, "%s %d %s", k, start(r.Time), rest)}
			}).Collect("out")
		case "cogroup":
			a.Join(b, key, key).Window(w).CoGroup("win", func(ctx *guest.KeyedContext, w guest.Window, ls, rs []guest.Record, out *guest.Collector) {
				out.EmitValue(fmt.Appendf(nil, "%s %d %s %s", ctx.Key(), w.Start, values(ls), values(rs)))
			}).Collect("out")
		case "interval":
			a.Join(b, key, key).Between(o.lower, o.upper).Process("win", func(l, r guest.Record, out *guest.Collector) {
				out.EmitValue(fmt.Appendf(nil, "%s %s %s", l.Key, l.Value, r.Value))
			}).Collect("out")
		case "typed-interval":
			key := func(v string) string { n, _ := strconv.Atoi(v); return fmt.Sprintf("k%d", (n/2)%o.keys) }
			ta, tb := typed.Of(env, a, typed.String()), typed.Of(env, b, typed.String())
			typed.IntervalJoin(typed.Join(ta, tb, typed.String(), key, key), o.lower, o.upper, "win", typed.String(),
				func(l, r string, out *typed.Emitter[string]) { out.Emit(key(l) + " " + l + " " + r) }).Collect("out")
		default:
			env.Fail(fmt.Errorf("--mode %q: want union, join, cogroup, interval or typed-interval", o.mode))
		}
	})
}

func values(rs []guest.Record) string {
	if len(rs) == 0 {
		return "-"
	}
	vs := make([]string, len(rs))
	for i, r := range rs {
		vs[i] = string(r.Value)
	}
	return strings.Join(vs, ",")
}

// source emits the events i ≡ parity (mod 2), a watermark at each one's
// time, and keeps its position in operator state.
func source(env *guest.Env, name string, parity int64, o options) *guest.Stream {
	next := parity
	restored := false
	polls := 0
	return env.Source(name, func(ctx *guest.Context, max int, out *guest.Collector) bool {
		if parity == 1 && polls < o.bWait {
			polls++
			return false
		}
		if restored {
			// Watermarks are not in checkpoints: say again where event
			// time was.
			restored = false
			ctx.EmitWatermark(Base + 10*(next-2))
			return false
		}
		for k := 0; k < max && k < o.perPoll && next < o.events; k++ {
			t := Base + 10*next
			key := []byte("k" + strconv.FormatInt((next/2)%int64(o.keys), 10))
			out.Emit(guest.Record{Key: key, HasKey: true, Value: []byte(strconv.FormatInt(next, 10)), Time: t, HasTime: true})
			ctx.EmitWatermark(t)
			next += 2
		}
		return next >= o.events && !o.forever
	}).SetParallelism(1).
		WithWatermarks(guest.GuestWatermarks()).
		OnOpen(func(ctx *guest.Context) {
			if b, ok := ctx.OperatorState("next"); ok {
				next = guest.AsInt64(b)
				restored = next > 1
			}
		}).
		OnBarrier(func(ctx *guest.Context, _ int64) { ctx.SetOperatorState("next", guest.Int64(next)) })
}

func atoi(b []byte) int64 {
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

type options struct {
	mode          string
	events        int64
	keys, perPoll int
	bWait         int
	forever       bool
	size, slide   time.Duration
	lower, upper  time.Duration
}

func parse(env *guest.Env) options {
	o := options{mode: "union", events: 1000, keys: 3, perPoll: 100, size: 100 * time.Millisecond,
		lower: -50 * time.Millisecond, upper: 50 * time.Millisecond}
	args := env.Args()
	for i := 0; i < len(args); i++ {
		if args[i] == "--forever" { // a switch: no value
			o.forever = true
			continue
		}
		if i+1 >= len(args) {
			env.Fail(fmt.Errorf("%s needs a value", args[i]))
			return o
		}
		v := args[i+1]
		n, err := strconv.ParseInt(v, 10, 64)
		if args[i] != "--mode" && err != nil {
			env.Fail(fmt.Errorf("%s %q: %v", args[i], v, err))
			return o
		}
		switch args[i] {
		case "--mode":
			o.mode = v
		case "--events":
			o.events = n
		case "--keys":
			o.keys = int(n)
		case "--size":
			o.size = time.Duration(n) * time.Millisecond
		case "--slide":
			o.slide = time.Duration(n) * time.Millisecond
		case "--lower":
			o.lower = time.Duration(n) * time.Millisecond
		case "--upper":
			o.upper = time.Duration(n) * time.Millisecond
		case "--per-poll":
			o.perPoll = int(n)
		case "--b-wait":
			o.bWait = int(n)
		default:
			env.Fail(fmt.Errorf("unknown argument %q", args[i]))
			return o
		}
		i++
	}
	return o
}

func main() {}
