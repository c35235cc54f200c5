package dispatcher

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
)

// checkKafka names the operator whose topic is unknown, and passes a
// graph without Kafka connectors without dialing anything.
func TestCheckKafka(t *testing.T) {
	k := testutil.StartKafka(t, 1, "bids")
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{
		{ID: 0, Name: "in", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorKafkaSource, Config: map[string]string{"brokers": k.Brokers, "topics": "bids"}},
		{ID: 1, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorKafkaSink, Config: map[string]string{"brokers": k.Brokers, "topic": "counts"}},
	}}
	err := checkKafka(context.Background(), g)
	if err == nil || !strings.Contains(err.Error(), "operator 1 (out)") || !strings.Contains(err.Error(), `topic "counts" does not exist`) {
		t.Fatalf("checkKafka: %v, want the sink's topic refused", err)
	}
	g.Vertices = g.Vertices[:1]
	if err := checkKafka(context.Background(), g); err != nil {
		t.Fatalf("checkKafka with the source only: %v", err)
	}
	if err := checkKafka(context.Background(), &jobgraph.Graph{Vertices: []jobgraph.Vertex{{ID: 0, Connector: jobgraph.ConnectorBlackhole, Kind: jobgraph.KindSink}}}); err != nil {
		t.Fatalf("checkKafka without Kafka: %v", err)
	}
}
