// Command runaway is a hostile test guest: its map never returns. With the
// argument "loop" it spins forever; with "bomb" it allocates until the
// memory cap stops it. Its task must fail on the call deadline or the memory
// limit without touching other jobs.
package main

import "github.com/sluicehq/sluice/sdk/guest"

var (
	mode  string
	spin  int
	hoard [][]byte
)

func init() {
	guest.Job(func(env *guest.Env) {
		if len(env.Args()) > 0 {
			mode = env.Args()[0]
		}
		env.Source("numbers", numbers).
			Map("runaway", runaway).
			Collect("out")
	})
}

func numbers(_ *guest.Context, max int, out *guest.Collector) bool {
	for i := 0; i < max && i < 10; i++ {
		out.EmitValue(guest.Int64(int64(i)))
	}
	return true
}

//go:noinline
func runaway(r guest.Record) guest.Record {
	for {
		if mode == "bomb" {
			b := make([]byte, 1<<20)
			b[len(b)-1] = 1
			hoard = append(hoard, b)
		} else {
			spin++
		}
	}
}

func main() {}
