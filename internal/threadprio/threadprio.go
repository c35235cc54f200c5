package threadprio

import "time"

// Self returns the calling thread's id, for CPUTime; the caller must have
// locked its goroutine to the thread.
func Self() int { return threadID() }

// CPUTime returns the CPU time thread tid of this process has used, from
// any goroutine; false where the system cannot tell (then callers fall back
// to wall time).
func CPUTime(tid int) (time.Duration, bool) { return cpuTime(tid) }
