package main

import (
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
)

// TestE2EJetStreamExactlyOnceAcrossKills: the JetStream pipeline (a
// stream read, a keyed count, an exactly-once JetStream sink) on a
// JobManager and two TaskManager processes; the TaskManager running the
// sink is kill -9ed three times, and the output stream still holds each
// result exactly once.
func TestE2EJetStreamExactlyOnceAcrossKills(t *testing.T) {
	srv := testutil.StartNATS(t)
	c := proctest.Start(t, []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "3s"}, 4, 4)
	localtest.CheckJetStreamAcrossTaskManagerKills(t, c, srv.URL, 20_000, 7)
}
