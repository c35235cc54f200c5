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

import (
	"runtime"
	"sync"
)

// procsMu serializes the read-modify-write of GOMAXPROCS by every caller in
// the process (GOMAXPROCS is the process's, so this lock is too).
var procsMu sync.Mutex

func addProcs(delta int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + delta)
}

// Self returns the calling thread's id, for Lower and Raise; the caller
// must have locked its goroutine to the thread.
func Self() int { return threadID() }

// Lower sets thread tid to the weakest priority and lends a P. It may be
// called from another goroutine than the thread's.
//
// # Errors
//
// The system's, when the priority cannot be set; nothing changed then.
func Lower(tid int) error {
	if err := setNice(tid, weakest); err != nil {
		return err
	}
	addProcs(1)
	return nil
}

// Raise undoes Lower: the P is given back and the thread's priority set to
// normal.
//
// # Errors
//
// The system's, when the priority cannot be raised again (that needs
// privilege): the thread stays low, so its goroutine must stay locked to
// it (and never unlock), so no other goroutine ever runs there.
func Raise(tid int) error {
	addProcs(-1)
	return setNice(tid, 0)
}
