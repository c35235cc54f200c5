package threadprio

import "syscall"

// weakest is nice 19: about 1.5% of a core against a thread at 0.
const weakest = 19

func threadID() int { return syscall.Gettid() }

func setNice(tid, nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
}
