package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/jsconn"
)

// jetStreamCheckTimeout bounds the submit-time check of one JetStream
// connector.
const jetStreamCheckTimeout = 10 * time.Second

// checkJetStream connects to the servers every JetStream connector of g
// names and checks its stream or subject, so an unreachable server, an
// unknown stream or a subject no stream stores is refused at submission
// rather than failing every restart.
func checkJetStream(ctx context.Context, g *jobgraph.Graph) error {
	for i := range g.Vertices {
		v := &g.Vertices[i]
		if v.Connector != jobgraph.ConnectorJetStreamSource && v.Connector != jobgraph.ConnectorJetStreamSink {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, jetStreamCheckTimeout)
		_, err := jsconn.Check(cctx, v)
		cancel()
		if err != nil {
			return fmt.Errorf("operator %d (%s): %w", v.ID, v.Name, err)
		}
	}
	return nil
}
