package task

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tm/exchange"
)

// What the exactly-once sink keeps in a checkpoint is what it gets back on
// restore: its holder and every batch not yet committed, with each
// record's key, value and time; batches of one checkpoint merge.
func TestKafkaSinkEntryRoundTrip(t *testing.T) {
	s := &kafkaSink{subtask: 3, job: "j7", exactly: true}
	recs := []abi.Record{{Key: []byte("k"), HasKey: true, Value: []byte("v1"), Time: 42, HasTime: true}, {Value: []byte("v2")}}
	s.cur = [][]byte{abi.AppendBatch(nil, recs[:1]), abi.AppendBatch(nil, recs[1:])}
	s.barrier(7)
	s.cur = [][]byte{abi.AppendBatch(nil, recs[1:])}
	enc := s.barrier(8)

	h, err := decodeKafkaSinkEntry(enc)
	if err != nil {
		t.Fatal(err)
	}
	if h.holder != 3 || h.job != "j7" || len(h.batches) != 2 || h.batches[0].id != 7 || h.batches[1].id != 8 || !h.batches[0].ready {
		t.Fatalf("restored holder %d, %d batches %+v; want holder 3, ready batches 7 and 8", h.holder, len(h.batches), h.batches)
	}
	var got []abi.Record
	for _, c := range h.batches[0].chunks {
		got, err = abi.DecodeBatch(got, c)
		if err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(recs) {
		t.Fatalf("batch 7 holds %+v, want %+v", got, recs)
	}
	for _, bad := range [][]byte{enc[:2], enc[:9], enc[:20], enc[:len(enc)-1]} {
		if _, err := decodeKafkaSinkEntry(bad); err == nil {
			t.Fatalf("restore of %d truncated bytes: no error", len(bad))
		}
	}

	// A marker covers its own job's checkpoints only.
	if m := (kafkaMark{id: 5, job: "j7"}); !m.covers("j7", 5) || m.covers("j7", 6) || m.covers("j8", 1) {
		t.Fatalf("marker %+v covers the wrong checkpoints", m)
	}

	merged := appendBatch(appendBatch(nil, &kafkaBatch{id: 8, chunks: [][]byte{{1}}}), &kafkaBatch{id: 5})
	merged = appendBatch(merged, &kafkaBatch{id: 8, chunks: [][]byte{{2}}, ready: true})
	if len(merged) != 2 || merged[0].id != 5 || merged[1].id != 8 || len(merged[1].chunks) != 2 || !merged[1].ready {
		t.Fatalf("merged batches %+v, want 5 then 8 with both chunks", merged)
	}
}

// kafkaSinkTask runs a task whose chain is a kafka sink fed by one input
// channel, as subtask 0 of 1.
type kafkaSinkTask struct {
	t     *testing.T
	k     *testutil.Kafka
	store blob.Store
	m     *exchange.Manager
	conf  map[string]string
	logs  *logWatch

	run  *started
	ctl  *Control
	acks *fakeAcks
	w    *exchange.ResultWriter
	n    int // runs started, for the result ids
	job  string
	val  string // the values' prefix
}

// newKafkaSinkTask starts a cluster with topic "out" and the other topics
// and configures a sink to "out".
func newKafkaSinkTask(t *testing.T, delivery string, topics ...string) *kafkaSinkTask {
	k := testutil.StartKafka(t, 2, append([]string{"out"}, topics...)...)
	logs := &logWatch{}
	t.Cleanup(func() {
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("the task's log: %q", logs.msgs)
			logs.mu.Unlock()
		}
	})
	return &kafkaSinkTask{t: t, k: k, job: "job1", val: "v", store: openStore(t), m: newManager(t), logs: logs, conf: map[string]string{
		jobgraph.ConfigKafkaBrokers: k.Brokers, jobgraph.ConfigKafkaTopic: "out",
		jobgraph.ConfigKafkaDelivery: delivery, jobgraph.ConfigKafkaTxnPrefix: "tp",
	}}
}

// start runs the task (again), restored from the state of ack (nil: fresh).
func (k *kafkaSinkTask) start(ctx context.Context, ack *checkpoint.Ack) {
	k.n++
	rid := fmt.Sprint("in", k.n)
	spec := Spec{
		ExecutionID: fmt.Sprint("sink-", k.n), JobID: k.job, Tenant: "acme", Parallelism: 1, MaxParallelism: 128,
		Chain:  []jobgraph.Vertex{{ID: 3, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorKafkaSink, Config: k.conf}},
		Inputs: []control.InputSpec{{ResultID: rid, Producers: 1}},
	}
	if ack != nil {
		spec.Restore = &checkpoint.TaskRestore{CheckpointID: ack.CheckpointID, States: []checkpoint.StateHandle{*ack.State}}
	}
	k.ctl, k.acks = NewControl(), &fakeAcks{}
	k.logs.mu.Lock()
	k.logs.msgs = nil // what this run logs
	k.logs.mu.Unlock()
	k.run = start(ctx, spec, Deps{Blob: k.store, Exchange: k.m, Control: k.ctl, Checkpoints: k.acks, Logger: slog.New(k.logs)})
	k.w = writer(k.t, k.m, rid, 0, 1, jobgraph.Forward)
}

// write sends records "v<from>".."v<to-1>", keyed and timed.
func (k *kafkaSinkTask) write(ctx context.Context, from, to int) {
	var recs []abi.Record
	for i := from; i < to; i++ {
		recs = append(recs, abi.Record{Key: fmt.Appendf(nil, "k%d", i%5), HasKey: true, Value: fmt.Appendf(nil, "%s%d", k.val, i), Time: int64(1000 + i), HasTime: true})
	}
	must(k.t, k.w.Write(ctx, recs))
}

// checkpoint takes checkpoint id and returns its ack.
func (k *kafkaSinkTask) checkpoint(ctx context.Context, id int64) checkpoint.Ack {
	must(k.t, k.w.EmitBarrier(ctx, id))
	testutil.CheckFor(k.t, 20*time.Second, 5*time.Millisecond, func() error {
		select {
		case <-k.run.done:
			k.t.Fatalf("the task ended before checkpoint %d: %v", id, k.run.err)
		default:
		}
		return k.acks.acked(id)
	})
	a, _ := k.acks.ack(id)
	return a
}

// kafkaRead returns the values in topic out that a consumer of the
// isolation level sees, once it has seen at least want of them (and what
// one more poll brings), sorted; each must have its record's key and time.
func kafkaRead(t *testing.T, k *testutil.Kafka, committed bool, want int) []string {
	t.Helper()
	var got []string
	for _, r := range k.Read(t, "out", committed, want) {
		got = append(got, string(r.Value))
		if r.Timestamp.UnixMilli() < 1000 || len(r.Key) == 0 {
			t.Errorf("record %q: key %q time %v, want the record's own", r.Value, r.Key, r.Timestamp)
		}
	}
	sort.Strings(got)
	return got
}

func values(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint("v", i))
	}
	sort.Strings(out)
	return out
}

func exactlyOnce(t *testing.T, got []string, n int) {
	t.Helper()
	if want := values(0, n); !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %d records, want v0..v%d once each:\n got %q", len(got), n-1, got)
	}
}

// Exactly once: nothing reaches the topic before the checkpoint completes
// (not even uncommitted); then a read_committed consumer sees the
// checkpoint's records, and at the end of input the rest, each once.
func TestKafkaSinkTwoPhaseCommit(t *testing.T) {
	ctx := context.Background()
	k := newKafkaSinkTask(t, jobgraph.DeliveryExactlyOnce)
	k.start(ctx, nil)
	k.write(ctx, 0, 100)
	k.checkpoint(ctx, 1)
	k.write(ctx, 100, 120)
	if n := k.k.EndOffsets(t, "out", false); n != 0 {
		t.Fatalf("%d records produced before checkpoint 1 completed, want none", n)
	}
	must(t, k.ctl.Notify(1, true))
	if got := kafkaRead(t, k.k, true, 100); !slices.Equal(got, values(0, 100)) {
		t.Fatalf("after checkpoint 1: %q, want v0..v99", got)
	}
	k.write(ctx, 120, 150)
	must(t, k.w.Finish(ctx))
	k.run.wait(t)
	exactlyOnce(t, kafkaRead(t, k.k, true, 150), 150)
}

// The task fails after a checkpoint completed: before the sink committed
// it, after it committed it (the batch is still in the restored state),
// and with a transaction of the failed attempt left open. The restored
// task commits what is missing, drops what was committed, aborts the open
// transaction: each record once.
func TestKafkaSinkExactlyOnceAcrossFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed bool // checkpoint 1 committed before the failure
		lingering bool // a transaction of the failed attempt is open
	}{
		{"failed before the commit", false, false},
		{"failed after the commit", true, false},
		{"failed mid-transaction", false, true},
		{"failed mid-transaction after a commit", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			k := newKafkaSinkTask(t, jobgraph.DeliveryExactlyOnce)
			actx, kill := context.WithCancel(ctx)
			k.start(actx, nil)
			k.write(ctx, 0, 100)
			ack := k.checkpoint(ctx, 1)
			k.write(ctx, 100, 130) // after the barrier: replayed by the source
			if tc.committed {
				must(t, k.ctl.Notify(1, true))
				kafkaRead(t, k.k, true, 100)
			}
			kill()
			if err := k.run.failed(); !errors.Is(err, context.Canceled) {
				t.Fatalf("killed task: %v", err)
			}
			if tc.lingering {
				z, err := kgo.NewClient(kgo.SeedBrokers(k.k.Brokers), kgo.TransactionalID("tp-0"))
				if err != nil {
					t.Fatal(err)
				}
				defer z.Close()
				must(t, z.BeginTransaction())
				for _, v := range []string{"v0", "v100", "zombie"} {
					must(t, z.ProduceSync(ctx, &kgo.Record{Topic: "out", Key: []byte("z"), Value: []byte(v), Timestamp: time.UnixMilli(5000)}).FirstErr())
				}
			}

			// Restored from checkpoint 1, which completed: its records
			// are committed once, without another notification.
			k.start(ctx, &ack)
			k.write(ctx, 100, 150)
			k.checkpoint(ctx, 2)
			must(t, k.ctl.Notify(2, true))
			k.write(ctx, 150, 160)
			must(t, k.w.Finish(ctx))
			k.run.wait(t)
			exactlyOnce(t, kafkaRead(t, k.k, true, 160), 160)
		})
	}
}

// The broker goes away while a completed checkpoint waits to be committed
// and comes back on its data dir: the sink retries, and commits each
// record once. An earlier job used the same prefix and got further in its
// checkpoints: its marker must not pass for this job's.
func TestKafkaSinkAcrossABrokerRestart(t *testing.T) {
	ctx := context.Background()
	k := newKafkaSinkTask(t, jobgraph.DeliveryExactlyOnce)
	k.job, k.val = "job0", "old"
	k.start(ctx, nil)
	for id := range int64(5) {
		k.write(ctx, 0, 1)
		k.checkpoint(ctx, id+1)
	}
	must(t, k.ctl.Notify(5, true))
	must(t, k.w.Finish(ctx))
	k.run.wait(t)
	k.job, k.val = "job1", "v"
	txnOf := func() string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.k.Brokers))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ds, err := kadm.NewClient(cl).DescribeTransactions(ctx, "tp-0")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ds["tp-0"].ProducerID, ds["tp-0"].ProducerEpoch)
	}
	job0 := txnOf()

	k.start(ctx, nil)
	// The sink's recovery initialised the transactional id: the failure
	// below is a commit's.
	testutil.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if txnOf() == job0 {
			return errors.New("the sink has not initialised tp-0 yet")
		}
		return nil
	})
	k.write(ctx, 0, 100)
	k.checkpoint(ctx, 1)
	k.k.Stop()
	must(t, k.ctl.Notify(1, true))
	testutil.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if !k.logs.saw("kafka sink: commit failed; retrying") {
			return errors.New("the sink has not failed to commit yet")
		}
		return nil
	})
	k.write(ctx, 100, 200)
	k.k.Start()
	k.checkpoint(ctx, 2)
	must(t, k.ctl.Notify(2, true))
	k.write(ctx, 200, 250)
	must(t, k.w.Finish(ctx))
	k.run.wait(t)
	got := slices.DeleteFunc(kafkaRead(t, k.k, true, 255), func(v string) bool { return strings.HasPrefix(v, "old") })
	exactlyOnce(t, got, 250)
}

// A record's headers become the Kafka record's, except the topic header,
// which routes the record to the topic it names; a record routed to a
// topic that does not exist, or that Kafka would refuse, fails the task
// with an error that names the topic, before anything of it is held.
func TestKafkaSinkHeadersAndTopicPerRecord(t *testing.T) {
	ctx := context.Background()
	for _, delivery := range []string{jobgraph.DeliveryExactlyOnce, jobgraph.DeliveryAtLeastOnce} {
		t.Run(delivery, func(t *testing.T) {
			k := newKafkaSinkTask(t, delivery, "odd")
			k.conf[jobgraph.ConfigKafkaTopicHeader] = "route"
			k.start(ctx, nil)
			var recs []abi.Record
			for i := range 10 {
				r := abi.Record{Value: fmt.Appendf(nil, "v%d", i), Headers: []abi.Header{{Key: []byte("n"), Value: fmt.Appendf(nil, "%d", i)}, {Key: []byte("n"), Value: []byte("again")}}}
				if i%2 == 1 {
					r.Headers = append(r.Headers, abi.Header{Key: []byte("route"), Value: []byte("odd")})
				}
				recs = append(recs, r)
			}
			must(t, k.w.Write(ctx, recs))
			k.checkpoint(ctx, 1)
			must(t, k.ctl.Notify(1, true))
			for topic, want := range map[string][]string{"out": {"v0", "v2", "v4", "v6", "v8"}, "odd": {"v1", "v3", "v5", "v7", "v9"}} {
				var got []string
				for _, r := range k.k.Read(t, topic, true, len(want)) {
					got = append(got, string(r.Value))
					if len(r.Headers) != 2 || r.Headers[0].Key != "n" || string(r.Headers[0].Value) != string(r.Value[1:]) || string(r.Headers[1].Value) != "again" {
						t.Errorf("%s: record %q has headers %v, want n=%s and n=again, in order, without route", topic, r.Value, r.Headers, r.Value[1:])
					}
				}
				if sort.Strings(got); !slices.Equal(got, want) {
					t.Errorf("topic %s holds %q, want %q", topic, got, want)
				}
			}

			for route, why := range map[string]string{"nope": `names topic "nope", which does not exist`, "a/b": `names topic "a/b", which has '/'`} {
				k.write(ctx, 100, 101)
				must(t, k.w.Write(ctx, []abi.Record{{Value: []byte("lost?"), Headers: []abi.Header{{Key: []byte("route"), Value: []byte(route)}}}}))
				err := k.run.failed()
				if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "topic-header") {
					t.Fatalf("routed to %q: the task ended with %v, want an error saying it %s", route, err, why)
				}
				k.start(ctx, nil)
			}
			must(t, k.w.Finish(ctx))
			k.run.wait(t)
		})
	}
}

// At least once: a barrier waits until the broker stored every record
// before it; after a failure the replayed records may come twice, none is
// missing.
func TestKafkaSinkAtLeastOnce(t *testing.T) {
	ctx := context.Background()
	k := newKafkaSinkTask(t, jobgraph.DeliveryAtLeastOnce)
	actx, kill := context.WithCancel(ctx)
	k.start(actx, nil)
	k.write(ctx, 0, 100)
	k.checkpoint(ctx, 1)
	if n := k.k.EndOffsets(t, "out", false); n < 100 {
		t.Fatalf("%d records stored when checkpoint 1 was acknowledged, want all 100", n)
	}
	k.write(ctx, 100, 130)
	kill()
	k.run.failed()
	k.start(ctx, nil)
	k.write(ctx, 100, 150)
	must(t, k.w.Finish(ctx))
	k.run.wait(t)
	got := slices.Compact(kafkaRead(t, k.k, false, 150))
	if want := values(0, 150); !slices.Equal(got, want) {
		t.Fatalf("the topic holds %q, want each of v0..v149 at least once", got)
	}
}

// The broker stays away: the sink gives up after kafkaGiveUp and the task
// fails (at its next barrier), saying so, so the restart strategy applies.
func TestKafkaSinkFailsTheTaskWhenTheBrokerStaysAway(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the sink to give up, over 30 s")
	}
	ctx := context.Background()
	k := newKafkaSinkTask(t, jobgraph.DeliveryExactlyOnce)
	k.start(ctx, nil)
	k.write(ctx, 0, 10)
	k.checkpoint(ctx, 1)
	k.k.Stop()
	must(t, k.ctl.Notify(1, true))
	var err error
	next := int64(2)
	testutil.CheckFor(t, 2*kafkaGiveUp, 100*time.Millisecond, func() error {
		select {
		case <-k.run.done:
			err = k.run.err
			return nil
		default:
		}
		// A barrier now and then, as the coordinator sends them.
		_ = k.w.EmitBarrier(ctx, next)
		next++
		return errors.New("the task still runs")
	})
	if err == nil || !strings.Contains(err.Error(), "kafka sink: committing to \"out\"") || !strings.Contains(err.Error(), "check that Kafka runs") {
		t.Fatalf("task ended with %v, want the sink's give-up", err)
	}
}
