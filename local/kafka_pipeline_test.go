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

// A job reads a topic of three partitions at parallelism 2, counts per key
// and produces to another topic exactly once; records produced while it
// runs are read too; a read_committed consumer sees each result once.
func TestKafkaPipelineExactlyOnce(t *testing.T) {
	const n, keys = 3000, 5
	k := localtest.StartKafkaPipeline(t, n, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	localtest.KafkaSubmit(t, c, k.Brokers, nil)
	localtest.KafkaWaitOutput(t, k.Brokers, n, 2*time.Minute)
	localtest.KafkaProduce(t, k.Brokers, n, 2*n, keys)
	localtest.KafkaWaitOutput(t, k.Brokers, 2*n, 2*time.Minute)
	localtest.KafkaCheck(t, k.Brokers, 2*n, keys)
}

// At least once, the sink produces at once and flushes at each barrier:
// every input record has a result (a restart could repeat some).
func TestKafkaPipelineAtLeastOnce(t *testing.T) {
	const n, keys = 3000, 5
	k := localtest.StartKafkaPipeline(t, n, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	localtest.KafkaSubmit(t, c, k.Brokers, nil, "--at-least-once")
	localtest.KafkaWaitOutput(t, k.Brokers, n, 2*time.Minute)
	seen := map[string]bool{}
	for _, r := range localtest.KafkaRead(t, k.Brokers, localtest.KafkaOut, time.Second) {
		f := strings.Fields(r)
		if len(f) != 3 {
			t.Fatalf("result %q, want \"key seq count\"", r)
		}
		seen[f[0]+" "+f[1]] = true
	}
	for i := range n {
		if r := fmt.Sprintf("k%d %d", i%keys, i); !seen[r] {
			t.Fatalf("no result for input %q (%d inputs have one)", r, len(seen))
		}
	}
}

// TaskManagers die three times while the job runs, once mid-checkpoint
// (in-process TaskManagers stopped abruptly; cmd/sluice kill -9s
// processes): the output holds each result once.
func TestKafkaExactlyOnceAcrossTaskManagerFailures(t *testing.T) {
	k := testutil.StartKafka(t, localtest.KafkaPartitions, localtest.KafkaIn, localtest.KafkaOut)
	c := localtest.Start(t, local.Config{Slots: 4, TaskManagers: 2, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	localtest.CheckKafkaAcrossTaskManagerKills(t, c, k.Brokers, 20_000, 7)
}

// The broker goes away for several seconds mid-run and comes back on the
// same data dir: the job fails, restarts by its strategy until the broker
// is back, and the output still holds each result once.
func TestKafkaExactlyOnceAcrossABrokerRestart(t *testing.T) {
	const n, keys = 6000, 3
	k := localtest.StartKafkaPipeline(t, n/2, keys)
	c := localtest.Start(t, local.Config{Slots: 4})
	id := localtest.KafkaSubmit(t, c, k.Brokers, nil)
	testutil.CheckFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
		if got := localtest.KafkaCount(t, k.Brokers); got == 0 {
			return errors.New("no output yet")
		}
		return nil
	})
	k.Stop()
	localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
		if d.Restarts == 0 {
			return fmt.Errorf("job %s has not restarted yet (%s)", id, d.State)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // away for several seconds in all
	k.Start()
	localtest.KafkaProduce(t, k.Brokers, n/2, n, keys)
	localtest.KafkaWaitOutput(t, k.Brokers, n, 3*time.Minute)
	localtest.KafkaCheck(t, k.Brokers, n, keys)
}

// Bad Kafka settings are refused at submission, each with an error that
// says what is wrong.
func TestKafkaBadInputAtSubmit(t *testing.T) {
	k := testutil.StartKafka(t, 1, localtest.KafkaIn, localtest.KafkaOut)
	c := localtest.Start(t, local.Config{Slots: 2})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, localtest.KafkaGuest))
	if err != nil {
		t.Fatal(err)
	}
	dead := testutil.FreeAddr(t)
	checkpoints := map[string]string{jobconfig.KeyCheckpointInterval: "1s"}
	for _, tc := range []struct {
		name, brokers, in, out string
		config                 map[string]string
		want                   string
	}{
		{"unreachable broker", dead, "in", "out", checkpoints, "list the topics at " + dead},
		{"malformed broker address", "127.0.0.1:99999", "in", "out", checkpoints, `port "99999", not from 1 to 65535`},
		{"broker address with a scheme", "kafka://" + k.Brokers, "in", "out", checkpoints, "has a scheme"},
		{"unknown topic", k.Brokers, "nope", "out", checkpoints, `"nope"`},
		{"invalid sink topic", k.Brokers, "in", "out/counts", checkpoints, `has '/' at byte 3`},
		{"exactly once without checkpoints", k.Brokers, "in", "out", nil, "checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--brokers", tc.brokers, "--in", tc.in, "--out", tc.out}
			_, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 1, Config: tc.config})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("submit: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
