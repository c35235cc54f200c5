// Package threadprio lowers the scheduling priority of one OS thread: for a
// guest call that hogs a core (wasmhost) and for a checkpoint's background
// encoding (tm/task), so that work yields the CPU to the tasks that keep a
// job going.
//
// A goroutine cannot have a priority; its thread can. Callers lock their
// goroutine to its thread (runtime.LockOSThread) for as long as the thread
// is lowered. A lowered thread also lends its Go scheduler slot: GOMAXPROCS
// goes up by one until Raise, because a low-priority thread that keeps
// running still holds a P, which would leave the rest of the process one P
// short. On Linux priorities are per-thread nice values; elsewhere Lower
// fails and nothing changes.
package threadprio
