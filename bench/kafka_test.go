package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
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
// (submit, deploy, the first fetch) is a small share of its time.
const kafkaRecords = 300_000

// BenchmarkKafkaMapP2 runs Kafka → map → Kafka (bench/testdata/kafkamap:
// upper-case each value) at parallelism 2 over a topic of kafkaRecords
// records in 2 partitions on franz-go's in-process test broker, with the
// exactly-once sink (checkpoints every second) and the at-least-once one,
// and, in the same run, rotating which goes first, franz-go's own loop
// over the same broker: one client consumes the topic, maps each record
// the same way and produces it, until every record is acknowledged. The
// broker runs in this process, so every figure includes its work.
//
//   - records/s: Sluice exactly once, by wall time;
//   - alo_records/s, franz_records/s: at least once, and the franz-go loop;
//   - x_franz: Sluice at least once over the franz-go loop (target ≥ 0.5);
//   - x_exactly_once: exactly once over at least once (target ≥ 0.8).
func BenchmarkKafkaMapP2(b *testing.B) {
	k := testutil.StartKafka(b, 2, "in")
	fill(b, k.Brokers, "in", kafkaRecords)
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(b, "bench/testdata/kafkamap"))
	if err != nil {
		b.Fatal(err)
	}
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
	sluice := func(atLeastOnce bool) time.Duration {
		out := newTopic()
		args := []string{"--brokers", k.Brokers, "--in", "in", "--out", out}
		if atLeastOnce {
			args = append(args, "--at-least-once")
		}
		t0 := time.Now()
		id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Parallelism: 2, Args: args,
			Config: map[string]string{jobconfig.KeyCheckpointInterval: "1s"}})
		if err != nil {
			b.Fatal(err)
		}
		waitCommitted(b, adm, out, kafkaRecords)
		d := time.Since(t0)
		if err := cl.CancelJob(ctx, id); err != nil {
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
	sluice(true) // warm up: compile, and check it runs
	var eo, alo, fr time.Duration
	b.ResetTimer()
	i := 0
	for b.Loop() {
		runs := []func(){func() { eo += sluice(false) }, func() { alo += sluice(true) }, func() { fr += franz() }}
		for j := range runs {
			runs[(i+j)%len(runs)]()
		}
		i++
	}
	n := float64(kafkaRecords) * float64(b.N)
	b.ReportMetric(n/eo.Seconds(), "records/s")
	b.ReportMetric(n/alo.Seconds(), "alo_records/s")
	b.ReportMetric(n/fr.Seconds(), "franz_records/s")
	b.ReportMetric(fr.Seconds()/alo.Seconds(), "x_franz")
	b.ReportMetric(alo.Seconds()/eo.Seconds(), "x_exactly_once")
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

// The baseline maps and produces every record.
func TestFranzMapProducesEveryRecord(t *testing.T) {
	k := testutil.StartKafka(t, 2, "in", "out")
	fill(t, k.Brokers, "in", 500)
	franzMap(t, k.Brokers, "in", "out", 500)
	got := localtest.KafkaRead(t, k.Brokers, "out", time.Second)
	if len(got) != 500 {
		t.Fatalf("out holds %d records, want 500", len(got))
	}
	for _, v := range got {
		if !strings.HasPrefix(v, "RECORD ") || v != strings.ToUpper(v) {
			t.Fatalf("out holds %q, not an upper-cased input record", v)
		}
	}
}
