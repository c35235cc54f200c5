package typed

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/sluicehq/sluice/sdk/guest"
)

// KV is an element of a keyed result: a Reduce's, Fold's or Aggregate's
// key and value. A stream of KV carries Key as the record's key and Value as
// its value (no copy of the key into the value); the host's collect and
// file sinks write the Value.
type KV[K, V any] struct {
	Key   K
	Value V
}

// KeyValue is the codec of KV[K, V]. As the codec of a stream (the output
// of Map or FlatMap) it puts Key in the record's key and Value in its value;
// nested in another codec (Slice, Pair, a Struct field, state) it encodes as
// Pair does.
func KeyValue[K, V any](k Codec[K], v Codec[V]) Codec[KV[K, V]] { return kvCodec[K, V]{k, v} }

type kvCodec[K, V any] struct {
	k Codec[K]
	v Codec[V]
}

func (c kvCodec[K, V]) Append(dst []byte, e KV[K, V]) []byte {
	return appendField(appendField(dst, c.k, e.Key), c.v, e.Value)
}

func (c kvCodec[K, V]) Decode(b []byte) (KV[K, V], error) {
	t, err := tuple2Codec[K, V]{c.k, c.v}.Decode(b)
	return KV[K, V]{t.A, t.B}, err
}

func (c kvCodec[K, V]) kvForm() kvOps[KV[K, V]] { return newKVForm(c.k, c.v) }

// kind names the built-in codecs an operator handles inline: Go's Wasm
// code pays for every call, and a call through the Codec interface costs
// two (the interface's and the generic dictionary's), which would be most
// of a word count's per-record cost.
type kind uint8

const (
	kindOther kind = iota
	kindString
	kindBytes
	kindInt64
)

// vcodec is a codec with its kind: decode and encode inline the built-in
// kinds, and call the Codec for the others.
type vcodec[T any] struct {
	k kind
	c Codec[T]
}

func newVcodec[T any](c Codec[T]) vcodec[T] {
	v := vcodec[T]{c: c}
	// The kinds are the codecs' own types, so T is string, []byte or
	// int64 when they match, and the unsafe casts below are identities.
	switch any(c).(type) {
	case stringCodec:
		v.k = kindString
	case bytesCodec:
		v.k = kindBytes
	case int64Codec:
		v.k = kindInt64
	}
	return v
}

// decode decodes b.
func (v *vcodec[T]) decode(b []byte) (T, error) {
	if x, ok := v.fromBytes(b); ok {
		return x, nil
	}
	if x, ok := v.fromInt64(b); ok {
		return x, nil
	}
	return v.c.Decode(b)
}

// must is decode for an operator's input, which fails the task (a panic,
// which the SDK turns into the task's error) when it does not decode.
func (v *vcodec[T]) must(b []byte, op string) T {
	x, err := v.decode(b)
	if err != nil {
		panic(decodeFailed(op, err))
	}
	return x
}

// The fast paths below have no calls, so they inline into the operators'
// closures: a string or byte slice is its record's bytes (a string is the
// first two words of a slice header), an int64 its 8 bytes.

func (v *vcodec[T]) fromBytes(b []byte) (x T, ok bool) {
	if v.k == kindString || v.k == kindBytes {
		return *(*T)(unsafe.Pointer(&b)), true
	}
	return x, false
}

func (v *vcodec[T]) fromInt64(b []byte) (x T, ok bool) {
	if v.k == kindInt64 && len(b) == 8 {
		n := binary.LittleEndian.Uint64(b)
		return *(*T)(unsafe.Pointer(&n)), true
	}
	return x, false
}

func (v *vcodec[T]) bytesOf(x *T) ([]byte, bool) {
	switch v.k {
	case kindString:
		s := *(*string)(unsafe.Pointer(x))
		return unsafe.Slice(unsafe.StringData(s), len(s)), true
	case kindBytes:
		return *(*[]byte)(unsafe.Pointer(x)), true
	}
	return nil, false
}

// encode returns x's encoding: x's own bytes for strings and byte slices,
// else appended to *buf (emptied first).
func (v *vcodec[T]) encode(buf *[]byte, x T) []byte {
	if b, ok := v.bytesOf(&x); ok {
		return b
	}
	if v.k == kindInt64 {
		*buf = binary.LittleEndian.AppendUint64((*buf)[:0], *(*uint64)(unsafe.Pointer(&x)))
		return *buf
	}
	*buf = v.c.Append((*buf)[:0], x)
	return *buf
}

// encodeAcc is encode for a Reduce's accumulator acc (the SDK's, to modify
// in place or replace): an int64 is written over acc, without a copy;
// anything else is encoded into *buf, as it may alias acc.
func (v *vcodec[T]) encodeAcc(acc []byte, buf *[]byte, x T) []byte {
	if v.k == kindInt64 && cap(acc) >= 8 {
		acc = acc[:8]
		binary.LittleEndian.PutUint64(acc, *(*uint64)(unsafe.Pointer(&x)))
		return acc
	}
	return v.encode(buf, x)
}

// form is how a stream's elements sit in records: as the record's value
// (most streams), or as its key and value (streams of KV, kv set).
type form[T any] struct {
	v  vcodec[T]
	kv kvOps[T]
	// countKV: T is KV[string, int64] with String and Int64 as its codecs
	// (a Count's or Sum's output), which fast decodes inline.
	countKV bool
}

// kvOps is the form of a stream of KV.
type kvOps[T any] interface {
	decode(r guest.Record) (T, error)
	record(sc *scratch, v T) guest.Record
}

// scratch is an operator's encoding buffers, reused for every record: the
// SDK copies what it is given before the call returns.
type scratch struct{ k, v []byte }

func formOf[T any](c Codec[T]) *form[T] {
	if f, ok := c.(interface{ kvForm() kvOps[T] }); ok {
		return &form[T]{v: newVcodec(c), kv: f.kvForm()}
	}
	return &form[T]{v: newVcodec(c)}
}

func (f *form[T]) keyed() bool { return f.kv != nil }

// fast is decode's inline case: a value form of strings or bytes, or a
// countKV form.
func (f *form[T]) fast(r *guest.Record) (x T, ok bool) {
	if f.kv == nil {
		return f.v.fromBytes(r.Value)
	}
	if f.countKV && r.HasKey && len(r.Value) == 8 {
		// T is KV[string, int64] (checked at plan time by the codecs'
		// types): the cast is an identity.
		kv := KV[string, int64]{
			Key:   unsafe.String(unsafe.SliceData(r.Key), len(r.Key)),
			Value: int64(binary.LittleEndian.Uint64(r.Value)),
		}
		return *(*T)(unsafe.Pointer(&kv)), true
	}
	return x, false
}

// must is decode for an operator's input: a record that does not decode
// fails the task.
func (f *form[T]) must(r guest.Record, op string) T {
	var x T
	var err error
	if f.kv != nil {
		x, err = f.kv.decode(r)
	} else {
		x, err = f.v.decode(r.Value)
	}
	if err != nil {
		panic(decodeFailed(op, err))
	}
	return x
}

func (f *form[T]) decode(r guest.Record) (T, error) {
	if f.kv == nil {
		return f.v.decode(r.Value)
	}
	return f.kv.decode(r)
}

// record is v as a record, encoded into sc.
func (f *form[T]) record(sc *scratch, v T) guest.Record {
	if f.kv == nil {
		return guest.Record{Value: f.v.encode(&sc.v, v)}
	}
	return f.kv.record(sc, v)
}

type kvForm[K, V any] struct {
	k vcodec[K]
	v vcodec[V]
}

func newKVForm[K, V any](k Codec[K], v Codec[V]) *form[KV[K, V]] {
	kf := &kvForm[K, V]{newVcodec(k), newVcodec(v)}
	return &form[KV[K, V]]{
		v:       newVcodec[KV[K, V]](kvCodec[K, V]{k, v}),
		kv:      kf,
		countKV: kf.k.k == kindString && kf.v.k == kindInt64,
	}
}

func (f *kvForm[K, V]) decode(r guest.Record) (e KV[K, V], err error) {
	if !r.HasKey {
		return e, malformed("a KV record without a key")
	}
	// The common keyed results (string keys, int64 or string values)
	// inline, as the operators do.
	var ok bool
	if e.Key, ok = f.k.fromBytes(r.Key); !ok {
		if e.Key, err = f.k.decode(r.Key); err != nil {
			return e, fmt.Errorf("key: %w", err)
		}
	}
	if f.v.k == kindInt64 && len(r.Value) == 8 {
		n := binary.LittleEndian.Uint64(r.Value)
		e.Value = *(*V)(unsafe.Pointer(&n))
		return e, nil
	}
	if e.Value, ok = f.v.fromBytes(r.Value); ok {
		return e, nil
	}
	if e.Value, err = f.v.decode(r.Value); err != nil {
		return e, fmt.Errorf("value: %w", err)
	}
	return e, nil
}

func (f *kvForm[K, V]) record(sc *scratch, e KV[K, V]) guest.Record {
	return guest.Record{Key: f.k.encode(&sc.k, e.Key), HasKey: true, Value: f.v.encode(&sc.v, e.Value)}
}

// decodeFailed is the panic of an operator whose input does not decode:
// the task fails with it (the SDK turns a panic into the task's error).
func decodeFailed(op string, err error) string {
	return fmt.Sprintf("%q: decode an input record: %v (the codec given to the operator that produced the stream does not match what reads it)", op, err)
}

// Stream is a stream of elements of type T: the output of one operator.
// Methods add operators that keep the type (Filter, the sinks); package
// functions add the ones that change it (Map, FlatMap, KeyBy), because Go
// methods cannot have type parameters.
type Stream[T any] struct {
	env *guest.Env
	s   *guest.Stream
	f   *form[T]
}

// Of wraps a byte-level stream of env whose records are c's encodings of T:
// the way from the byte-level API into this one.
func Of[T any](env *guest.Env, s *guest.Stream, c Codec[T]) *Stream[T] {
	return &Stream[T]{env: env, s: s, f: formOf(c)}
}

// Bytes returns the byte-level stream underneath, for what this package
// does not wrap.
func (s *Stream[T]) Bytes() *guest.Stream { return s.s }

// KeyedStream is a stream of T partitioned by a key of type K: elements with
// the same key reach the same subtask, where keyed state and timers are kept
// per key. Make one with KeyBy.
type KeyedStream[K, T any] struct {
	env *guest.Env
	s   *guest.KeyedStream
	key Codec[K]
	f   *form[T]
}

// Emitter passes elements of type T to the next operator.
type Emitter[T any] struct {
	c       *guest.Collector
	f       *form[T]
	sc      scratch
	time    int64
	hasTime bool
	plain   bool // a value, without a time: Emit's inline case
}

// Emit passes v on. The SDK copies it before Emit returns, so v may alias
// your function's input or a buffer you reuse. It keeps the timestamp of
// the input record being handled, if it has one.
func (e *Emitter[T]) Emit(v T) {
	if e.plain {
		if b, ok := e.f.v.bytesOf(&v); ok {
			e.c.EmitValue(b)
			return
		}
	}
	e.emitRecord(v)
}

// EmitText emits the string whose bytes are text, without making the
// string: the SDK copies text before EmitText returns, so a tokenizer can
// lower-case words into one buffer it reuses instead of allocating a string
// per word (an allocation is among the dearest things in Go's Wasm code).
func EmitText(out *Emitter[string], text []byte) {
	if out.plain && out.f.v.k == kindString {
		out.c.EmitValue(text)
		return
	}
	out.Emit(string(text))
}

func (e *Emitter[T]) emitRecord(v T) {
	if e.f.kv == nil && !e.hasTime {
		e.c.EmitValue(e.f.v.encode(&e.sc.v, v))
		return
	}
	r := e.f.record(&e.sc, v)
	r.Time, r.HasTime = e.time, e.hasTime
	e.c.Emit(r)
}

// setInput readies e for the elements of one input record.
func (e *Emitter[T]) setInput(c *guest.Collector, time int64, hasTime bool) {
	e.c, e.time, e.hasTime = c, time, hasTime
	e.plain = e.f.kv == nil && !hasTime
}

// TextLines reads text files line by line with the host's "text" connector:
// one string per line, without its newline. Each path is a file or a glob
// pattern, resolved by the cluster.
func TextLines(env *guest.Env, name string, paths ...string) *Stream[string] {
	return Of(env, env.TextSource(name, paths...), String())
}

// SourceFunc produces up to max elements through out and reports whether the
// source has ended. Keep its position in operator state (OperatorState,
// written in an OnBarrier hook and read back in OnOpen) so it resumes after a
// failure.
type SourceFunc[T any] func(ctx *guest.Context, max int, out *Emitter[T]) (done bool)

// Source adds a source written in Go, whose elements c encodes.
func Source[T any](env *guest.Env, name string, c Codec[T], fn SourceFunc[T]) *Stream[T] {
	f := formOf(c)
	if fn == nil {
		return &Stream[T]{env: env, s: env.Source(name, nil), f: f}
	}
	e := &Emitter[T]{f: f}
	s := env.Source(name, func(ctx *guest.Context, max int, out *guest.Collector) bool {
		e.setInput(out, 0, false)
		return fn(ctx, max, e)
	})
	return &Stream[T]{env: env, s: s, f: f}
}

// Generate adds a source of n elements, fn(0), …, fn(n-1), or of elements
// without end when n is negative (until the job is stopped). It runs as one
// subtask, keeps its position in operator state (its OnOpen and OnBarrier
// hooks: do not set others on it), and so resumes after a failure or a
// savepoint where it was, at any parallelism of the rest of the job.
func Generate[T any](env *guest.Env, name string, c Codec[T], n int64, fn func(i int64) T) *Stream[T] {
	if fn == nil {
		return Source[T](env, name, c, nil)
	}
	pos := NewOperatorState("position", Int64())
	var next int64
	s := Source(env, name, c, func(ctx *guest.Context, max int, out *Emitter[T]) bool {
		for k := 0; k < max && (n < 0 || next < n); k++ {
			out.Emit(fn(next))
			next++
		}
		return n >= 0 && next >= n
	})
	s.s.SetParallelism(1).
		OnOpen(func(ctx *guest.Context) {
			v, ok, err := pos.Get(ctx)
			if err != nil {
				panic(fmt.Sprintf("generate %q: %v", name, err))
			}
			if ok {
				next = v
			}
		}).
		OnBarrier(func(ctx *guest.Context, _ int64) { pos.Set(ctx, next) })
	return s
}

// Map adds an operator that turns each element into one, encoded with out.
// The record's timestamp, if it has one, stays.
func Map[In, Out any](s *Stream[In], name string, out Codec[Out], fn func(v In) Out) *Stream[Out] {
	of := formOf(out)
	if fn == nil {
		return &Stream[Out]{env: s.env, s: s.s.Map(name, nil), f: of}
	}
	in := s.f
	var sc scratch
	m := s.s.Map(name, func(r guest.Record) guest.Record {
		v, ok := in.fast(&r)
		if !ok {
			v = in.must(r, name)
		}
		o := of.record(&sc, fn(v))
		o.Time, o.HasTime = r.Time, r.HasTime
		return o
	})
	return &Stream[Out]{env: s.env, s: m, f: of}
}

// Format adds an operator that turns each element into a line of text,
// appended by fn to line (empty, with room the SDK reuses), as the strconv
// and fmt Append functions do:
//
//	typed.Format(counts, "format", func(line []byte, c typed.KV[string, int64]) []byte {
//		return strconv.AppendInt(append(append(line, c.Key...), '\t'), c.Value, 10)
//	})
//
// It is Map to String without the string: Go strings are immutable, so a
// Map that builds one allocates it, and an allocation per element is
// among the dearest things in Go's Wasm code.
func Format[T any](s *Stream[T], name string, fn func(line []byte, v T) []byte) *Stream[string] {
	of := formOf(String())
	if fn == nil {
		return &Stream[string]{env: s.env, s: s.s.Map(name, nil), f: of}
	}
	in := s.f
	var line []byte
	m := s.s.Map(name, func(r guest.Record) guest.Record {
		v, ok := in.fast(&r)
		if !ok {
			v = in.must(r, name)
		}
		line = fn(line[:0], v)
		return guest.Record{Value: line, Time: r.Time, HasTime: r.HasTime}
	})
	return &Stream[string]{env: s.env, s: m, f: of}
}

// FlatMap adds an operator that turns each element into zero or more,
// passed to out's Emit and encoded with the codec out.
func FlatMap[In, Out any](s *Stream[In], name string, out Codec[Out], fn func(v In, out *Emitter[Out])) *Stream[Out] {
	of := formOf(out)
	if fn == nil {
		return &Stream[Out]{env: s.env, s: s.s.FlatMap(name, nil), f: of}
	}
	in := s.f
	e := &Emitter[Out]{f: of}
	m := s.s.FlatMap(name, func(r guest.Record, c *guest.Collector) {
		v, ok := in.fast(&r)
		if !ok {
			v = in.must(r, name)
		}
		e.setInput(c, r.Time, r.HasTime)
		fn(v, e)
	})
	return &Stream[Out]{env: s.env, s: m, f: of}
}

// Filter adds an operator that keeps the elements fn returns true for.
func (s *Stream[T]) Filter(name string, fn func(v T) bool) *Stream[T] {
	if fn == nil {
		return &Stream[T]{env: s.env, s: s.s.Filter(name, nil), f: s.f}
	}
	in := s.f
	return &Stream[T]{env: s.env, s: s.s.Filter(name, func(r guest.Record) bool {
		v, ok := in.fast(&r)
		if !ok {
			v = in.must(r, name)
		}
		return fn(v)
	}), f: s.f}
}

// KeyBy adds an operator that keys each element by fn(element), encoded
// with key; the operators after it see the stream partitioned by that key
// and keep keyed state per key. Two keys are the same key when their
// encodings are equal.
//
// # Notes
//
// A stream of KV (a Reduce's output) carries its key as the record's key,
// which KeyBy replaces: Map it to another type (a Tuple2, your struct)
// before keying it again. Planning such a job fails and says so.
func KeyBy[T, K any](s *Stream[T], name string, key Codec[K], fn func(v T) K) *KeyedStream[K, T] {
	if s.f.keyed() {
		s.env.Fail(fmt.Errorf("KeyBy %q reads a stream of KV, whose key travels as the record's key: Map it to a Tuple2 or a type of your own first", name))
	}
	if fn == nil {
		return &KeyedStream[K, T]{env: s.env, s: s.s.KeyBy(name, nil), key: key, f: s.f}
	}
	in := s.f.v // a value form: KV was refused above
	kc := newVcodec(key)
	var buf []byte
	ks := s.s.KeyBy(name, func(r guest.Record) []byte {
		v, ok := in.fromBytes(r.Value)
		if !ok {
			v = in.must(r.Value, name)
		}
		k := fn(v)
		if b, ok := kc.bytesOf(&k); ok {
			return b
		}
		return kc.encode(&buf, k)
	})
	return &KeyedStream[K, T]{env: s.env, s: ks, key: key, f: s.f}
}

// KeyByValue is KeyBy with each element its own key (encoded as the
// element is), as a word count keys its words: no function to call per
// element.
func KeyByValue[T any](s *Stream[T], name string) *KeyedStream[T, T] {
	if s.f.keyed() {
		s.env.Fail(fmt.Errorf("KeyByValue %q reads a stream of KV, whose key travels as the record's key: Map it to a Tuple2 or a type of your own first", name))
	}
	ks := s.s.KeyBy(name, func(r guest.Record) []byte { return r.Value })
	return &KeyedStream[T, T]{env: s.env, s: ks, key: s.f.v.c, f: s.f}
}

// SetParallelism sets the KeyBy operator's parallelism; by default it is
// its input's, so it chains to it.
func (k *KeyedStream[K, T]) SetParallelism(n int) *KeyedStream[K, T] {
	k.s.SetParallelism(n)
	return k
}

// Reduce combines each key's elements into one, as Flink's ReduceFunction:
// a key's first element is its value, and each next element v makes it
// fn(value, v). It emits KV{key, value} after every update, or once per key
// at the end of input with guest.EmitFinal().
//
// The values are kept as the stream's own encoding, in guest memory
// between checkpoint barriers and in keyed state at each (see the
// byte-level guest.KeyedStream.Reduce).
func Reduce[K, T any](ks *KeyedStream[K, T], name string, fn func(value, v T) T, opts ...guest.ReduceOption) *Stream[KV[K, T]] {
	vc := ks.f.v // a value form: KeyBy refuses streams of KV
	out := newKVForm(ks.key, vc.c)
	if fn == nil {
		return &Stream[KV[K, T]]{env: ks.env, s: ks.s.Reduce(name, nil, opts...), f: out}
	}
	var buf []byte
	s := ks.s.Reduce(name, func(acc []byte, r guest.Record) []byte {
		if acc == nil {
			return r.Value // the key's first element; the SDK copies it
		}
		a, err := vc.decode(acc)
		if err != nil {
			panic(fmt.Sprintf("reduce %q: decode a key's value: %v", name, err))
		}
		return vc.encodeAcc(acc, &buf, fn(a, vc.must(r.Value, name)))
	}, opts...)
	return &Stream[KV[K, T]]{env: ks.env, s: s, f: out}
}

// Fold folds each key's elements into an accumulator of type A, encoded with
// acc: a key's accumulator starts as A's zero value, and each element v
// makes it fn(accumulator, v). It emits KV{key, accumulator} after every
// update, or once per key at the end of input with guest.EmitFinal(). This
// is the byte-level Reduce, typed; a word count's is
//
//	typed.Fold(words, "count", typed.Int64(), func(n int64, _ string) int64 { return n + 1 })
func Fold[K, T, A any](ks *KeyedStream[K, T], name string, acc Codec[A], fn func(acc A, v T) A, opts ...guest.ReduceOption) *Stream[KV[K, A]] {
	out := newKVForm(ks.key, acc)
	if fn == nil {
		return &Stream[KV[K, A]]{env: ks.env, s: ks.s.Reduce(name, nil, opts...), f: out}
	}
	in, ac := ks.f.v, newVcodec(acc)
	var buf []byte
	s := ks.s.Reduce(name, func(accB []byte, r guest.Record) []byte {
		var a A
		if ac.k == kindInt64 && len(accB) == 8 {
			n := binary.LittleEndian.Uint64(accB)
			a = *(*A)(unsafe.Pointer(&n))
		} else if accB != nil {
			var err error
			if a, err = ac.decode(accB); err != nil {
				panic(fmt.Sprintf("fold %q: decode a key's accumulator: %v", name, err))
			}
		}
		v, ok := in.fromBytes(r.Value)
		if !ok {
			v = in.must(r.Value, name)
		}
		a = fn(a, v)
		if ac.k == kindInt64 && cap(accB) >= 8 {
			// The accumulator in place, as the byte-level word count's
			// guest.PutInt64 does.
			accB = accB[:8]
			binary.LittleEndian.PutUint64(accB, *(*uint64)(unsafe.Pointer(&a)))
			return accB
		}
		return ac.encodeAcc(accB, &buf, a)
	}, opts...)
	return &Stream[KV[K, A]]{env: ks.env, s: s, f: out}
}

// Count counts each key's elements, as Flink's `.keyBy(...).sum(1)` over
// (word, 1) pairs does: it emits KV{key, count} after every update, or once
// per key at the end of input with guest.EmitFinal(). It is
//
//	typed.Fold(ks, name, typed.Int64(), func(n int64, _ T) int64 { return n + 1 }, opts...)
//
// without a function to call per element, so it costs what the byte-level
// count does (guest.PutInt64 over the cached count), and keeps the same
// state: a key's count as 8 little-endian bytes, Int64's encoding.
func Count[K, T any](ks *KeyedStream[K, T], name string, opts ...guest.ReduceOption) *Stream[KV[K, int64]] {
	s := ks.s.Reduce(name, countOne, opts...)
	return &Stream[KV[K, int64]]{env: ks.env, s: s, f: newKVForm(ks.key, Int64())}
}

// countOne is Count's byte-level reduce function: a plain function, not a
// closure, as the byte-level word count's is.
func countOne(acc []byte, _ guest.Record) []byte {
	return guest.PutInt64(acc, guest.AsInt64(acc)+1)
}

// Sum adds up each key's elements, as Flink's sum does: a key's sum starts
// at 0 and each element v makes it sum+v (wrapping around on overflow, as
// Go's int64 does). It emits KV{key, sum} after every update, or once per
// key at the end of input with guest.EmitFinal(). The sum is kept and
// emitted in Int64's encoding whatever the elements' codec; elements in
// Int64's encoding are read inline, without a function call per element.
func Sum[K any](ks *KeyedStream[K, int64], name string, opts ...guest.ReduceOption) *Stream[KV[K, int64]] {
	in := ks.f.v // a value form: KeyBy refuses streams of KV
	s := ks.s.Reduce(name, func(acc []byte, r guest.Record) []byte {
		v, ok := in.fromInt64(r.Value)
		if !ok {
			v = in.must(r.Value, name)
		}
		return guest.PutInt64(acc, guest.AsInt64(acc)+v)
	}, opts...)
	return &Stream[KV[K, int64]]{env: ks.env, s: s, f: newKVForm(ks.key, Int64())}
}

// AggregateFunction is Flink's AggregateFunction for a keyed stream: it
// folds elements of type T into an accumulator of type A, and turns an
// accumulator into a result of type R.
type AggregateFunction[T, A, R any] interface {
	// CreateAccumulator returns a key's accumulator before its first element.
	CreateAccumulator() A
	// Add folds v into acc and returns the new accumulator.
	Add(v T, acc A) A
	// GetResult returns the result of acc; it runs when the result is
	// emitted.
	GetResult(acc A) R
}

// Aggregate folds each key's elements with agg, keeping each key's
// accumulator (encoded with acc) in keyed state, and emits KV{key,
// agg.GetResult(accumulator)} (encoded with result) after every update, or
// once per key at the end of input with guest.EmitFinal().
func Aggregate[K, T, A, R any](ks *KeyedStream[K, T], name string, agg AggregateFunction[T, A, R], acc Codec[A], result Codec[R], opts ...guest.ReduceOption) *Stream[KV[K, R]] {
	out := newKVForm(ks.key, result)
	if agg == nil {
		return &Stream[KV[K, R]]{env: ks.env, s: ks.s.Reduce(name, nil, opts...), f: out}
	}
	in, ac, rc := ks.f.v, newVcodec(acc), newVcodec(result)
	var buf []byte
	decodeAcc := func(b []byte) A {
		a, err := ac.decode(b)
		if err != nil {
			panic(fmt.Sprintf("aggregate %q: decode a key's accumulator: %v", name, err))
		}
		return a
	}
	opts = append(opts[:len(opts):len(opts)], guest.EmitResult(func(dst, accB []byte) []byte {
		r := agg.GetResult(decodeAcc(accB))
		return append(dst, rc.encode(&buf, r)...)
	}))
	s := ks.s.Reduce(name, func(accB []byte, r guest.Record) []byte {
		var a A
		if accB == nil {
			a = agg.CreateAccumulator()
		} else {
			a = decodeAcc(accB)
		}
		return ac.encodeAcc(accB, &buf, agg.Add(in.must(r.Value, name), a))
	}, opts...)
	return &Stream[KV[K, R]]{env: ks.env, s: s, f: out}
}

// KeyedContext is the context of a keyed Process operator, scoped to the key
// of the element (or timer) being handled: the byte-level KeyedContext
// (state, timers, operator state, counters) with the key typed.
type KeyedContext[K any] struct {
	*guest.KeyedContext
	key Codec[K]
}

// Key returns the current key, decoded. A key of strings or bytes aliases
// the record: valid during the call only.
func (c *KeyedContext[K]) Key() K {
	k, err := c.key.Decode(c.KeyedContext.Key())
	if err != nil {
		panic(fmt.Sprintf("%q: decode the key: %v", c.Name(), err))
	}
	return k
}

// ProcessFunc handles one element of a keyed stream, with the element key's
// state and timers in ctx.
type ProcessFunc[K, T, Out any] func(ctx *KeyedContext[K], v T, out *Emitter[Out])

// TimerFunc runs when a processing-time timer registered for ctx.Key() fires.
type TimerFunc[K, Out any] func(ctx *KeyedContext[K], timeMs int64, out *Emitter[Out])

// ProcessStream is the output of Process: a stream, and the way to set the
// operator's timer callback.
type ProcessStream[K, Out any] struct {
	*Stream[Out]
	key Codec[K]
	ctx KeyedContext[K]
	e   *Emitter[Out]
}

// Process adds a keyed operator with keyed state (ValueState, MapState,
// ListState) and processing-time timers, Flink's KeyedProcessFunction. Its
// output elements are encoded with out. Set its timer callback with OnTimer.
func Process[K, T, Out any](ks *KeyedStream[K, T], name string, out Codec[Out], fn ProcessFunc[K, T, Out]) *ProcessStream[K, Out] {
	of := formOf(out)
	p := &ProcessStream[K, Out]{key: ks.key, ctx: KeyedContext[K]{key: ks.key}, e: &Emitter[Out]{f: of}}
	if fn == nil {
		p.Stream = &Stream[Out]{env: ks.env, s: ks.s.Process(name, nil), f: of}
		return p
	}
	in := ks.f
	p.Stream = &Stream[Out]{env: ks.env, s: ks.s.Process(name, func(ctx *guest.KeyedContext, r guest.Record, c *guest.Collector) {
		v, ok := in.fast(&r)
		if !ok {
			v = in.must(r, name)
		}
		p.ctx.KeyedContext = ctx
		p.e.setInput(c, r.Time, r.HasTime)
		fn(&p.ctx, v, p.e)
	}), f: of}
	return p
}

// OnTimer sets the operator's timer callback. Elements it emits carry no
// timestamp.
func (p *ProcessStream[K, Out]) OnTimer(fn TimerFunc[K, Out]) *ProcessStream[K, Out] {
	if fn == nil {
		p.s.OnTimer(nil)
		return p
	}
	p.s.OnTimer(func(ctx *guest.KeyedContext, timeMs int64, c *guest.Collector) {
		p.ctx.KeyedContext = ctx
		p.e.setInput(c, 0, false)
		fn(&p.ctx, timeMs, p.e)
	})
	return p
}

// Collect ends the stream in the host's "collect" sink: the elements'
// encodings (a string's own bytes; a KV's Value) come back to the client
// with the job's result. For small results. It returns the byte-level sink,
// for its parallelism and hooks.
func (s *Stream[T]) Collect(name string) *guest.Stream { return s.s.Collect(name) }

// Blackhole ends the stream in the host's "blackhole" sink, which counts
// the elements and their encodings' bytes and keeps nothing: for
// benchmarks. It returns the byte-level sink, for its parallelism and
// hooks.
func (s *Stream[T]) Blackhole(name string) *guest.Stream { return s.s.Blackhole(name) }

// WriteFiles ends the stream in the host's transactional "file" sink: each
// element's encoding (a string's own bytes; a KV's Value) is written as one
// line to part files under path, committed when a checkpoint completes. It
// returns the byte-level sink, for its parallelism and hooks.
func (s *Stream[T]) WriteFiles(name, path string) *guest.Stream { return s.s.WriteFiles(name, path) }

// Sink ends the stream in a sink written in Go, called once per element.
// It returns the byte-level sink, for its parallelism and hooks.
func (s *Stream[T]) Sink(name string, fn func(ctx *guest.Context, v T)) *guest.Stream {
	if fn == nil {
		return s.s.Sink(name, nil)
	}
	in := s.f
	return s.s.Sink(name, func(ctx *guest.Context, r guest.Record) {
		v, ok := in.fast(&r)
		if !ok {
			v = in.must(r, name)
		}
		fn(ctx, v)
	})
}

// SetParallelism sets how many subtasks run the stream's operator.
func (s *Stream[T]) SetParallelism(n int) *Stream[T] { s.s.SetParallelism(n); return s }

// Rebalance makes the next operator receive this stream round-robin.
func (s *Stream[T]) Rebalance() *Stream[T] { return &Stream[T]{env: s.env, s: s.s.Rebalance(), f: s.f} }

// Broadcast makes every subtask of the next operator receive every element.
func (s *Stream[T]) Broadcast() *Stream[T] { return &Stream[T]{env: s.env, s: s.s.Broadcast(), f: s.f} }

// Forward makes subtask i of the next operator read subtask i of this one.
func (s *Stream[T]) Forward() *Stream[T] { return &Stream[T]{env: s.env, s: s.s.Forward(), f: s.f} }

// OnOpen sets a hook that runs when a task running this operator starts,
// before any element: the place to read operator state back.
func (s *Stream[T]) OnOpen(fn func(ctx *guest.Context)) *Stream[T] { s.s.OnOpen(fn); return s }

// OnBarrier sets a hook that runs when a checkpoint barrier reaches this
// operator, before the host snapshots the task's state: the place to write
// operator state.
func (s *Stream[T]) OnBarrier(fn func(ctx *guest.Context, checkpointID int64)) *Stream[T] {
	s.s.OnBarrier(fn)
	return s
}

// OnClose sets a hook that runs when a task running this operator ends.
func (s *Stream[T]) OnClose(fn func(ctx *guest.Context)) *Stream[T] { s.s.OnClose(fn); return s }
