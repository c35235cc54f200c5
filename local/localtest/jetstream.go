package localtest

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sdk/client"
)

// The JetStream pipeline the connector tests run on any Cluster: the guest
// JetStreamGuest reads the stream IN, counts "key seq" records per key and
// publishes "key seq count" to OUT with the exactly-once sink.

// JetStreamGuest is the pipeline's guest, relative to the module root.
const JetStreamGuest = "local/testdata/jetstream"

// JetStreamSetup makes the input stream IN (subject in.>) holding n records
// "k<i%keys> <i>" and the output stream OUT (subject out.counts).
func JetStreamSetup(t testing.TB, url string, n, keys int) jetstream.JetStream {
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
	JetStreamPublish(t, js, 0, n, keys)
	return js
}

// JetStreamPublish publishes records [from, to) to IN, waiting for their acks.
func JetStreamPublish(t testing.TB, js jetstream.JetStream, from, to, keys int) {
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

// jetStreamWant is what the guest must publish for records [0, n).
func jetStreamWant(n, keys int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("k%d %d %d", i%keys, i, i/keys+1))
	}
	sort.Strings(out)
	return out
}

// jetStreamOutput reads the whole OUT stream.
func jetStreamOutput(t testing.TB, js jetstream.JetStream) []string {
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

// JetStreamWaitOutput waits until OUT holds n messages.
func JetStreamWaitOutput(t testing.TB, js jetstream.JetStream, n int, timeout time.Duration) {
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

// JetStreamSubmit submits the JetStream guest reading IN and publishing
// to out.counts, with checkpoints every 100ms and restarts, and cancels
// it at the test's end.
func JetStreamSubmit(t testing.TB, c Cluster, url string, extra ...string) string {
	t.Helper()
	id, err := JetStreamTrySubmit(t, c, url, nil, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().CancelJob(context.Background(), id) })
	return id
}

// JetStreamTrySubmit submits the JetStream guest as JetStreamSubmit does,
// with more job config (secrets, say), and returns the submission's error.
func JetStreamTrySubmit(t testing.TB, c Cluster, url string, config map[string]string, extra ...string) (string, error) {
	t.Helper()
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, Guest(t, JetStreamGuest))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--url", url, "--stream", "IN", "--subject", "out.counts"}, extra...)
	conf := map[string]string{
		jobconfig.KeyCheckpointInterval: "100ms",
		jobconfig.KeyRestartStrategy:    "fixed-delay",
		jobconfig.KeyFixedDelayAttempts: "100",
		jobconfig.KeyFixedDelayDelay:    "300ms",
	}
	maps.Copy(conf, config)
	return cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, Config: conf})
}

func JetStreamCheck(t testing.TB, js jetstream.JetStream, n, keys int) {
	t.Helper()
	if d := Diff(jetStreamWant(n, keys), jetStreamOutput(t, js)); d != "" {
		t.Fatalf("OUT is not each result exactly once:\n%s", d)
	}
}
func JetStreamCount(t testing.TB, js jetstream.JetStream) int {
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

// CheckJetStreamAcrossTaskManagerKills runs the pipeline over n records
// on c (two TaskManagers of 4 slots, heartbeat timeout a few seconds) and
// kills the TaskManager running the sink three times, each after new
// output and with input still arriving, starting a replacement: after
// each restore the source resumes at its checkpointed sequence and the
// sink's replays are deduplicated, so OUT holds each result once.
func CheckJetStreamAcrossTaskManagerKills(t testing.TB, c Cluster, natsURL string, n, keys int) {
	t.Helper()
	js := JetStreamSetup(t, natsURL, n/4, keys)
	id := JetStreamSubmit(t, c, natsURL)
	for kill := range 3 {
		before := JetStreamCount(t, js)
		testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
			if got := JetStreamCount(t, js); got <= before {
				return fmt.Errorf("no new output since the last kill (%d)", got)
			}
			return nil
		})
		JetStreamPublish(t, js, n/4*(kill+1), n/4*(kill+2), keys)
		d := WaitAllRunning(t, c, id, 2*time.Minute)
		victim := d.Vertices[len(d.Vertices)-1].Subtasks[0].TaskManager
		c.KillTaskManager(TaskManagerIndex(t, c, victim))
		c.StartTaskManager(4)
	}
	JetStreamWaitOutput(t, js, n, 3*time.Minute)
	if det, err := c.Client().GetJob(context.Background(), id); err != nil || det.Restarts < 3 {
		t.Fatalf("restarts %d (%v): want at least 3", det.Restarts, err)
	}
	JetStreamCheck(t, js, n, keys)
}
