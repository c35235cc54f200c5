package testutil

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Kafka is franz-go's in-process test broker (kfake: a test broker, not a
// production one) on a loopback port with its data in a t.TempDir(). Stop
// and Start close it and open it again on the same port and data dir, so
// a test can take it away for a while; the test's cleanup closes it.
type Kafka struct {
	Brokers string // host:port
	DataDir string

	t      testing.TB
	port   int
	topics []string
	parts  int32

	mu sync.Mutex
	c  *kfake.Cluster
}

// StartKafka starts a one-broker kfake cluster with topics, each of
// partitions partitions, created.
func StartKafka(t testing.TB, partitions int32, topics ...string) *Kafka {
	t.Helper()
	k := &Kafka{DataDir: t.TempDir(), t: t, topics: topics, parts: partitions}
	t.Cleanup(k.Stop)
	k.Start()
	return k
}

// Start opens the cluster (again), on the same port and data dir.
func (k *Kafka) Start() {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		return
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(k.DataDir), kfake.SeedTopics(k.parts, k.topics...)}
	if k.port != 0 {
		opts = append(opts, kfake.Ports(k.port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		k.t.Fatalf("kfake: %v", err)
	}
	k.c = c
	k.Brokers = c.ListenAddrs()[0]
	if k.port == 0 {
		_, p, err := net.SplitHostPort(k.Brokers)
		if err == nil {
			k.port, err = strconv.Atoi(p)
		}
		if err != nil {
			k.t.Fatalf("kfake address %q: %v", k.Brokers, err)
		}
	}
}

// Stop closes the cluster (its data dir stays); a stopped cluster's Stop
// does nothing.
func (k *Kafka) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// KafkaBase is the time of the record Produce numbers 0.
const KafkaBase = 1_700_000_000_000

// Produce writes records from to to-1 of topic, record i with key "k<i>",
// value "v<i>" and time KafkaBase+i ms, spread over the partitions by key,
// or all to partition when it is not negative; it fails t when the broker
// does not take them.
func (k *Kafka) Produce(t testing.TB, topic string, partition int32, from, to int) kgo.ProduceResults {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers)}
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: max(partition, 0), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Timestamp: time.UnixMilli(KafkaBase + int64(i))})
	}
	res := cl.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	return res
}

// KafkaSplits are the splits of partitions 0 to n-1 of topic, as the
// JobManager lists them for a kafka source.
func KafkaSplits(topic string, n int32) []checkpoint.Split {
	var out []checkpoint.Split
	for p := range n {
		out = append(out, checkpoint.Split{Key: jobgraph.KafkaSplitKey(topic, p)})
	}
	return out
}

// Read consumes topic from its start, read_committed when committed, until
// it has seen at least want records (for up to three minutes), then polls
// once more for any beyond them, and returns them all.
func (k *Kafka) Read(t testing.TB, topic string, committed bool, want int) []*kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	poll := func(d time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	CheckFor(t, 3*time.Minute, 0, func() error {
		poll(time.Second)
		if len(got) < want {
			return fmt.Errorf("%d records in %s, want %d", len(got), topic, want)
		}
		return nil
	})
	poll(500 * time.Millisecond)
	return got
}

// EndOffsets sums the end offsets of topic's partitions: the high
// watermarks (every record produced, committed or not), or with committed
// the last stable offsets (what read_committed can read, transaction
// markers included). 0 while the broker does not answer.
func (k *Kafka) EndOffsets(t testing.TB, topic string, committed bool) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := list(ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
