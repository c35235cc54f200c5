package threadprio

import (
	"syscall"
	"time"
	"unsafe"
)

// weakest is nice 19: about 1.5% of a core against a thread at 0.
const weakest = 19

func threadID() int { return syscall.Gettid() }

func setNice(tid, nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
}

// cpuTime reads the CPU clock of thread tid of this process (Linux's
// per-thread CPU clock id: the complemented tid, shifted, with the
// per-thread and scheduler-clock bits).
func cpuTime(tid int) (time.Duration, bool) {
	clock := int32(^uint32(tid)<<3 | 6)
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
