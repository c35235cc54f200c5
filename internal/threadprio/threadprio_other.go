//go:build !linux

package threadprio

import "time"

func threadID() int { return 0 }

func cpuTime(int) (time.Duration, bool) { return 0, false }
