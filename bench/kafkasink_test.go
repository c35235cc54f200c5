package bench

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
)

// BenchmarkKafkaSinkP2 runs nexmark events (unthrottled) into the Kafka
// sink on an embedded kfake broker at parallelism 2, exactly once and at
// least once, both with checkpoints every 200ms, alternating which runs
// first: x_exactly_once is the at-least-once time over the exactly-once
// time (target ≥ 0.8), the cost of holding each checkpoint's records and
// committing them in a transaction rather than producing them at once.
// kfake is a test broker: the absolute figures say little about Kafka.
func BenchmarkKafkaSinkP2(b *testing.B) {
	const events = 1_000_000
	k := testutil.StartKafka(b, 2, "out")
	wasm := localtest.Guest(b, "local/testdata/kafkasink")
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	args := func(delivery string) []string {
		return []string{"brokers", k.Brokers, "events", fmt.Sprint(events), "delivery", delivery}
	}
	conf := map[string]string{jobconfig.KeyCheckpointInterval: "200ms"}
	alo := jobSpec(b, c, cl, wasm, args("at-least-once"), conf)
	eo := jobSpec(b, c, cl, wasm, args("exactly-once"), conf)
	runJob(b, cl, alo) // warm-up: compile the module, connect
	b.ResetTimer()
	cmp := compareCheckpoints(b, cl, alo, eo, nil)
	b.StopTimer()
	// Every run delivered all its events (the warm-up and the at-least-once
	// runs at least once, the exactly-once runs once).
	if got, want := k.EndOffsets(b, "out", true), int64(events*(2*b.N+1)); got < want {
		b.Fatalf("out holds %d records below its last stable offsets (%d in all), want at least %d", got, k.EndOffsets(b, "out", false), want)
	}
	b.ReportMetric(float64(cmp.off)/float64(cmp.on), "x_exactly_once")
	b.ReportMetric(median(cmp.ratios), "x_exactly_once_median")
	b.ReportMetric(float64(cmp.completed)/float64(b.N), "checkpoints/run")
	b.ReportMetric(float64(events)/(float64(cmp.on)/float64(b.N))*1e9/1e6, "Mevents/s_exactly_once")
}
