//go:build !wasip1

package guest

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// NexmarkSource writes the options it is given, and only those, as the
// connector's config, which the host reads back; Blackhole ends a stream in
// the blackhole connector.
func TestPlanNexmarkIntoBlackhole(t *testing.T) {
	h := withJob(t, func(env *Env) {
		env.NexmarkSource("events", NexmarkOptions{Events: 1000, Seed: 18446744073709551615, OutOfOrderGroup: 4}).
			Filter("bids", func(r Record) bool { return len(r.Value) > 0 && r.Value[0] == 2 }).
			Blackhole("drop")
	})
	g := planOf(t, h)
	if err := jobgraph.Validate(g, 1, 0); err != nil {
		t.Fatal(err)
	}
	src, sink := g.Vertices[0], g.Vertices[2]
	want := map[string]string{"events": "1000", "seed": "18446744073709551615", "out-of-order-group": "4"}
	if src.Connector != jobgraph.ConnectorNexmark || !reflect.DeepEqual(src.Config, want) || sink.Connector != jobgraph.ConnectorBlackhole {
		t.Fatalf("source %+v, sink %+v", src, sink)
	}
	set, err := src.Nexmark()
	if err != nil || set != (jobgraph.NexmarkSettings{Events: 1000, Seed: 1<<64 - 1, OutOfOrderGroup: 4}) {
		t.Fatalf("the host reads %+v, %v", set, err)
	}
}
