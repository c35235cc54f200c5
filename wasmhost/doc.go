// Package wasmhost runs guest modules in wazero: one runtime per process,
// compiled modules cached in memory and on disk by digest, one module instance
// per task, and the host side of the Sluice guest ABI (docs/ABI.md).
//
// It owns the sandbox: memory caps, call deadlines, no file system, network,
// environment or real clock, and the conversion of traps into typed errors
// carrying the Wasm stack and the module digest. It must not import jm or tm.
package wasmhost
