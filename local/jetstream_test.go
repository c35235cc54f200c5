package local_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// The JetStream guest (local/testdata/jetstream) counts "key seq" records
// per key and publishes "key seq count".
const jetStreamGuest = "local/testdata/jetstream"

// jsSetup makes the input stream IN (subject in.>) holding n records
// "k<i%keys> <i>" and the output stream OUT (subject out.counts).
func jsSetup(t *testing.T, url string, n, keys int) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out.counts"}, Duplicates: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	jsPublish(t, js, 0, n, keys)
	return js
}

func jsPublish(t *testing.T, js jetstream.JetStream, from, to, keys int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("in.k%d", i%keys), fmt.Appendf(nil, "k%d %d", i%keys, i)); err != nil {
			t.Fatal(err)
		}
		if (i-from)%1000 == 999 || i == to-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				t.Fatal("input publishes not acknowledged in a minute")
			}
		}
	}
}

// jsWant is what the guest must publish for records [0, n).
func jsWant(n, keys int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("k%d %d %d", i%keys, i, i/keys+1))
	}
	sort.Strings(out)
	return out
}

// jsOutput reads the whole OUT stream.
func jsOutput(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("OUT message %d: %v", seq, err)
		}
		out = append(out, string(m.Data))
	}
	sort.Strings(out)
	return out
}

// jsWaitOutput waits until OUT holds n messages.
func jsWaitOutput(t *testing.T, js jetstream.JetStream, n int, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	testutil.CheckFor(t, timeout, 20*time.Millisecond, func() error {
		st, err := js.Stream(ctx, "OUT")
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if int(info.State.Msgs) < n {
			return fmt.Errorf("OUT holds %d of %d messages", info.State.Msgs, n)
		}
		return nil
	})
}

func jsSubmit(t *testing.T, c *localtest.InProcess, url string, extra ...string) string {
	t.Helper()
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, jetStreamGuest))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--url", url, "--stream", "IN", "--subject", "out.counts"}, extra...)
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, Config: map[string]string{
		jobconfig.KeyCheckpointInterval: "100ms",
		jobconfig.KeyRestartStrategy:    "fixed-delay",
		jobconfig.KeyFixedDelayAttempts: "100",
		jobconfig.KeyFixedDelayDelay:    "300ms",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.CancelJob(context.Background(), id) })
	return id
}

func jsCheck(t *testing.T, js jetstream.JetStream, n, keys int) {
	t.Helper()
	if d := localtest.Diff(jsWant(n, keys), jsOutput(t, js)); d != "" {
		t.Fatalf("OUT is not each result exactly once:\n%s", d)
	}
}

// A job reads a stream, counts per key and publishes to another stream
// exactly once; records published while it runs are read too.
func TestJetStreamSourceToSinkExactlyOnce(t *testing.T) {
	srv := testutil.StartNATS(t)
	const n, keys = 3000, 5
	js := jsSetup(t, srv.URL, n, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	jsSubmit(t, c, srv.URL)
	jsWaitOutput(t, js, n, 2*time.Minute)
	jsPublish(t, js, n, 2*n, keys)
	jsWaitOutput(t, js, 2*n, 2*time.Minute)
	jsCheck(t, js, 2*n, keys)
}

// TaskManagers die three times while the job runs (in-process TaskManagers
// stopped abruptly, not kill -9 of a process): after each restore the
// source resumes at its checkpointed sequence and the sink's replays are
// deduplicated, so OUT holds each result once.
func TestJetStreamExactlyOnceAcrossTaskManagerFailures(t *testing.T) {
	srv := testutil.StartNATS(t)
	const n, keys = 20_000, 7
	js := jsSetup(t, srv.URL, n/4, keys)
	c := localtest.Start(t, local.Config{Slots: 4, TaskManagers: 2, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	id := jsSubmit(t, c, srv.URL)
	cl := c.Client()
	ctx := context.Background()
	for kill := range 3 {
		// Each kill comes after a checkpoint of this attempt completed
		// and with input still arriving.
		before := jsCount(t, js)
		testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
			if got := jsCount(t, js); got <= before {
				return fmt.Errorf("no new output since the last kill (%d)", got)
			}
			return nil
		})
		jsPublish(t, js, n/4*(kill+1), n/4*(kill+2), keys)
		d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
		victim := d.Vertices[len(d.Vertices)-1].Subtasks[0].TaskManager
		c.KillTaskManager(localtest.TaskManagerIndex(t, c, victim))
		c.StartTaskManager(4)
	}
	jsWaitOutput(t, js, n, 3*time.Minute)
	if det, err := cl.GetJob(ctx, id); err != nil || det.Restarts < 3 {
		t.Fatalf("restarts %d (%v): want at least 3", det.Restarts, err)
	}
	jsCheck(t, js, n, keys)
}

// The server goes away for several seconds mid-run and comes back on the
// same store: the job fails, restarts by its strategy until the server is
// back, and OUT still holds each result once.
func TestJetStreamExactlyOnceAcrossAServerRestart(t *testing.T) {
	srv := testutil.StartNATS(t)
	const n, keys = 6000, 3
	js := jsSetup(t, srv.URL, n/2, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	id := jsSubmit(t, c, srv.URL)
	testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
		if got := jsCount(t, js); got == 0 {
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
	jsPublish(t, js, n/2, n, keys)
	jsWaitOutput(t, js, n, 3*time.Minute)
	if _, err := cl.GetJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	jsCheck(t, js, n, keys)
}

func jsCount(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, "OUT")
	if err != nil {
		if strings.Contains(err.Error(), "timeout") {
			return 0
		}
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Msgs)
}

// Bad JetStream settings are refused at submission, each with an error
// that says what is wrong.
func TestJetStreamBadInputAtSubmit(t *testing.T) {
	srv := testutil.StartNATS(t)
	jsSetup(t, srv.URL, 0, 1)
	c := localtest.Start(t, local.Config{Slots: 2})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, jetStreamGuest))
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
