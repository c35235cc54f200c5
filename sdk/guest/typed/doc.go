// Package typed is the typed layer of the Go SDK: streams of Go values
// instead of records of bytes, with codecs between the two. It sits on the
// byte-level SDK (package guest), which it uses for everything else: a job
// still registers with guest.Job and declares its dataflow on a *guest.Env,
// and each typed operator is one byte-level operator, so the job graph, its
// chains, checkpoints and rescaling are the same.
//
//	func plan(env *guest.Env) {
//		lines := typed.TextLines(env, "lines", env.Args()...)
//		words := typed.FlatMap(lines, "tokenize", typed.String(), tokenize)
//		byWord := typed.KeyBy(words, "word", typed.String(), func(w string) string { return w })
//		counts := typed.Fold(byWord, "count", typed.Int64(),
//			func(n int64, _ string) int64 { return n + 1 }, guest.EmitFinal())
//		typed.Map(counts, "format", typed.String(), func(c typed.KV[string, int64]) string {
//			return c.Key + "\t" + strconv.FormatInt(c.Value, 10)
//		}).Collect("out")
//	}
//
// Go methods cannot have type parameters, so operators that change the
// element type are package functions (Map, FlatMap, KeyBy, Reduce, Fold,
// Aggregate, Process) and those that keep it are methods (Filter, the
// sinks, partitioning and hooks).
//
// # Codecs
//
// A Codec[T] appends T's encoding to a caller's buffer and decodes it back.
// Built in: Int64, Int32, Uint64, Uint32, Int, Varint, Float64, Bool, String,
// Bytes, Pair and Triple (Tuple2, Tuple3), KeyValue (KV), Slice, Struct (a
// binary codec of a struct from its fields, without reflection, which is
// slow in Go's Wasm code), JSON (encoding/json, when readability matters
// more than speed) and Funcs for a codec written by hand. Strings and byte
// slices decoded from a record alias it: they are valid during the call
// only, and cost no copy. Integers and floats are fixed-size little-endian,
// so the typed word count's counts are the byte-level SDK's guest.Int64.
//
// A stream's elements are its codec's encodings as record values, so a
// Stream[string] is a stream of text lines for the host's text source and
// its collect and file sinks; a stream of KV keeps its Key in the record's
// key. Of wraps a byte-level stream, Stream.Bytes unwraps one.
//
// # State
//
// ValueState, ListState and MapState are keyed state of the current key,
// used from a Process function's KeyedContext (or a byte-level
// *guest.KeyedContext); OperatorState is a subtask's state, from any
// operator's Context. All are kept by the host, in every checkpoint. Reduce,
// Fold and Aggregate keep their accumulators themselves.
//
// # Windows
//
// Window groups a KeyedStream[K, T] into windows (guest.Tumbling,
// guest.Sliding, guest.Session, in event or processing time, with allowed
// lateness); WindowReduce, WindowAggregate (the same AggregateFunction,
// with Merge for sessions) and WindowProcess emit per key and window, and
// WindowStream.Late is the stream of late elements. They are the
// byte-level guest windows (docs/event-time.md, "Windows"), typed. Joins
// belong to the streaming issue (#12) and are not here yet.
//
// It uses the standard library and package guest only; it compiles into
// user modules.
package typed
