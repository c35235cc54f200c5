package local_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// A job reads a stream, counts per key and publishes to another stream
// exactly once; records published while it runs are read too.
func TestJetStreamSourceToSinkExactlyOnce(t *testing.T) {
	srv := testutil.StartNATS(t)
	const n, keys = 3000, 5
	js := localtest.JetStreamSetup(t, srv.URL, n, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	localtest.JetStreamSubmit(t, c, srv.URL)
	localtest.JetStreamWaitOutput(t, js, n, 2*time.Minute)
	localtest.JetStreamPublish(t, js, n, 2*n, keys)
	localtest.JetStreamWaitOutput(t, js, 2*n, 2*time.Minute)
	localtest.JetStreamCheck(t, js, 2*n, keys)
}

// TaskManagers die three times while the job runs (in-process TaskManagers
// stopped abruptly; cmd/sluice kill -9s processes): OUT holds each result
// once.
func TestJetStreamExactlyOnceAcrossTaskManagerFailures(t *testing.T) {
	srv := testutil.StartNATS(t)
	c := localtest.Start(t, local.Config{Slots: 4, TaskManagers: 2, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	localtest.CheckJetStreamAcrossTaskManagerKills(t, c, srv.URL, 20_000, 7)
}

// The server goes away for several seconds mid-run and comes back on the
// same store: the job fails, restarts by its strategy until the server is
// back, and OUT still holds each result once.
func TestJetStreamExactlyOnceAcrossAServerRestart(t *testing.T) {
	srv := testutil.StartNATS(t)
	const n, keys = 6000, 3
	js := localtest.JetStreamSetup(t, srv.URL, n/2, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	id := localtest.JetStreamSubmit(t, c, srv.URL)
	testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
		if got := localtest.JetStreamCount(t, js); got == 0 {
			return errors.New("no output yet")
		}
		return nil
	})
	srv.Stop()
	// The job notices: the source's fetches fail.
	cl := c.Client()
	localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
		if d.Restarts == 0 {
			return fmt.Errorf("job %s has not restarted yet (%s)", id, d.State)
		}
		return nil
	})
	srv.Start()
	localtest.JetStreamPublish(t, js, n/2, n, keys)
	localtest.JetStreamWaitOutput(t, js, n, 3*time.Minute)
	if _, err := cl.GetJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	localtest.JetStreamCheck(t, js, n, keys)
}

// Bad JetStream settings are refused at submission, each with an error
// that says what is wrong.
func TestJetStreamBadInputAtSubmit(t *testing.T) {
	srv := testutil.StartNATS(t)
	localtest.JetStreamSetup(t, srv.URL, 0, 1)
	c := localtest.Start(t, local.Config{Slots: 2})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, localtest.JetStreamGuest))
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + testutil.FreeAddr(t)
	checkpoints := map[string]string{jobconfig.KeyCheckpointInterval: "1s"}
	for _, tc := range []struct {
		name, url, stream, subject string
		config                     map[string]string
		want                       string
	}{
		{"unreachable server", dead, "IN", "out.counts", checkpoints, "connect to NATS at " + dead},
		{"malformed URL", "nats://127.0.0.1:99999", "IN", "out.counts", checkpoints, "port \"99999\" is not from 1 to 65535"},
		{"unknown stream", srv.URL, "NOPE", "out.counts", checkpoints, "stream \"NOPE\" does not exist"},
		{"invalid sink subject", srv.URL, "IN", "out..counts", checkpoints, "has an empty token"},
		{"wildcard sink subject", srv.URL, "IN", "out.*", checkpoints, "has a wildcard"},
		{"subject no stream stores", srv.URL, "IN", "elsewhere", checkpoints, "no stream on"},
		{"exactly once without checkpoints", srv.URL, "IN", "out.counts", nil, "exactly-once jetstream sink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--url", tc.url, "--stream", tc.stream, "--subject", tc.subject}
			_, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 1, Config: tc.config})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("submit: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
