package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/kafkaconn"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// kafkaCheckTimeout bounds the submit-time check of one Kafka connector.
const kafkaCheckTimeout = 10 * time.Second

// checkKafka connects to the brokers every Kafka connector of g names and
// checks its topics, so an unreachable broker or an unknown topic is
// refused at submission rather than failing every restart.
func checkKafka(ctx context.Context, g *jobgraph.Graph) error {
	return checkConnectors(ctx, g, kafkaCheckTimeout, kafkaconn.Check, jobgraph.ConnectorKafkaSource, jobgraph.ConnectorKafkaSink)
}

// checkConnectors runs check, bounded by timeout, on every vertex of g
// whose connector is one of connectors, and names the first that fails.
func checkConnectors(ctx context.Context, g *jobgraph.Graph, timeout time.Duration, check func(context.Context, *jobgraph.Vertex) error, connectors ...string) error {
	for i := range g.Vertices {
		v := &g.Vertices[i]
		if !slices.Contains(connectors, v.Connector) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := check(cctx, v)
		cancel()
		if err != nil {
			return fmt.Errorf("operator %d (%s): %w", v.ID, v.Name, err)
		}
	}
	return nil
}

// kafkaSplits lists the partitions a kafka source reads now, one split
// each (jobgraph.KafkaSplitKey): the JobMaster hands each to the subtask
// that owns it, at deploy and, as the source's discovery finds more,
// while the job runs.
func kafkaSplits(ctx context.Context, v *jobgraph.Vertex) ([]checkpoint.Split, error) {
	s, err := v.Kafka()
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: %v", v.ID, v.Name, err)
	}
	lctx, cancel := context.WithTimeout(ctx, kafkaCheckTimeout)
	defer cancel()
	parts, err := kafkaconn.Partitions(lctx, s, "sluice-jobmanager")
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "vertex %d %q: %v", v.ID, v.Name, err)
	}
	splits := make([]checkpoint.Split, len(parts))
	for i, p := range parts {
		splits[i] = checkpoint.Split{Key: jobgraph.KafkaSplitKey(p.Topic, p.Partition)}
	}
	return splits, nil
}
