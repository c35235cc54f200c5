package threadprio

import (
	"runtime"
	"sync"
	"time"
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

// CPUTime returns the CPU time thread tid of this process has used, from
// any goroutine; false where the system cannot tell (then callers fall back
// to wall time).
func CPUTime(tid int) (time.Duration, bool) { return cpuTime(tid) }

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
