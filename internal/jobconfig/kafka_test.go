package jobconfig_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// An exactly-once Kafka sink commits at checkpoints: without them it is
// refused, an at-least-once one is not.
func TestCheckGraphKafkaExactlyOnceNeedsCheckpoints(t *testing.T) {
	g := func(delivery string) *jobgraph.Graph {
		return &jobgraph.Graph{Vertices: []jobgraph.Vertex{{ID: 3, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorKafkaSink,
			Config: map[string]string{"brokers": "127.0.0.1:9092", "topic": "out", "delivery": delivery}}}}
	}
	var off jobconfig.Config
	err := off.CheckGraph(g(jobgraph.DeliveryExactlyOnce))
	if err == nil || !strings.Contains(err.Error(), "exactly-once kafka sink") || !strings.Contains(err.Error(), jobconfig.KeyCheckpointInterval) {
		t.Fatalf("CheckGraph without checkpoints: %v, want the exactly-once sink refused", err)
	}
	if err := off.CheckGraph(g(jobgraph.DeliveryAtLeastOnce)); err != nil {
		t.Fatalf("at-least-once without checkpoints: %v", err)
	}
	on := jobconfig.Config{Checkpoints: jobconfig.Checkpoints{Interval: time.Second}}
	if err := on.CheckGraph(g(jobgraph.DeliveryExactlyOnce)); err != nil {
		t.Fatalf("exactly-once with checkpoints: %v", err)
	}
}
