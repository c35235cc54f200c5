package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// kafkaRecords is the input topic's size: enough that a job's fixed cost
// (submit, deploy, the first fetch) and the exactly-once sink's latency (the
// last records wait for a checkpoint to complete) are a small share of its
// time.
const kafkaRecords = 2_000_000

// BenchmarkKafkaMapP2 runs Kafka → map → Kafka (upper-case each value) at
// parallelism 2 over a topic of kafkaRecords records in 2 partitions on
// franz-go's in-process test broker, with the map in Go
// (bench/testdata/kafkamap) and in C (bench/testdata/kafkamapc), each with
// the exactly-once sink and the at-least-once one (checkpoints every 200ms
// for both), and, in the same run, rotating which goes first, franz-go's
// own loop over the same broker: one client consumes the topic, maps each
// record the same way and produces it, until every record is
// acknowledged. The broker runs in this process, so every figure includes
// its work. Each run is timed from its start (SubmitJob, or the loop's
// first poll) until every record is readable (read_committed) in its output
// topic: that includes a job's start and, exactly once, the latency of the
// last records, which wait for their checkpoint to complete
// (kafkaRecords is large enough for those to be a small share). Timing a
// steady state instead would not do for exactly once: with the input all
// there at the start, its output is the committer's bursts, faster than
// the pipeline.
//
//   - records/s, alo_records/s: the Go job exactly and at least once;
//     c_records/s, c_alo_records/s the same for the C job; franz_records/s
//     the franz-go loop;
//   - x_franz, c_x_franz: at least once over the franz-go loop (target ≥ 0.5);
//   - x_exactly_once, c_x_exactly_once: exactly once over at least once
//     (target ≥ 0.8).
func BenchmarkKafkaMapP2(b *testing.B) {
	k := testutil.StartKafka(b, 2, "in")
	fill(b, k.Brokers, "in", kafkaRecords)
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	ctx := context.Background()
	goJob, cJob := kafkaMapJobs(b, c)
	adm := kadmClient(b, k.Brokers)
	topic := 0
	newTopic := func() string {
		topic++
		name := fmt.Sprintf("out-%d", topic)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, name); err != nil {
			b.Fatal(err)
		}
		return name
	}
	sluice := func(digest string, atLeastOnce bool) time.Duration {
		out := newTopic()
		t0 := time.Now()
		id := submitKafkaMap(b, c, digest, k.Brokers, out, atLeastOnce)
		waitCommitted(b, adm, out, kafkaRecords)
		d := time.Since(t0)
		if err := c.Client().CancelJob(ctx, id); err != nil {
			b.Fatal(err)
		}
		localtest.WaitTerminal(b, c, id, time.Minute)
		return d
	}
	franz := func() time.Duration {
		out := newTopic()
		t0 := time.Now()
		franzMap(b, k.Brokers, "in", out, kafkaRecords)
		return time.Since(t0)
	}
	sluice(goJob, true) // warm up: compile, and check they run
	sluice(cJob, true)
	var eo, alo, cEO, cALO, fr time.Duration
	b.ResetTimer()
	i := 0
	for b.Loop() {
		runs := []func(){
			func() { eo += sluice(goJob, false) }, func() { alo += sluice(goJob, true) },
			func() { fr += franz() },
			func() { cEO += sluice(cJob, false) }, func() { cALO += sluice(cJob, true) },
		}
		for j := range runs {
			runs[(i+j)%len(runs)]()
		}
		i++
	}
	n := float64(kafkaRecords) * float64(b.N)
	b.ReportMetric(n/eo.Seconds(), "records/s")
	b.ReportMetric(n/alo.Seconds(), "alo_records/s")
	b.ReportMetric(n/cEO.Seconds(), "c_records/s")
	b.ReportMetric(n/cALO.Seconds(), "c_alo_records/s")
	b.ReportMetric(n/fr.Seconds(), "franz_records/s")
	b.ReportMetric(fr.Seconds()/alo.Seconds(), "x_franz")
	b.ReportMetric(alo.Seconds()/eo.Seconds(), "x_exactly_once")
	b.ReportMetric(fr.Seconds()/cALO.Seconds(), "c_x_franz")
	b.ReportMetric(cALO.Seconds()/cEO.Seconds(), "c_x_exactly_once")
}

// kafkaMapJobs uploads the benchmark's Go and C jobs and returns their
// digests.
func kafkaMapJobs(t testing.TB, c localtest.Cluster) (goJob, cJob string) {
	ctx := context.Background()
	for _, m := range []struct {
		digest *string
		wasm   []byte
	}{{&goJob, localtest.Guest(t, "bench/testdata/kafkamap")}, {&cJob, localtest.CGuest(t, "bench/testdata/kafkamapc")}} {
		d, err := c.Client().UploadModule(ctx, m.wasm)
		if err != nil {
			t.Fatal(err)
		}
		*m.digest = d
	}
	return goJob, cJob
}

// submitKafkaMap submits a kafka map job from topic in to out.
func submitKafkaMap(t testing.TB, c localtest.Cluster, digest, brokers, out string, atLeastOnce bool) string {
	args := []string{"--brokers", brokers, "--in", "in", "--out", out}
	if atLeastOnce {
		args = append(args, "--at-least-once")
	}
	id, err := c.Client().SubmitJob(context.Background(), client.JobSpec{ModuleDigest: digest, Parallelism: 2, Args: args,
		Config: map[string]string{jobconfig.KeyCheckpointInterval: "200ms"}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func kadmClient(b *testing.B, brokers string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// fill produces n records of about 100 bytes to topic.
func fill(b testing.TB, brokers, topic string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for i := 0; i < n; {
		var recs []*kgo.Record
		for ; i < n && len(recs) < 10_000; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%1000),
				Value: fmt.Appendf(nil, "record %09d of the kafka benchmark, padded to about one hundred bytes......", i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
}

// waitCommitted waits until topic's committed (last stable) offsets add up
// to at least n. Transaction markers take offsets too, a few per
// checkpoint, so this may end that many records early; the benchmark's
// figures are that much too high for exactly once.
func waitCommitted(b *testing.B, adm *kadm.Client, topic string, n int64) {
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		offs, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			var sum int64
			offs.Each(func(o kadm.ListedOffset) { sum += o.Offset })
			if sum >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: fewer than %d records committed in 10 minutes (%v)", topic, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// franzMap is the baseline: one franz-go client consumes n records of in,
// upper-cases each value and produces it to out, then flushes.
func franzMap(b testing.TB, brokers, in, out string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for seen := 0; seen < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			b.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			cl.Produce(ctx, &kgo.Record{Key: r.Key, Value: bytes.ToUpper(r.Value), Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// The baseline and both jobs (exactly once) map and produce every record
// once.
func TestKafkaMapsProduceEveryRecord(t *testing.T) {
	k := testutil.StartKafka(t, 2, "in", "franz", "go", "c")
	fill(t, k.Brokers, "in", 500)
	franzMap(t, k.Brokers, "in", "franz", 500)
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 4}) // both jobs at once
	goJob, cJob := kafkaMapJobs(t, c)
	submitKafkaMap(t, c, goJob, k.Brokers, "go", false)
	submitKafkaMap(t, c, cJob, k.Brokers, "c", false)
	for _, out := range []string{"franz", "go", "c"} {
		if out != "franz" {
			localtest.KafkaWaitTopic(t, k.Brokers, out, 500, 2*time.Minute)
		}
		got := localtest.KafkaRead(t, k.Brokers, out, time.Second)
		if len(got) != 500 {
			t.Fatalf("%s holds %d records, want 500", out, len(got))
		}
		slices.Sort(got)
		for i, v := range got {
			if want := fmt.Sprintf("RECORD %09d OF THE KAFKA BENCHMARK, PADDED TO ABOUT ONE HUNDRED BYTES......", i); v != want {
				t.Fatalf("%s holds %q, want %q", out, v, want)
			}
		}
	}
}
