// Command sessions is the job test harness's own test job: keyed Process
// with processing-time timers and keyed state, and a guest source that
// keeps its position in operator state.
//
// The source emits --events records round-robin over --keys keys ("k0",
// "k1", ...), each with value 1, 2, 3... (the event's number). The
// "session" operator sums each key's values in keyed state and, on every
// record, moves the key's timer to now + --gap ms; when the timer fires it
// emits "key<TAB>sum<TAB>count" and clears the key's state. Counters:
// "events" (records seen), "sessions" (timers fired).
//
// --files PATH writes the lines to the file sink instead of the collect
// sink. --mark-platform appends the GOOS to each output line: a job that behaves
// differently natively and in Wasm, for the harness's own tests.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"strconv"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() { guest.Job(plan) }

func main() {}

type options struct {
	events, keys int
	gap          int64
	mark         bool
	files        string
}

func plan(env *guest.Env) {
	var o options
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.IntVar(&o.events, "events", 100, "records the source emits")
	fs.IntVar(&o.keys, "keys", 4, "keys the records are spread over")
	fs.Int64Var(&o.gap, "gap", 10, "ms of processing time without a record that end a key's session")
	fs.BoolVar(&o.mark, "mark-platform", false, "append the GOOS to each output line")
	fs.StringVar(&o.files, "files", "", "write the sessions to this file-sink path instead of collecting them")
	if err := fs.Parse(env.Args()); err != nil {
		env.Fail(err)
		return
	}
	if o.keys < 1 || o.events < 0 || o.gap < 1 {
		env.Fail(fmt.Errorf("want --keys ≥ 1, --events ≥ 0 and --gap ≥ 1"))
		return
	}
	env.SetName("sessions")
	src := &source{o: o}
	out := env.Source("events", src.poll).
		SetParallelism(1). // one sequence of events; its position is one number
		OnOpen(src.open).
		OnBarrier(src.barrier).
		KeyBy("key", func(r guest.Record) []byte { return r.Key }).
		Process("session", func(ctx *guest.KeyedContext, r guest.Record, _ *guest.Collector) {
			session(ctx, r, o.gap)
		}).
		OnTimer(func(ctx *guest.KeyedContext, _ int64, out *guest.Collector) {
			fire(ctx, out, o.mark)
		}).
		Map("format", func(r guest.Record) guest.Record { return r })
	if o.files != "" {
		out.WriteFiles("files", o.files)
		return
	}
	out.Collect("out")
}

// source emits the records; next is its position, kept in operator state.
type source struct {
	o    options
	next int64
}

func (s *source) open(ctx *guest.Context) {
	if b, ok := ctx.OperatorState("next"); ok {
		s.next = guest.AsInt64(b)
	}
}

func (s *source) barrier(ctx *guest.Context, _ int64) {
	ctx.SetOperatorState("next", guest.Int64(s.next))
}

func (s *source) poll(ctx *guest.Context, max int, out *guest.Collector) bool {
	for i := 0; i < max && s.next < int64(s.o.events); i++ {
		k := "k" + strconv.FormatInt(s.next%int64(s.o.keys), 10)
		out.EmitKeyValue([]byte(k), guest.Int64(s.next+1))
		s.next++
	}
	return s.next >= int64(s.o.events)
}

// session adds r to its key's session and moves the key's timer.
func session(ctx *guest.KeyedContext, r guest.Record, gap int64) {
	guest.Count("events", 1)
	sum, _ := ctx.GetInt64("sum")
	n, _ := ctx.GetInt64("count")
	ctx.PutInt64("sum", sum+guest.AsInt64(r.Value))
	ctx.PutInt64("count", n+1)
	if at, ok := ctx.GetInt64("timer"); ok {
		ctx.DeleteTimer(at)
	}
	at := ctx.Now() + gap
	ctx.RegisterTimer(at)
	ctx.PutInt64("timer", at)
}

// fire emits the key's session and clears it.
func fire(ctx *guest.KeyedContext, out *guest.Collector, mark bool) {
	guest.Count("sessions", 1)
	sum, _ := ctx.GetInt64("sum")
	n, _ := ctx.GetInt64("count")
	line := fmt.Sprintf("%s\t%d\t%d", ctx.Key(), sum, n)
	if mark {
		line += "\t" + runtime.GOOS
	}
	out.EmitKeyValue(ctx.Key(), []byte(line))
	for _, name := range []string{"sum", "count", "timer"} {
		ctx.Delete(name)
	}
}
