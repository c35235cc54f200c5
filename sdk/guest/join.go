package guest

import "github.com/sluicehq/sluice/internal/jobgraph"

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
