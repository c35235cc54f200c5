// Command exactlyonce proves Sluice's exactly-once promise end to end. A
// deterministic source emits, for each of --keys keys, the sequence numbers
// 1..--per-key in round-robin order, keeping its position in operator state.
// A keyed reduce checks that each key's sequence goes up by exactly one: a
// lost or repeated record, or state restored from the wrong place, shows up
// as a violation (counted in the "violations" accumulator and kept in the
// key's state).
//
// Output, one of:
//   - --out PATH: every checked record as "key<TAB>seq" through the
//     transactional file sink; after any number of failures the committed
//     files hold each (key, seq) exactly once.
//   - --records: every checked record as "key<TAB>seq" through the collect
//     sink, released to the client as checkpoints complete (exactly once as
//     well: what a client read is never taken back by a restore).
//   - otherwise: each key's final state "key<TAB>last<TAB>count<TAB>violations"
//     collected with the job result (a bounded job's keyed state, comparable
//     across savepoint resumes and rescales).
//
// --unbounded keeps the source open once its sequences are done: the job
// then runs until it is canceled or stopped, as a streaming job does.
//
// --rate bounds the records per second (0: as fast as possible), so a test
// or a demo has time to kill TaskManagers, take savepoints and stop the job.
// --barrier-delay makes each barrier hook busy for that long, to widen the
// window between a checkpoint's trigger and its completion. Both pace
// themselves by real time, so they need the job config sandbox.clock=wall
// (-C sandbox.clock=wall): by default a guest's clock is virtual.
package main

import (
	"encoding/binary"
	"errors"

	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() { guest.Job(plan) }

func main() {}

type options struct {
	keys, perKey int
	rate         int
	out          string
	records      bool
	unbounded    bool
	barrierDelay time.Duration
}

func plan(env *guest.Env) {
	var o options
	fs := flag.NewFlagSet("exactlyonce", flag.ContinueOnError)
	fs.IntVar(&o.keys, "keys", 16, "number of keys")
	fs.IntVar(&o.perKey, "per-key", 10000, "sequence numbers per key")
	fs.IntVar(&o.rate, "rate", 0, "records per second at most (0: unbounded)")
	fs.StringVar(&o.out, "out", "", "write every checked record to this file-sink path (default: collect each key's final state)")
	fs.BoolVar(&o.records, "records", false, "collect every checked record (default: collect each key's final state)")
	fs.BoolVar(&o.unbounded, "unbounded", false, "keep the source open after its sequences: run until canceled or stopped")
	fs.DurationVar(&o.barrierDelay, "barrier-delay", 0, "keep each barrier hook of the check busy this long")
	if err := fs.Parse(env.Args()); err != nil {
		env.Fail(err)
		return
	}
	switch {
	case o.keys < 1 || o.keys > 1_000_000:
		env.Fail(fmt.Errorf("--keys %d: want 1 to 1000000", o.keys))
		return
	case o.perKey < 1:
		env.Fail(fmt.Errorf("--per-key %d: want at least 1", o.perKey))
		return
	case o.rate < 0:
		env.Fail(fmt.Errorf("--rate %d: must not be negative", o.rate))
		return
	case o.records && o.out != "":
		env.Fail(errors.New("--records and --out: choose one output"))
		return
	}
	env.SetName("exactlyonce")
	src := &source{o: o}
	checked := env.Source("sequences", src.poll).
		SetParallelism(1). // one deterministic sequence; its position is one number
		OnOpen(src.open).
		OnBarrier(src.barrier).
		KeyBy("key", func(r guest.Record) []byte { return r.Key })
	if o.out == "" && !o.records {
		checked.Reduce("check", check, guest.EmitFinal()).Map("format", formatFinal).Collect("final")
		return
	}
	s := checked.Reduce("check", check).Map("format", formatRecord)
	if o.barrierDelay > 0 {
		s.OnBarrier(func(ctx *guest.Context, _ int64) { busy(ctx, o.barrierDelay) })
	}
	if o.records {
		s.Collect("records")
		return
	}
	s.WriteFiles("out", o.out)
}

// source emits (key, seq) pairs; emitted is its position: how many records
// it has emitted in all.
type source struct {
	o       options
	emitted int64
	start   int64 // processing time of open, for --rate
	base    int64 // emitted at open
}

const positionState = "emitted"

func (s *source) open(ctx *guest.Context) {
	if (s.o.rate > 0 || s.o.barrierDelay > 0) && ctx.Now() == 0 {
		panic(errors.New("--rate and --barrier-delay pace by real time: run the job with -C sandbox.clock=wall"))
	}
	if b, ok := ctx.OperatorState(positionState); ok && len(b) == 8 {
		s.emitted = int64(binary.LittleEndian.Uint64(b))
	}
	s.start, s.base = ctx.Now(), s.emitted
}

func (s *source) barrier(ctx *guest.Context, _ int64) {
	ctx.SetOperatorState(positionState, guest.Int64(s.emitted))
}

var key, val []byte

func (s *source) poll(ctx *guest.Context, max int, out *guest.Collector) bool {
	total := int64(s.o.keys) * int64(s.o.perKey)
	n := int64(max)
	if s.o.rate > 0 {
		allowed := s.base + (ctx.Now()-s.start)*int64(s.o.rate)/1000
		n = min(n, allowed-s.emitted)
	}
	for i := int64(0); i < n && s.emitted < total; i++ {
		k := s.emitted % int64(s.o.keys)
		seq := s.emitted/int64(s.o.keys) + 1
		key = strconv.AppendInt(append(key[:0], 'k'), k, 10)
		val = guest.PutInt64(val[:0], seq)
		out.EmitKeyValue(key, val)
		s.emitted++
	}
	return s.emitted >= total && !s.o.unbounded
}

// declared: this task declared the violations counter.
var declared bool

// The accumulator: last seq, records seen, violations; 8 bytes each.
const accSize = 24

// check folds a record into its key's accumulator, counting a violation
// whenever the sequence does not go up by exactly one.
func check(acc []byte, r guest.Record) []byte {
	if len(acc) != accSize {
		acc = make([]byte, accSize)
	}
	last := int64(binary.LittleEndian.Uint64(acc[0:]))
	count := int64(binary.LittleEndian.Uint64(acc[8:]))
	bad := int64(binary.LittleEndian.Uint64(acc[16:]))
	seq := guest.AsInt64(r.Value)
	if !declared {
		// Declared by every task, so the job's accumulators say
		// "violations 0" rather than nothing.
		guest.Count("violations", 0)
		declared = true
	}
	if seq != last+1 {
		bad++
		guest.Count("violations", 1)
	}
	binary.LittleEndian.PutUint64(acc[0:], uint64(seq))
	binary.LittleEndian.PutUint64(acc[8:], uint64(count+1))
	binary.LittleEndian.PutUint64(acc[16:], uint64(bad))
	return acc
}

var line []byte

// formatRecord turns a key's accumulator after one record into "key<TAB>seq".
func formatRecord(r guest.Record) guest.Record {
	line = append(append(line[:0], r.Key...), '\t')
	line = strconv.AppendInt(line, int64(binary.LittleEndian.Uint64(r.Value)), 10)
	return guest.Record{Value: line}
}

// formatFinal turns a key's final accumulator into
// "key<TAB>last<TAB>count<TAB>violations".
func formatFinal(r guest.Record) guest.Record {
	line = append(line[:0], r.Key...)
	for i := 0; i < accSize; i += 8 {
		line = append(line, '\t')
		line = strconv.AppendInt(line, int64(binary.LittleEndian.Uint64(r.Value[i:])), 10)
	}
	return guest.Record{Value: line}
}

// busy spins until d of processing time has passed: a slow barrier hook.
func busy(ctx *guest.Context, d time.Duration) {
	until := ctx.Now() + d.Milliseconds()
	for ctx.Now() < until {
	}
}
