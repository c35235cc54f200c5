package kafkaconn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/kafkaconn"
	"github.com/sluicehq/sluice/internal/testutil"
)

// Check refuses an unknown topic, a pattern matching none and an
// unreachable broker, and accepts what exists, also after the broker was
// closed and reopened on its data dir.
func TestCheck(t *testing.T) {
	k := testutil.StartKafka(t, 2, "bids", "counts")
	src := func(c map[string]string) *jobgraph.Vertex {
		return &jobgraph.Vertex{ID: 1, Name: "in", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorKafkaSource, Config: c}
	}
	sink := func(c map[string]string) *jobgraph.Vertex {
		return &jobgraph.Vertex{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorKafkaSink, Config: c}
	}
	for _, tc := range []struct {
		name string
		v    *jobgraph.Vertex
		want string
	}{
		{"source", src(map[string]string{"brokers": k.Brokers, "topics": "bids"}), ""},
		{"pattern", src(map[string]string{"brokers": k.Brokers, "topic-pattern": "bi.*"}), ""},
		{"sink", sink(map[string]string{"brokers": k.Brokers, "topic": "counts"}), ""},
		{"unknown topic", src(map[string]string{"brokers": k.Brokers, "topics": "bids,asks"}), `topic "asks" does not exist`},
		{"unknown sink topic", sink(map[string]string{"brokers": k.Brokers, "topic": "totals"}), `topic "totals" does not exist`},
		{"pattern matches none", src(map[string]string{"brokers": k.Brokers, "topic-pattern": "asks-.*"}), "no topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := kafkaconn.Check(ctx, tc.v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check: %v, want an error containing %q", err, tc.want)
			}
		})
	}

	k.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := kafkaconn.Check(ctx, src(map[string]string{"brokers": k.Brokers, "topics": "bids"}))
	cancel()
	if err == nil || !strings.Contains(err.Error(), "check that Kafka runs") {
		t.Fatalf("Check with the broker closed: %v, want it unreachable", err)
	}
	k.Start()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := kafkaconn.Check(ctx, src(map[string]string{"brokers": k.Brokers, "topics": "bids"})); err != nil {
		t.Fatalf("Check after the broker reopened on its data dir: %v", err)
	}
}
