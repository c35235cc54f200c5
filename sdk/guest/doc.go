// Package guest is the Go SDK for writing Sluice jobs. A job is an ordinary
// Go program built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared: it
// declares its dataflow (sources, map, flat-map, filter, key-by + reduce or
// keyed process, sinks) with plain Go functions, and the SDK implements the
// guest side of the ABI (docs/ABI.md).
//
// It uses the standard library only.
package guest
