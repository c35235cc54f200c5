package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// kafkaReadGuest plans a kafka source into a collect sink (no guest
// operators), until the Go SDK has the call.
const kafkaReadGuest = "local/testdata/kafkaread"

// kafkaSubmit submits the kafkaread guest with the source's config at
// parallelism p, checkpointing every 200 ms and restarting after 300 ms.
func kafkaSubmit(t *testing.T, c *localtest.InProcess, config map[string]string, p int) string {
	t.Helper()
	id, err := kafkaTrySubmit(t, c, config, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().CancelJob(context.Background(), id) })
	return id
}

func kafkaTrySubmit(t *testing.T, c *localtest.InProcess, config map[string]string, p int, savepoint ...string) (string, error) {
	t.Helper()
	cfg, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.CGuest(t, kafkaReadGuest))
	if err != nil {
		t.Fatal(err)
	}
	spec := client.JobSpec{ModuleDigest: digest, Args: []string{string(cfg), strconv.Itoa(p)}, Parallelism: p,
		Config: map[string]string{jobconfig.KeyCheckpointInterval: "200ms",
			jobconfig.KeyRestartStrategy: "fixed-delay", jobconfig.KeyFixedDelayAttempts: "100", jobconfig.KeyFixedDelayDelay: "300ms"}}
	if len(savepoint) > 0 {
		spec.FromSavepoint = savepoint[0]
	}
	return cl.SubmitJob(ctx, spec)
}

// Bad Kafka settings are refused at submission, each with an error that
// says what is wrong.
func TestKafkaSourceBadInputAtSubmit(t *testing.T) {
	k := testutil.StartKafka(t, 1, "bids")
	c := localtest.Start(t, local.Config{Slots: 2})
	dead := testutil.FreeAddr(t)
	for _, tc := range []struct {
		name   string
		config map[string]string
		want   string
	}{
		{"unknown topic", map[string]string{"brokers": k.Brokers, "topics": "asks"}, `topic "asks" does not exist`},
		{"pattern matches none", map[string]string{"brokers": k.Brokers, "topic-pattern": "asks.*"}, "no topic at " + k.Brokers + " matches"},
		{"unreachable broker", map[string]string{"brokers": dead, "topics": "bids"}, "at " + dead + ": unable to dial"},
		{"malformed address", map[string]string{"brokers": "127.0.0.1", "topics": "bids"}, `"127.0.0.1" is not host:port`},
		{"group start without a group", map[string]string{"brokers": k.Brokers, "topics": "bids", "start": "group"}, `start "group" needs "group"`},
		{"unknown key", map[string]string{"brokers": k.Brokers, "topics": "bids", "topic": "bids"}, `unknown config key "topic"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := kafkaTrySubmit(t, c, tc.config, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("submit: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// released follows the records a job released (covered by a completed
// checkpoint).
type released struct {
	mu   sync.Mutex
	from int64
	got  map[string]int
}

func (r *released) poll(t *testing.T, c *localtest.InProcess, id string) {
	t.Helper()
	res, err := c.Client().PollRecords(context.Background(), id, r.from, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string]int{}
	}
	for _, v := range res.Records {
		r.got[string(v)]++
	}
	r.from = res.RecordsOffset + int64(len(res.Records))
}

// wait polls until n distinct records were released, and fails on a
// duplicate.
func (r *released) wait(t *testing.T, c *localtest.InProcess, id string, n int) {
	t.Helper()
	testutil.CheckFor(t, 3*time.Minute, 20*time.Millisecond, func() error {
		r.poll(t, c, id)
		r.mu.Lock()
		defer r.mu.Unlock()
		for v, k := range r.got {
			if k > 1 {
				t.Fatalf("%s released %d times", v, k)
			}
		}
		if len(r.got) < n {
			return fmt.Errorf("%d of %d records released", len(r.got), n)
		}
		return nil
	})
}

// check says whether exactly v0..v(n-1) were released, each once.
func (r *released) check(t *testing.T, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range n {
		if k := r.got[fmt.Sprintf("v%d", i)]; k != 1 {
			t.Fatalf("v%d released %d times, want once", i, k)
		}
	}
	if len(r.got) != n {
		t.Fatalf("%d records released, want %d", len(r.got), n)
	}
}

// A kafka source at parallelism 2 on a topic of 3 partitions: every
// record once; a partition created while the job runs is found and read;
// the broker closed for a few seconds and reopened on its data dir loses
// and repeats nothing.
func TestKafkaSourceLocal(t *testing.T) {
	k := testutil.StartKafka(t, 3, "bids")
	const n = 3000
	k.Produce(t, "bids", -1, 0, n)
	c := localtest.Start(t, local.Config{Slots: 4})
	id := kafkaSubmit(t, c, map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "200"}, 2)
	var r released
	r.wait(t, c, id, n)

	adm := kadm.NewClient(mustKgo(t, k.Brokers))
	if _, err := adm.CreatePartitions(context.Background(), 1, "bids"); err != nil {
		t.Fatal(err)
	}
	k.Produce(t, "bids", 3, n, n+500)
	r.wait(t, c, id, n+500)

	k.Stop()
	time.Sleep(3 * time.Second) // the outage itself, not a wait for a state
	k.Start()
	k.Produce(t, "bids", -1, n+500, 2*n)
	r.wait(t, c, id, 2*n)
	r.check(t, 2*n)
}

// The broker closed for longer than the source's give-up time
// (task.DefaultKafkaGiveUp) and reopened on its data dir: the job fails,
// restarts by its strategy until the broker is back, and releases every
// record once.
func TestKafkaSourceBrokerDownRestartsTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("the outage lasts over 30 s")
	}
	k := testutil.StartKafka(t, 3, "bids")
	const n = 2000
	k.Produce(t, "bids", -1, 0, n/2)
	c := localtest.Start(t, local.Config{Slots: 4})
	id := kafkaSubmit(t, c, map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0"}, 2)
	var r released
	r.wait(t, c, id, n/2)
	k.Stop()
	localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
		if d.Restarts == 0 {
			return fmt.Errorf("job %s has not restarted yet (%s)", id, d.State)
		}
		return nil
	})
	k.Start()
	k.Produce(t, "bids", -1, n/2, n)
	r.wait(t, c, id, n)
	r.check(t, n)
	d, err := c.Client().GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Failure+fmt.Sprint(d.History), "no broker at "+k.Brokers+" answered") {
		t.Errorf("the job's failures %q %v do not say the broker did not answer", d.Failure, d.History)
	}
}

// Stopped with a savepoint and resumed from it: the two jobs release
// every record once between them; a resume at another parallelism is
// refused, saying why.
func TestKafkaSourceSavepointResume(t *testing.T) {
	k := testutil.StartKafka(t, 3, "bids")
	const n = 2000
	k.Produce(t, "bids", -1, 0, n/2)
	c := localtest.Start(t, local.Config{Slots: 4})
	cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0"}
	id := kafkaSubmit(t, c, cfg, 2)
	var r1 released
	r1.wait(t, c, id, n/2)
	sp, err := c.Client().TriggerSavepoint(context.Background(), id, true, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	localtest.WaitTerminal(t, c, id, time.Minute)
	r1.poll(t, c, id)
	k.Produce(t, "bids", -1, n/2, n)

	if _, err := kafkaTrySubmit(t, c, cfg, 3, sp.SavepointID); err == nil || !strings.Contains(err.Error(), "a kafka source cannot be rescaled") {
		t.Fatalf("resume at parallelism 3: %v, want it refused", err)
	}
	id2, err := kafkaTrySubmit(t, c, cfg, 2, sp.SavepointID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().CancelJob(context.Background(), id2) })
	var r2 released
	r2.wait(t, c, id2, n-len(r1.got))
	for v := range r1.got {
		r2.got[v]++
	}
	r2.check(t, n)
}

// A TaskManager killed three times while the job runs: every record is
// released once.
func TestKafkaSourceAcrossTaskManagerKills(t *testing.T) {
	k := testutil.StartKafka(t, 3, "bids")
	const n = 8000
	k.Produce(t, "bids", -1, 0, n/4)
	c := localtest.Start(t, local.Config{Slots: 4, TaskManagers: 2, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	id := kafkaSubmit(t, c, map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0"}, 2)
	var r released
	for kill := range 3 {
		r.wait(t, c, id, n/4*(kill+1))
		k.Produce(t, "bids", -1, n/4*(kill+1), n/4*(kill+2))
		d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
		victim := d.Vertices[0].Subtasks[kill%2].TaskManager
		c.KillTaskManager(localtest.TaskManagerIndex(t, c, victim))
		c.StartTaskManager(4)
	}
	r.wait(t, c, id, n)
	r.check(t, n)
	if det, err := c.Client().GetJob(context.Background(), id); err != nil || det.Restarts < 3 {
		t.Fatalf("restarts %d (%v): want at least 3", det.Restarts, err)
	}
}

func mustKgo(t *testing.T, brokers string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
