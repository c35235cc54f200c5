package typed

import (
	"fmt"

	"github.com/sluicehq/sluice/sdk/guest"
)

// Windowed is a window's result for one key: what WindowReduce and
// WindowAggregate emit, with the record time Window.MaxTimestamp().
type Windowed[K, V any] struct {
	Key    K
	Window guest.Window
	Value  V
}

// WindowedCodec is the codec of Windowed[K, V]: the key, the window's start
// and end (Int64 each) and the value, as a Struct's fields are, all in the
// record's value.
func WindowedCodec[K, V any](k Codec[K], v Codec[V]) Codec[Windowed[K, V]] {
	return windowedCodec[K, V]{k, v}
}

type windowedCodec[K, V any] struct {
	k Codec[K]
	v Codec[V]
}

func (c windowedCodec[K, V]) Append(dst []byte, w Windowed[K, V]) []byte {
	dst = appendField(dst, c.k, w.Key)
	dst = Int64().Append(dst, w.Window.Start)
	dst = Int64().Append(dst, w.Window.End)
	return appendField(dst, c.v, w.Value)
}

func (c windowedCodec[K, V]) Decode(b []byte) (w Windowed[K, V], err error) {
	kp, rest, err := field(c.k, b, "windowed key")
	if err != nil {
		return w, err
	}
	if w.Key, err = c.k.Decode(kp); err != nil {
		return w, fmt.Errorf("windowed key: %w", err)
	}
	if len(rest) < 16 {
		return w, malformed("windowed bounds: %d bytes left, want 16", len(rest))
	}
	w.Window.Start, _ = Int64().Decode(rest[:8])
	w.Window.End, _ = Int64().Decode(rest[8:16])
	vp, rest, err := field(c.v, rest[16:], "windowed value")
	if err != nil {
		return w, err
	}
	if len(rest) != 0 {
		return w, malformed("windowed: %d trailing bytes", len(rest))
	}
	if w.Value, err = c.v.Decode(vp); err != nil {
		return w, fmt.Errorf("windowed value: %w", err)
	}
	return w, nil
}

// WindowedStream is a keyed stream of T grouped into windows: give it a
// function with WindowReduce, WindowAggregate or WindowProcess.
type WindowedStream[K, T any] struct {
	ks *KeyedStream[K, T]
	ws *guest.WindowedStream
}

// Window groups a keyed stream's elements into windows per key
// (guest.Tumbling, guest.Sliding, guest.Session; see guest.Windows).
func Window[K, T any](ks *KeyedStream[K, T], w guest.Windows) *WindowedStream[K, T] {
	return &WindowedStream[K, T]{ks: ks, ws: ks.s.Window(w)}
}

// WindowStream is a window operator's output, a stream of Out, and the
// way to its late elements.
type WindowStream[T, Out any] struct {
	*Stream[Out]
	in *form[T]
}

// Late returns the window operator's late output: the elements that
// arrived after all their windows' allowed lateness (guest.Stream.Late).
func (w *WindowStream[T, Out]) Late(name string) *Stream[T] {
	return &Stream[T]{env: w.env, s: w.s.Late(name), f: w.in}
}

// WindowReduce combines each window's elements into one, as Reduce does
// (a window's first element is its value, each next v makes it fn(value,
// v); for sessions that merge, fn combines two values), and emits
// Windowed{key, window, value} when the window fires.
func WindowReduce[K, T any](ws *WindowedStream[K, T], name string, fn func(value, v T) T) *WindowStream[T, Windowed[K, T]] {
	ks := ws.ks
	wc := WindowedCodec(ks.key, ks.f.v.c)
	out := formOf(wc)
	if fn == nil {
		return &WindowStream[T, Windowed[K, T]]{Stream: &Stream[Windowed[K, T]]{env: ks.env, s: ws.ws.Reduce(name, nil), f: out}, in: ks.f}
	}
	in := ks.f.v
	var buf, added []byte
	red := func(acc, v []byte) []byte {
		return append(acc[:0], in.encode(&buf, fn(in.must(acc, name), in.must(v, name)))...)
	}
	s := ws.ws.Aggregate(name, guest.Aggregator{
		// Add's result is copied into the window's state before the next
		// call, so it can reuse one buffer; Merge's is kept while sessions
		// merge, so it has its own.
		Add: func(acc []byte, r guest.Record) []byte {
			v := r.Value
			if len(acc) > 0 { // not the window's first element
				v = red(acc[1:], r.Value)
			}
			added = append(append(added[:0], 1), v...)
			return added
		},
		Merge: func(a, b []byte) []byte { return markAcc(red(a[1:], b[1:])) },
		Result: func(dst, key []byte, w guest.Window, acc []byte) []byte {
			return appendWindowed(dst, ks.key, wc, key, w, in.must(acc[1:], name), name)
		},
	})
	return &WindowStream[T, Windowed[K, T]]{Stream: &Stream[Windowed[K, T]]{env: ks.env, s: s, f: out}, in: ks.f}
}

// markAcc is a WindowReduce accumulator: a marker byte and the value, so
// that an empty encoding (an empty string) is a value, not "none yet".
func markAcc(v []byte) []byte { return append([]byte{1}, v...) }

func appendWindowed[K, V any](dst []byte, kc Codec[K], wc Codec[Windowed[K, V]], key []byte, w guest.Window, v V, name string) []byte {
	k, err := kc.Decode(key)
	if err != nil {
		panic(fmt.Sprintf("%q: decode the key: %v", name, err))
	}
	return wc.Append(dst, Windowed[K, V]{Key: k, Window: w, Value: v})
}

// MergingAggregateFunction is an AggregateFunction that can merge two
// accumulators, which session windows need.
type MergingAggregateFunction[T, A, R any] interface {
	AggregateFunction[T, A, R]
	// Merge combines the accumulators of two sessions that merged.
	Merge(a, b A) A
}

// WindowAggregate folds each window's elements with agg, keeping the
// accumulator (encoded with acc) in keyed state, and emits Windowed{key,
// window, agg.GetResult(accumulator)} (the result encoded with result)
// when the window fires. Session windows need agg to be a
// MergingAggregateFunction.
func WindowAggregate[K, T, A, R any](ws *WindowedStream[K, T], name string, agg AggregateFunction[T, A, R], acc Codec[A], result Codec[R]) *WindowStream[T, Windowed[K, R]] {
	ks := ws.ks
	wc := WindowedCodec(ks.key, result)
	out := formOf(wc)
	if agg == nil {
		return &WindowStream[T, Windowed[K, R]]{Stream: &Stream[Windowed[K, R]]{env: ks.env, s: ws.ws.Aggregate(name, guest.Aggregator{}), f: out}, in: ks.f}
	}
	in, ac := ks.f.v, newVcodec(acc)
	var buf, created []byte
	dec := func(b []byte) A {
		a, err := ac.decode(b)
		if err != nil {
			panic(fmt.Sprintf("window aggregate %q: decode an accumulator: %v", name, err))
		}
		return a
	}
	enc := func(dst []byte, a A) []byte { return append(dst[:0], ac.encode(&buf, a)...) }
	g := guest.Aggregator{
		// Create's result is Add's first accumulator and goes into the
		// window's state before the next call: one buffer does.
		Create: func() []byte { created = enc(created, agg.CreateAccumulator()); return created },
		Add:    func(accB []byte, r guest.Record) []byte { return enc(accB, agg.Add(in.must(r.Value, name), dec(accB))) },
		Result: func(dst, key []byte, w guest.Window, accB []byte) []byte {
			return appendWindowed(dst, ks.key, wc, key, w, agg.GetResult(dec(accB)), name)
		},
	}
	if m, ok := agg.(MergingAggregateFunction[T, A, R]); ok {
		g.Merge = func(a, b []byte) []byte { return enc(nil, m.Merge(dec(a), dec(b))) }
	}
	s := ws.ws.Aggregate(name, g)
	return &WindowStream[T, Windowed[K, R]]{Stream: &Stream[Windowed[K, R]]{env: ks.env, s: s, f: out}, in: ks.f}
}

// WindowProcessFunc sees all of a window's elements, in arrival order, when
// it fires; what it emits carries the window's MaxTimestamp as its time.
type WindowProcessFunc[K, T, Out any] func(ctx *KeyedContext[K], w guest.Window, vs []T, out *Emitter[Out])

// WindowProcess keeps every element of a window (in keyed state) and calls
// fn with them when it fires. Its output elements are encoded with out.
func WindowProcess[K, T, Out any](ws *WindowedStream[K, T], name string, out Codec[Out], fn WindowProcessFunc[K, T, Out]) *WindowStream[T, Out] {
	ks := ws.ks
	of := formOf(out)
	if fn == nil {
		return &WindowStream[T, Out]{Stream: &Stream[Out]{env: ks.env, s: ws.ws.Process(name, nil), f: of}, in: ks.f}
	}
	in := ks.f
	ctx := KeyedContext[K]{key: ks.key}
	e := &Emitter[Out]{f: of}
	var vs []T
	s := ws.ws.Process(name, func(kc *guest.KeyedContext, w guest.Window, recs []guest.Record, c *guest.Collector) {
		vs = vs[:0]
		for _, r := range recs {
			vs = append(vs, in.must(r, name))
		}
		ctx.KeyedContext = kc
		e.setInput(c, w.MaxTimestamp(), true)
		fn(&ctx, w, vs, e)
	})
	return &WindowStream[T, Out]{Stream: &Stream[Out]{env: ks.env, s: s, f: of}, in: ks.f}
}
