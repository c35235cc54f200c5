package dispatcher

import (
	"context"
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
	check := func(ctx context.Context, v *jobgraph.Vertex) error {
		_, err := jsconn.Check(ctx, v)
		return err
	}
	return checkConnectors(ctx, g, jetStreamCheckTimeout, check, jobgraph.ConnectorJetStreamSource, jobgraph.ConnectorJetStreamSink)
}
