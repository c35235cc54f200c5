// Package rewrite instruments a guest module so a call into it can be
// interrupted: it adds an interrupt flag and a fuel counter, checked at
// every function entry and loop header, and caps the guest's tables.
//
// Deadlines work like Wasmtime's epoch interruption with fuel: before
// compiling, the host adds two mutable i32 globals to the module, $interrupt
// and $fuel, and at every function entry and loop header the instructions
//
//	$fuel -= 1
//	if $fuel == 0 {
//	    $fuel = FuelInterval
//	    call $tick                     ;; drop(memory.grow(0)): comes back to Go, see below
//	    if $interrupt { unreachable }
//	}
//
// $tick is a function appended to the module (so no index moves), exported
// as [TickExport]: being a function of its own, it is where the host may
// look at the guest's call stack (a wazero listener on it alone).
//
// The host sets $interrupt (exported as [InterruptExport]) when a call's
// deadline passes; the guest traps within FuelInterval loop iterations or
// calls.
//
// The memory.grow(0) matters as much as the flag. Go cannot preempt compiled
// Wasm, so a guest that never leaves it blocks every stop-the-world (a garbage
// collection) of the whole process — and with the world stopping, the
// deadline timer never runs either: one spinning guest froze the TaskManager.
// wazero runs memory.grow in Go, where the goroutine can be preempted, so the
// world can stop every FuelInterval iterations at the latest.
//
// wazero's own mechanism (WithCloseOnContextDone) leaves compiled code for Go
// at every loop iteration, which made Go guests 10 to 40 times slower; this
// costs a decrement and a branch, and a trip to Go every FuelInterval checks.
//
// It reads modules through wasmhost/internal/wasmbin; a module must pass
// wasmhost/internal/validate's Structure first, and the caller passes the
// table cap that Structure enforces. It must not import wazero, wasmhost or
// its other internal packages: it maps bytes to bytes.
package rewrite
