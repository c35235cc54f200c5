package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/kafkaconn"
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
