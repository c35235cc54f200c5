//go:build !linux

package bench

import "time"

// threadCPU is wall time where the thread's CPU time is not at hand.
func threadCPU() time.Duration { return time.Duration(time.Now().UnixNano()) }

func onThread(fn func()) { fn() }
