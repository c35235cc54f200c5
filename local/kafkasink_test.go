package local_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// kafkaSinkGuest plans nexmark events into a kafka sink (no guest
// operator), written against the raw ABI until the SDK has the call.
const kafkaSinkGuest = "local/testdata/kafkasink"

// kafkaSinkSubmit submits the guest with args (pairs, see its doc) and the
// job config conf over checkpoints every 100ms and a patient restart
// strategy.
func kafkaSinkSubmit(t *testing.T, c localtest.Cluster, conf map[string]string, args ...string) (string, error) {
	t.Helper()
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, kafkaSinkGuest))
	if err != nil {
		t.Fatal(err)
	}
	config := map[string]string{
		jobconfig.KeyCheckpointInterval: "100ms",
		jobconfig.KeyRestartStrategy:    "fixed-delay",
		jobconfig.KeyFixedDelayAttempts: "100",
		jobconfig.KeyFixedDelayDelay:    "300ms",
	}
	maps.Copy(config, conf)
	for k, v := range conf {
		if v == "" {
			delete(config, k)
		}
	}
	return cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, Config: config})
}

// kafkaOut reads the topic out with the isolation level until it holds
// at least want records: the count of each value.
func kafkaOut(t *testing.T, k *testutil.Kafka, committed bool, want int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range k.Read(t, "out", committed, want) {
		got[string(r.Value)]++
	}
	return got
}

// checkEachOnce fails unless got holds n records, each value once (the
// nexmark events of one run are distinct).
func checkEachOnce(t *testing.T, got map[string]int, n int) {
	t.Helper()
	total, dup := 0, 0
	for _, c := range got {
		total += c
		if c > 1 {
			dup++
		}
	}
	if total != n || dup > 0 || len(got) != n {
		t.Fatalf("out holds %d records, %d distinct, %d of them more than once; want %d, each once", total, len(got), dup, n)
	}
}

// TaskManagers die three times while nexmark events flow into the
// exactly-once sink (in-process TaskManagers stopped abruptly): a
// read_committed consumer sees each event once.
func TestKafkaSinkExactlyOnceAcrossTaskManagerKills(t *testing.T) {
	k := testutil.StartKafka(t, 2, "out")
	c := localtest.Start(t, local.Config{Slots: 4, TaskManagers: 2, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	const n = 30_000
	id, err := kafkaSinkSubmit(t, c, nil, "brokers", k.Brokers, "events", fmt.Sprint(n), "rate", "1500")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := k.EndOffsets(t, "out", true)
		testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
			if got := k.EndOffsets(t, "out", true); got <= before {
				return fmt.Errorf("nothing committed since the last kill (%d)", got)
			}
			return nil
		})
		d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
		victim := d.Vertices[len(d.Vertices)-1].Subtasks[0].TaskManager
		c.KillTaskManager(localtest.TaskManagerIndex(t, c, victim))
		c.StartTaskManager(4)
	}
	localtest.WaitFinished(t, c, id)
	if det, err := c.Client().GetJob(context.Background(), id); err != nil || det.Restarts < 3 {
		t.Fatalf("restarts %d (%v): want at least 3", det.Restarts, err)
	}
	checkEachOnce(t, kafkaOut(t, k, true, n), n)
}

// The broker goes away for seconds mid-run and comes back on its data
// dir: the job rides it out (by retrying, or by its restart strategy) and
// out holds each event once.
func TestKafkaSinkExactlyOnceAcrossABrokerRestart(t *testing.T) {
	k := testutil.StartKafka(t, 2, "out")
	c := localtest.Start(t, local.Config{Slots: 4})
	const n = 12_000
	id, err := kafkaSinkSubmit(t, c, nil, "brokers", k.Brokers, "events", fmt.Sprint(n), "rate", "1500")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
		if k.EndOffsets(t, "out", true) == 0 {
			return errors.New("nothing committed yet")
		}
		return nil
	})
	k.Stop()
	time.Sleep(3 * time.Second) // the outage itself, not a wait for a state
	k.Start()
	localtest.WaitFinished(t, c, id)
	checkEachOnce(t, kafkaOut(t, k, true, n), n)
}

// At least once: every event reaches out.
func TestKafkaSinkAtLeastOnceEndToEnd(t *testing.T) {
	k := testutil.StartKafka(t, 2, "out")
	c := localtest.Start(t, local.Config{Slots: 4})
	const n = 5000
	id, err := kafkaSinkSubmit(t, c, nil, "brokers", k.Brokers, "events", fmt.Sprint(n), "delivery", "at-least-once")
	if err != nil {
		t.Fatal(err)
	}
	localtest.WaitFinished(t, c, id)
	if got := kafkaOut(t, k, false, n); len(got) != n {
		t.Fatalf("out holds %d distinct events, want %d", len(got), n)
	}
}

// Bad sink settings are refused at submission, each saying what is wrong.
func TestKafkaSinkBadInputAtSubmit(t *testing.T) {
	k := testutil.StartKafka(t, 1, "out")
	c := localtest.Start(t, local.Config{Slots: 2})
	dead := testutil.FreeAddr(t)
	for _, tc := range []struct {
		name string
		conf map[string]string
		args []string
		want string
	}{
		{"exactly once without checkpoints", map[string]string{jobconfig.KeyCheckpointInterval: ""}, nil, "exactly-once kafka sink"},
		{"unreachable broker", nil, []string{"brokers", dead}, "check that Kafka runs and the address is right"},
		{"malformed broker address", nil, []string{"brokers", "127.0.0.1"}, "is not host:port"},
		{"unknown topic", nil, []string{"topic", "nope"}, `topic "nope" does not exist`},
		{"invalid topic", nil, []string{"topic", "out/put"}, `has '/' at byte 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"brokers", k.Brokers}, tc.args...)
			if len(tc.args) > 0 && tc.args[0] == "brokers" {
				args = tc.args
			}
			_, err := kafkaSinkSubmit(t, c, tc.conf, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("submit: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
