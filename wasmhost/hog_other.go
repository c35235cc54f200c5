//go:build !linux

package wasmhost

import "errors"

const hogNice = 19

func threadID() int { return 0 }

func setThreadNice(int, int) error { return errors.New("thread priorities are not supported here") }
