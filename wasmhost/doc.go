// Package wasmhost runs guest modules in wazero: one runtime per process,
// compiled modules cached in memory and on disk by digest, one module instance
// per task, and the host side of the Sluice guest ABI (docs/ABI.md).
//
// It owns the sandbox: memory caps, call deadlines, no file system, network,
// environment or real clock, and the conversion of traps into typed errors
// carrying the Wasm stack and the module digest. It must not import jm or tm.
//
// # Use
//
//	rt, _ := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig().WithCacheDir(dir))
//	mod, _ := rt.Compile(ctx, wasm)             // validates; cached by digest
//	g, _ := mod.Plan(ctx, args, limits)         // the job graph the module declares
//	in, _ := mod.Instantiate(ctx, wasmhost.TaskConfig{Chain: ..., Emit: ...})
//	in.Open(ctx)
//	in.Process(ctx, batch)                      // output arrives through Emit
//	in.Barrier(ctx, id); f := in.State().Freeze()
//	buf = f.AppendTo(buf[:0]); f.Release()      // the checkpoint's state snapshot
//	in.EndInput(ctx); in.Close(ctx)
//
// # Sandbox
//
// Every instance lives in the one wazero runtime as an anonymous module
// (instances cannot clash by name) with its own memory allocator, which is how
// each gets its own memory cap. Before compiling, the host adds to the module
// an interrupt global checked at every function entry and loop header; a timer
// sets it when a call's deadline passes (internal/rewrite explains why not
// wazero's context-based closing). Host functions that receive bad pointers
// panic with a trap error, which wazero turns into a trap of the guest call.
//
// # Stack samples
//
// Instance.SampleStacks takes the guest's current call stack, or a profile of
// them, from another goroutine while the task runs: a wazero function
// listener on the fuel check's $tick function alone walks the stack there,
// and returns at once while nobody samples (stacks.go).
//
// # Inside
//
// The parsing and encoding live in internal packages, each one reader with
// one job: internal/wasmbin reads the Wasm binary format, internal/validate
// decides what modules the host accepts, internal/rewrite adds the interrupt
// checks, and internal/statecodec is the snapshot format of State. This
// package holds the runtime, the instances, the host functions of the ABI
// and the State store itself.
package wasmhost
