package local_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// A server that wants a password: the job names a secret, its submitter
// passes the value in the job config, and the value shows nowhere — not
// in the job's details, the logs or the errors of a submission that
// names a secret it did not pass or passes a wrong one.
func TestJetStreamSecretsStayOutOfSight(t *testing.T) {
	const user, password = "sluice", "hunter2-f00d"
	srv := testutil.StartNATSUser(t, user, password)
	const n, keys = 2000, 3
	js := localtest.JetStreamSetup(t, strings.Replace(srv.URL, "nats://", "nats://"+user+":"+password+"@", 1), n, keys)
	var logs testutil.SyncBuffer
	c := localtest.Start(t, local.Config{Slots: 4, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	withSecret := []string{"--user", user, "--password-secret", "nats"}

	for _, tc := range []struct {
		name   string
		config map[string]string
		want   string
	}{
		{"no secret", nil, `names secret "nats", which the job config does not hold: pass it as secret.nats`},
		{"a wrong secret", map[string]string{"secret.nats": "wrong-" + password}, "connect to NATS at " + srv.URL},
	} {
		_, err := localtest.JetStreamTrySubmit(t, c, srv.URL, tc.config, withSecret...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), password) {
			t.Fatalf("%s: submit: %v, want an error containing %q and not the password", tc.name, err, tc.want)
		}
	}
	id, err := localtest.JetStreamTrySubmit(t, c, srv.URL, map[string]string{"secret.nats": password}, withSecret...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().CancelJob(context.Background(), id) })
	localtest.JetStreamWaitOutput(t, js, n, 2*time.Minute)
	localtest.JetStreamCheck(t, js, n, keys)

	d, err := c.Client().GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%+v", d); strings.Contains(s, password) {
		t.Errorf("the job's details show the password: %s", s)
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the cluster's logs show the password")
	}
}
