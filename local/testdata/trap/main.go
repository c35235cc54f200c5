// Command trap is a test guest whose flat-map fails on the first record it
// sees: a nil map write (a Go runtime panic) inside explodeOnRecord, so the
// task must end FAILED with the guest's stack trace naming that function.
package main

import "github.com/sluicehq/sluice/sdk/guest"

func init() {
	guest.Job(func(env *guest.Env) {
		env.Source("numbers", numbers).
			FlatMap("explode", explodeOnRecord).
			Collect("out")
	})
}

func numbers(_ *guest.Context, max int, out *guest.Collector) bool {
	for i := 0; i < max && i < 10; i++ {
		out.EmitValue(guest.Int64(int64(i)))
	}
	return true
}

var nilMap map[string]int

//go:noinline
func explodeOnRecord(r guest.Record, out *guest.Collector) {
	nilMap[string(r.Value)]++ // panics: assignment to entry in nil map
	out.Emit(r)
}

func main() {}
