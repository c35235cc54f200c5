// Package threadprio reads the CPU clock of one OS thread, for the guest
// call deadline (wasmhost), which counts the CPU time a call's thread used
// rather than the wall time it waited for a core.
//
// A goroutine has no CPU clock; its thread has. Callers lock their
// goroutine to its thread (runtime.LockOSThread) for as long as they read
// the thread's clock. It does not change thread priorities or GOMAXPROCS:
// the CPU is shared among tenants by fuel (wasmhost), not by the kernel's
// nice values (docs/RATIONALE.md, "Why fuel, not nice values?"). On Linux
// the clock is the per-thread CPU clock; elsewhere CPUTime reports false.
package threadprio
