// Command follow reads the lines of every object under a prefix, following
// it for new objects, and collects them.
//
//	--input PATH   a path to follow (repeatable)
//	--every D      the monitor interval (a Go duration; default 100ms)
package main

import (
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() {
	guest.Job(func(env *guest.Env) {
		var paths []string
		every := 100 * time.Millisecond
		args := env.Args()
		for i := 0; i+1 < len(args); i += 2 {
			switch args[i] {
			case "--input":
				paths = append(paths, args[i+1])
			case "--every":
				d, err := time.ParseDuration(args[i+1])
				if err != nil {
					d = -1
				}
				every = d
			}
		}
		env.TextSource("lines", paths...).MonitorEvery(every).Collect("out")
	})
}

func main() {}
