package localtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sdk/client"
)

// The Kafka pipeline the connector tests run on any Cluster: the guest
// KafkaGuest reads the topic KafkaIn, counts "key seq" records per key and
// produces "key seq count" to KafkaOut with the exactly-once sink. The
// input is keyed, so each key's records are in one partition, in order.

// KafkaGuest is the pipeline's guest, relative to the module root.
const KafkaGuest = "local/testdata/kafka"

// The pipeline's topics, and how many partitions StartKafkaPipeline gives
// each.
const (
	KafkaIn         = "in"
	KafkaOut        = "out"
	KafkaPartitions = 3
)

// StartKafkaPipeline starts a kfake broker with the pipeline's topics and
// produces records [0, n) to KafkaIn.
func StartKafkaPipeline(t testing.TB, n, keys int) *testutil.Kafka {
	t.Helper()
	k := testutil.StartKafka(t, KafkaPartitions, KafkaIn, KafkaOut)
	KafkaProduce(t, k.Brokers, 0, n, keys)
	return k
}

// KafkaProduce produces records [from, to) to KafkaIn: key k<i%keys>,
// value "k<i%keys> <i>", waiting for their acks.
func KafkaProduce(t testing.TB, brokers string, from, to, keys int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(KafkaIn))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for lo := from; lo < to; lo += 1000 {
		var recs []*kgo.Record
		for i := lo; i < min(lo+1000, to); i++ {
			k := fmt.Sprintf("k%d", i%keys)
			recs = append(recs, &kgo.Record{Key: []byte(k), Value: fmt.Appendf(nil, "%s %d", k, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", KafkaIn, err)
		}
	}
}

// KafkaRead reads topic with isolation read_committed from the start until
// no record comes for quiet, and returns the values.
func KafkaRead(t testing.TB, brokers, topic string, quiet time.Duration) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)); n++ })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("read %s: %v", topic, e.Err)
			}
		}
		if n == 0 {
			return out
		}
	}
}

// KafkaCount is how many committed records KafkaOut holds.
func KafkaCount(t testing.TB, brokers string) int {
	t.Helper()
	return len(KafkaRead(t, brokers, KafkaOut, 300*time.Millisecond))
}

// KafkaWaitOutput waits until KafkaOut holds at least n committed records.
func KafkaWaitOutput(t testing.TB, brokers string, n int, timeout time.Duration) {
	t.Helper()
	KafkaWaitTopic(t, brokers, KafkaOut, n, timeout)
}

// KafkaWaitTopic waits until topic holds at least n committed records.
func KafkaWaitTopic(t testing.TB, brokers, topic string, n int, timeout time.Duration) {
	t.Helper()
	testutil.CheckFor(t, timeout, 100*time.Millisecond, func() error {
		if got := len(KafkaRead(t, brokers, topic, 300*time.Millisecond)); got < n {
			return fmt.Errorf("%s holds %d of %d records", topic, got, n)
		}
		return nil
	})
}

// KafkaCheck checks that KafkaOut holds each result for records [0, n)
// exactly once.
func KafkaCheck(t testing.TB, brokers string, n, keys int) {
	t.Helper()
	want := make([]string, 0, n)
	for i := range n {
		want = append(want, fmt.Sprintf("k%d %d %d", i%keys, i, i/keys+1))
	}
	got := KafkaRead(t, brokers, KafkaOut, 2*time.Second)
	sort.Strings(want)
	sort.Strings(got)
	if d := Diff(want, got); d != "" {
		t.Fatalf("%s is not each result exactly once:\n%s", KafkaOut, d)
	}
}

// KafkaSubmit submits the Kafka guest, with checkpoints every 100ms and
// restarts and more job config, and cancels it at the test's end.
func KafkaSubmit(t testing.TB, c Cluster, brokers string, config map[string]string, args ...string) string {
	t.Helper()
	id, err := KafkaTrySubmit(t, c, brokers, config, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().CancelJob(context.Background(), id) })
	return id
}

// KafkaTrySubmit submits the Kafka guest as KafkaSubmit does and returns
// the submission's error.
func KafkaTrySubmit(t testing.TB, c Cluster, brokers string, config map[string]string, args ...string) (string, error) {
	t.Helper()
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, Guest(t, KafkaGuest))
	if err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{
		jobconfig.KeyCheckpointInterval: "100ms",
		jobconfig.KeyRestartStrategy:    "fixed-delay",
		jobconfig.KeyFixedDelayAttempts: "100",
		jobconfig.KeyFixedDelayDelay:    "300ms",
	}
	maps.Copy(conf, config)
	args = append([]string{"--brokers", brokers, "--in", KafkaIn, "--out", KafkaOut}, args...)
	return cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, Config: conf})
}

// CheckKafkaAcrossTaskManagerKills runs the Kafka pipeline on c (two
// TaskManagers of 4 slots, a heartbeat timeout of a few seconds) and kills
// the TaskManager running the sink three times, each after new committed
// output and with input still arriving, the second while a checkpoint is
// in flight (each barrier hook of the count is kept busy for 200ms),
// starting a replacement each time: the source resumes at its
// checkpointed offsets, the sink's transactions of the failed attempts
// are aborted or committed once, and a read_committed consumer sees each
// result exactly once.
func CheckKafkaAcrossTaskManagerKills(t testing.TB, c Cluster, brokers string, n, keys int) {
	t.Helper()
	KafkaProduce(t, brokers, 0, n/4, keys)
	id := KafkaSubmit(t, c, brokers, map[string]string{jobconfig.KeyClock: string(jobconfig.ClockWall)}, "--barrier-delay", "200ms")
	cl := c.Client()
	restarts := 0
	for kill := range 3 {
		before := KafkaCount(t, brokers)
		testutil.CheckFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
			if got := KafkaCount(t, brokers); got <= before {
				return fmt.Errorf("no new output since the last kill (%d)", got)
			}
			return nil
		})
		KafkaProduce(t, brokers, n/4*(kill+1), n/4*(kill+2), keys)
		d := WaitAllRunning(t, c, id, 2*time.Minute)
		victim := TaskManagerIndex(t, c, d.Vertices[len(d.Vertices)-1].Subtasks[0].TaskManager)
		if kill == 1 {
			testutil.CheckFor(t, time.Minute, 5*time.Millisecond, func() error {
				cps, err := cl.ListCheckpoints(context.Background(), id)
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(cps, func(cp client.Checkpoint) bool { return cp.Status == "IN_PROGRESS" }) {
					return fmt.Errorf("none of job %s's %d checkpoints is in progress", id, len(cps))
				}
				return nil
			})
		}
		c.KillTaskManager(victim)
		c.StartTaskManager(4)
		WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
			if d.Restarts <= restarts {
				return fmt.Errorf("job %s restarted %d times, want more than %d after kill %d", id, d.Restarts, restarts, kill+1)
			}
			restarts = d.Restarts
			return nil
		})
	}
	KafkaWaitOutput(t, brokers, n, 3*time.Minute)
	KafkaCheck(t, brokers, n, keys)
}
