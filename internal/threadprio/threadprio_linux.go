package threadprio

import (
	"syscall"
	"time"
	"unsafe"
)

func threadID() int { return syscall.Gettid() }

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
