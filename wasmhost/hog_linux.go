package wasmhost

import "syscall"

// hogNice is the nice value of a hogging guest's thread: 19, the weakest
// (about 1.5% of a core against a thread at 0).
const hogNice = 19

func threadID() int { return syscall.Gettid() }

func setThreadNice(tid, nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
}
