//go:build !linux

package threadprio

import (
	"errors"
	"time"
)

const weakest = 19

func threadID() int { return 0 }

func setNice(int, int) error { return errors.New("thread priorities are not supported here") }

func cpuTime(int) (time.Duration, bool) { return 0, false }
