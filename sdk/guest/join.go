package guest

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Joins (docs/RATIONALE.md, "Why is a join a union of tagged records?"):
// each side's records are keyed by its key function and tagged with a
// side byte in front of the value by one KeyBy operator chained to the
// side ("<name>.left", "<name>.right"); both feed the join operator by
// hash edges, so the join operator is a keyed operator with two inputs
// whose task merges the watermarks and aligns the barriers of both, and
// the join itself is keyed state and event-time timers as any window or
// Process operator: no ABI of its own.

// Join sides: the byte in front of a tagged record's value.
const (
	sideLeft  byte = 0
	sideRight byte = 1
)

// JoinFunc is called once for each pair of a left and a right record with
// the same key in the same window (or, in an interval join, within the
// interval), Flink's FlatJoinFunction; what it emits carries the window's
// MaxTimestamp (an interval join: the later of the two records' times).
type JoinFunc func(left, right Record, out *Collector)

// CoGroupFunc is called once per key and window that has records on
// either side, with all the left and all the right records of the key
// in the window, each in the order they arrived (Flink's
// CoGroupFunction): one side may be empty. What it emits carries the
// window's MaxTimestamp.
type CoGroupFunc func(ctx *KeyedContext, w Window, left, right []Record, out *Collector)

// JoinedStreams is two streams to be joined on a key: give it windows
// with Window, or an interval with Between.
type JoinedStreams struct {
	left, right       *Stream
	leftKey, rightKey KeyFunc
}

// Join joins s (the left side) with other (the right) where
// leftKey(left record) equals rightKey(right record), as Flink's
// s.join(other).where(leftKey).equalTo(rightKey): follow it with Window
// (a window join) or Between (an interval join). The sides' records keep
// their times, so the sources need watermark strategies (the join's
// watermark is the smaller of the two sides').
func (s *Stream) Join(other *Stream, leftKey, rightKey KeyFunc) *JoinedStreams {
	e := s.env
	switch {
	case other == nil:
		e.fail("Join: the other stream is nil")
		other = s
	case other.env != e:
		e.fail("Join: the other stream (%q) comes from another Env: join only streams of one job", other.op.name)
	case leftKey == nil || rightKey == nil:
		e.fail("Join of %q and %q: nil key function: give both sides one", s.op.name, other.op.name)
	}
	return &JoinedStreams{left: s, right: other, leftKey: leftKey, rightKey: rightKey}
}

// side adds the KeyBy that keys and tags one side's records.
func (j *JoinedStreams) side(name string, s *Stream, key KeyFunc, tag byte) *KeyedStream {
	k := s.KeyBy(name, key)
	k.s.op.joinSide = int16(tag) + 1
	return k
}

// WindowJoin is a join grouped into windows: give it a function with
// Apply or CoGroup.
type WindowJoin struct {
	j *JoinedStreams
	w Windows
}

// Window joins the records of each key that fall in the same window:
// tumbling or sliding, in event time or processing time (session windows
// are not for joins). The windows fire as KeyedStream.Window's do; a
// record whose windows all fired (beyond their allowed lateness) is late
// and dropped (counted in "<name>.late": a join has no late output).
func (j *JoinedStreams) Window(w Windows) *WindowJoin {
	if w.kind == windowSession {
		j.left.env.fail("Join.Window: %s: a join takes tumbling or sliding windows", w)
	}
	return &WindowJoin{j: j, w: w}
}

// Apply calls fn for each pair of a left and a right record with the same
// key in the same window (an inner join: a key and window with records on
// one side only emit nothing), when the window fires.
func (wj *WindowJoin) Apply(name string, fn JoinFunc) *Stream {
	var cg CoGroupFunc
	if fn != nil {
		cg = func(ctx *KeyedContext, w Window, left, right []Record, out *Collector) {
			for _, l := range left {
				for _, r := range right {
					fn(l, r, out)
				}
			}
		}
	}
	return wj.CoGroup(name, cg)
}

// CoGroup calls fn once per key and window with the window's left and
// right records, when the window fires.
func (wj *WindowJoin) CoGroup(name string, fn CoGroupFunc) *Stream {
	j := wj.j
	l := j.side(name+".left", j.left, j.leftKey, sideLeft)
	r := j.side(name+".right", j.right, j.rightKey, sideRight)
	var wo *windowOp
	if fn != nil {
		var left, right []Record
		wo = &windowOp{join: true, process: func(ctx *KeyedContext, w Window, recs []Record, out *Collector) {
			left, right = left[:0], right[:0]
			for _, rec := range recs {
				tag := rec.Value[0]
				rec.Value = rec.Value[1:]
				if tag == sideLeft {
					left = append(left, rec)
				} else {
					right = append(right, rec)
				}
			}
			fn(ctx, w, left, right, out)
		}}
	}
	out := l.Window(wj.w).add(name, wo, fn == nil)
	j.left.env.edges = append(j.left.env.edges, &edge{src: r.s.op, dst: out.op, part: jobgraph.Hash})
	r.s.op.hasOutput = true
	return out
}

// IntervalJoin is a join of each left record with the right records of
// its key whose times are within an interval of its own: give it a
// function with Process.
type IntervalJoin struct {
	j            *JoinedStreams
	lower, upper int64 // ms
}

// Between makes an interval join (Flink's intervalJoin(...).between(lower,
// upper)): a left record at time t joins the right records of its key at
// times in [t+lower, t+upper], both bounds included; lower may be
// negative and must be at most upper. Each side's records wait in keyed
// state until the watermark passes the last time a record of the other
// side could join them, so the state holds about (upper-lower) of event
// time per key. A record at or below the watermark is late and dropped
// (counted in "<name>.late").
func (j *JoinedStreams) Between(lower, upper time.Duration) *IntervalJoin {
	if lower > upper {
		j.left.env.fail("Join.Between(%v, %v): the lower bound is above the upper one, so no record would join: use lower ≤ upper", lower, upper)
	}
	return &IntervalJoin{j: j, lower: lower.Milliseconds(), upper: upper.Milliseconds()}
}

// Process calls fn for each left and right record of one key whose times
// are within the interval, as soon as the later of the two arrives; what
// fn emits carries the later of the two records' times.
func (ij *IntervalJoin) Process(name string, fn JoinFunc) *Stream {
	j := ij.j
	l := j.side(name+".left", j.left, j.leftKey, sideLeft)
	r := j.side(name+".right", j.right, j.rightKey, sideRight)
	o := l.s.then(name, jobgraph.KindProcess, fn == nil)
	j.left.env.edges = append(j.left.env.edges, &edge{src: r.s.op, dst: o, part: jobgraph.Hash})
	r.s.op.hasOutput = true
	o.config = map[string]string{configInterval: fmt.Sprintf("between %dms and %dms", ij.lower, ij.upper)}
	in := &intervalJoin{op: o, fn: fn, lower: ij.lower, upper: ij.upper}
	o.interval = in
	o.process = in.element
	o.eventTimer = in.cleanup
	return &Stream{env: j.left.env, op: o}
}

// configInterval is the vertex config key that describes an interval
// join (docs/ABI.md), for people reading the plan; the host ignores it.
const configInterval = "interval"

// intervalJoin is an interval join operator's state: per key, one state
// entry per side ("L", "R") with the side's waiting records (the window
// records' encoding), and an event timer at each record's cleanup time.
type intervalJoin struct {
	op           *op
	fn           JoinFunc
	lower, upper int64

	buf, other []byte
	recs       windowRecords
	emit       windowEmit
}

var intervalState = [2]string{"L", "R"}

// cleanupAt is when a record of side at ts can no longer join: once the
// watermark reaches it, every record of the other side still to come is
// too late to be in its interval.
func (in *intervalJoin) cleanupAt(side byte, ts int64) int64 {
	if side == sideLeft {
		return max(ts, ts+in.upper)
	}
	return max(ts, ts-in.lower)
}

func (in *intervalJoin) element(ctx *KeyedContext, r Record, out *Collector) {
	if !r.HasTime {
		panic(fmt.Sprintf("interval join %q: a record without an event time: give the sources watermark strategies and emit records with their times", in.op.name))
	}
	side := r.Value[0]
	if r.Time <= ctx.Watermark() {
		ctx.Count(in.op.name+".late", 1)
		return
	}
	r.Value = r.Value[1:]
	// Join with the other side's waiting records in the interval.
	if b, ok := ctx.Get(intervalState[1-side]); ok {
		in.other = append(in.other[:0], b...)
		in.emit.out = out
		c := Collector{next: &in.emit}
		for _, o := range in.recs.decode(in.op.name, ctx.Key(), in.other) {
			lt, rt := r.Time, o.Time
			if side == sideRight {
				lt, rt = o.Time, r.Time
			}
			if rt < lt+in.lower || rt > lt+in.upper {
				continue
			}
			in.emit.time = max(lt, rt)
			if side == sideLeft {
				in.fn(r, o, &c)
			} else {
				in.fn(o, r, &c)
			}
		}
	}
	old, _ := ctx.Get(intervalState[side])
	in.buf = appendWindowRecord(append(in.buf[:0], old...), r)
	ctx.Put(intervalState[side], in.buf)
	ctx.RegisterEventTimer(in.cleanupAt(side, r.Time))
}

// cleanup drops the records whose cleanup time is t or before.
func (in *intervalJoin) cleanup(ctx *KeyedContext, t int64, _ *Collector) {
	for side, name := range intervalState {
		b, ok := ctx.Get(name)
		if !ok {
			continue
		}
		in.other = append(in.other[:0], b...)
		in.buf = in.buf[:0]
		for _, o := range in.recs.decode(in.op.name, ctx.Key(), in.other) {
			if in.cleanupAt(byte(side), o.Time) > t {
				in.buf = appendWindowRecord(in.buf, o)
			}
		}
		if len(in.buf) == 0 {
			ctx.Delete(name)
		} else {
			ctx.Put(name, in.buf)
		}
	}
}
