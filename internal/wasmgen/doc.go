// Package wasmgen builds WebAssembly modules of a chosen shape for tests:
// deep nesting, many functions, many locals, big tables and data, so the
// host's module limits can be tried with modules made in the test.
//
// It uses the standard library only. Only tests import it.
package wasmgen
