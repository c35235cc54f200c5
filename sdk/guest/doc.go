// Package guest is the Go SDK for writing Sluice jobs. A job is an ordinary
// Go program built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared: it
// declares its dataflow (sources, map, flat-map, filter, key-by + reduce,
// keyed process or windows, sinks) with plain Go functions, and the SDK implements the
// guest side of the ABI (docs/ABI.md).
//
//	package main
//
//	import "github.com/sluicehq/sluice/sdk/guest"
//
//	func init() {
//		guest.Job(func(env *guest.Env) {
//			env.TextSource("lines", env.Args()...).
//				FlatMap("tokenize", tokenize).
//				KeyBy("word", func(r guest.Record) []byte { return r.Value }).
//				Reduce("count", count, guest.EmitFinal()).
//				Map("format", format).
//				Collect("out")
//		})
//	}
//
//	func main() {}
//
// The plan function runs once to declare the job graph (sluice plan, and the
// JobManager at submission) and again in every task, where the SDK maps the
// task's operators to the functions given here and runs a whole chain of
// operators inside one call per input batch, emitting once per call.
//
// Keyed state, operator state and timers live on the host, so checkpoints,
// recovery and rescaling work without the guest's help; the guest reaches
// them through KeyedContext and Context. Records handed to user functions
// alias SDK buffers and are valid during the call only.
//
// Windows (window.go; docs/event-time.md, "Windows") are keyed Process
// operators the SDK writes: each key's open windows in keyed state, timers
// to fire them, and an optional late output. Joins (join.go) are a keyed
// operator with two inputs, each side's records keyed and tagged with
// their side: a window join (Join(...).Window(w).Apply or CoGroup) keeps
// them as a window process function does, an interval join
// (Join(...).Between(lower, upper).Process) per side until the watermark
// passes them. Union is one operator with an input edge per stream.
//
// This is the byte-level API: keys and values are []byte. Its typed layer,
// package sdk/guest/typed, gives streams of Go values with codecs
// (docs/go.md); each of its operators is one of this package's.
//
// It uses the standard library only. Outside wasip1 it compiles for vetting
// and native tests: NativeModule hands its exports and host calls to the
// job test harness, sdk/guest/jobtest (docs/testing.md), which runs a job
// as Go code in `go test` and as the compiled module in wazero.
package guest
