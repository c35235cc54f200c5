package typed

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

// Joined is two typed streams to be joined on a key of type K: make one
// with Join, then give it windows (WindowJoin, WindowCoGroup) or an
// interval (IntervalJoin). Each is guest.Stream.Join's, with the elements
// decoded for your function.
type Joined[L, R, K any] struct {
	left  *Stream[L]
	right *Stream[R]
	key   Codec[K]
	j     *guest.JoinedStreams
}

// Join joins left and right where leftKey(l) equals rightKey(r), both
// keys encoded with key (two keys are equal when their encodings are), as
// Flink's left.join(right).where(leftKey).equalTo(rightKey).
func Join[L, R, K any](left *Stream[L], right *Stream[R], key Codec[K], leftKey func(L) K, rightKey func(R) K) *Joined[L, R, K] {
	if left.f.keyed() || right.f.keyed() {
		left.env.Fail(fmt.Errorf("Join: a stream of KV carries its key as the record's key, which the join replaces: Map it to a Tuple2 or a type of your own first"))
	}
	return &Joined[L, R, K]{left: left, right: right, key: key,
		j: left.s.Join(right.s, joinKey(left.f, key, leftKey), joinKey(right.f, key, rightKey))}
}

func joinKey[T, K any](f *form[T], key Codec[K], fn func(T) K) guest.KeyFunc {
	if fn == nil {
		return nil
	}
	kc := newVcodec(key)
	var buf []byte
	return func(r guest.Record) []byte {
		v, ok := f.v.fromBytes(r.Value)
		if !ok {
			v = f.v.must(r.Value, "join key")
		}
		k := fn(v)
		if b, ok := kc.bytesOf(&k); ok {
			return b
		}
		return kc.encode(&buf, k)
	}
}

// WindowJoin calls fn for each pair of a left and a right element of one
// key in one window (guest.WindowJoin.Apply); what it emits, encoded with
// out, carries the window's MaxTimestamp.
func WindowJoin[L, R, K, Out any](j *Joined[L, R, K], w guest.Windows, name string, out Codec[Out], fn func(l L, r R, out *Emitter[Out])) *Stream[Out] {
	if fn == nil {
		return WindowCoGroup[L, R, K, Out](j, w, name, out, nil)
	}
	return WindowCoGroup(j, w, name, out, func(_ *KeyedContext[K], _ guest.Window, ls []L, rs []R, e *Emitter[Out]) {
		for _, l := range ls {
			for _, r := range rs {
				fn(l, r, e)
			}
		}
	})
}

// WindowCoGroup calls fn once per key and window with the window's left
// and right elements (guest.WindowJoin.CoGroup); what it emits, encoded
// with out, carries the window's MaxTimestamp.
func WindowCoGroup[L, R, K, Out any](j *Joined[L, R, K], w guest.Windows, name string, out Codec[Out], fn func(ctx *KeyedContext[K], w guest.Window, ls []L, rs []R, out *Emitter[Out])) *Stream[Out] {
	of := formOf(out)
	wj := j.j.Window(w)
	if fn == nil {
		return &Stream[Out]{env: j.left.env, s: wj.CoGroup(name, nil), f: of}
	}
	lf, rf := j.left.f, j.right.f
	ctx := KeyedContext[K]{key: j.key}
	e := &Emitter[Out]{f: of}
	var ls []L
	var rs []R
	s := wj.CoGroup(name, func(kc *guest.KeyedContext, w guest.Window, lrecs, rrecs []guest.Record, c *guest.Collector) {
		ls, rs = ls[:0], rs[:0]
		for _, r := range lrecs {
			ls = append(ls, lf.must(r, name))
		}
		for _, r := range rrecs {
			rs = append(rs, rf.must(r, name))
		}
		ctx.KeyedContext = kc
		e.setInput(c, w.MaxTimestamp(), true)
		fn(&ctx, w, ls, rs, e)
	})
	return &Stream[Out]{env: j.left.env, s: s, f: of}
}

// IntervalJoin calls fn for each left element at t and right element of
// its key at a time in [t+lower, t+upper] (guest.JoinedStreams.Between);
// what it emits, encoded with out, carries the later of the two times.
func IntervalJoin[L, R, K, Out any](j *Joined[L, R, K], lower, upper time.Duration, name string, out Codec[Out], fn func(l L, r R, out *Emitter[Out])) *Stream[Out] {
	of := formOf(out)
	ij := j.j.Between(lower, upper)
	if fn == nil {
		return &Stream[Out]{env: j.left.env, s: ij.Process(name, nil), f: of}
	}
	lf, rf := j.left.f, j.right.f
	e := &Emitter[Out]{f: of}
	s := ij.Process(name, func(l, r guest.Record, c *guest.Collector) {
		e.setInput(c, max(l.Time, r.Time), true)
		fn(lf.must(l, name), rf.must(r, name), e)
	})
	return &Stream[Out]{env: j.left.env, s: s, f: of}
}
