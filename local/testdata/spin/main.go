// Command spin is a test guest that never ends by itself: a source emitting
// numbers forever into a sink that drops them, at the job's parallelism. It
// is what a cancel test cancels.
package main

import "github.com/sluicehq/sluice/sdk/guest"

func init() {
	guest.Job(func(env *guest.Env) {
		env.Source("forever", forever).
			Rebalance().
			Map("touch", func(r guest.Record) guest.Record { return r }).
			Sink("drop", func(*guest.Context, guest.Record) {})
	})
}

func forever(ctx *guest.Context, max int, out *guest.Collector) bool {
	for i := 0; i < max; i++ {
		out.EmitValue(guest.Int64(int64(i)))
	}
	ctx.Count("emitted", int64(max))
	return false
}

func main() {}
