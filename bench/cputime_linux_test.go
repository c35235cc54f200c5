package bench

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time the calling thread has used. A guest runs
// on its caller's goroutine, so with the goroutine locked to its thread
// this is the guest's (and wasmhost's) CPU time alone, whatever else the
// machine runs: a figure a loaded machine disturbs much less than wall time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// onThread runs fn locked to one OS thread, so threadCPU measures it.
func onThread(fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fn()
}
