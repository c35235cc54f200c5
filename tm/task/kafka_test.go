package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/kafkaconn"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/watermark"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

// produced is one record the test wrote, or read.
type produced struct {
	key, value string
	time       int64
	partition  int32
	offset     int64
}

// produce writes records from to to-1 of topic (testutil's Kafka.Produce)
// and returns what the test expects to read.
func produce(t *testing.T, k *testutil.Kafka, topic string, from, to int, part int32) []produced {
	t.Helper()
	var out []produced
	for _, r := range k.Produce(t, topic, part, from, to) {
		out = append(out, produced{string(r.Record.Key), string(r.Record.Value), r.Record.Timestamp.UnixMilli(), r.Record.Partition, r.Record.Offset})
	}
	return out
}

// fakePartitions hands out kafka partitions as the JobMaster does: each
// to the subtask that owns it; with follow, it lists the topic again when
// it has none left (the JobMaster's discovery).
type fakePartitions struct {
	mu          sync.Mutex
	left        []checkpoint.Split
	known       map[string]bool
	parallelism int
	follow      *jobgraph.KafkaSettings
	answered    map[int]bool // the subtask heard "none now"
}

func newFakePartitions(parallelism int, splits []checkpoint.Split) *fakePartitions {
	f := &fakePartitions{left: splits, known: map[string]bool{}, parallelism: parallelism, answered: map[int]bool{}}
	for _, s := range splits {
		f.known[s.Key] = true
	}
	return f
}

func (f *fakePartitions) forSubtask(sub int) SplitSource { return subtaskSplits{f, sub} }

type subtaskSplits struct {
	f   *fakePartitions
	sub int
}

func (s subtaskSplits) NextSplit(ctx context.Context) (checkpoint.Split, bool, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.follow != nil {
		parts, err := kafkaconn.Partitions(ctx, *f.follow, "test")
		if err != nil {
			return checkpoint.Split{}, false, err
		}
		for _, p := range parts {
			if key := jobgraph.KafkaSplitKey(p.Topic, p.Partition); !f.known[key] {
				f.known[key] = true
				f.left = append(f.left, checkpoint.Split{Key: key})
			}
		}
	}
	for i, sp := range f.left {
		topic, p, _ := jobgraph.ParseKafkaSplitKey(sp.Key)
		if jobgraph.KafkaPartitionOwner(topic, p, f.parallelism) == s.sub {
			f.left = slices.Delete(f.left, i, i+1)
			return sp, false, nil
		}
	}
	f.answered[s.sub] = true
	return checkpoint.Split{}, f.follow == nil, nil
}

func (f *fakePartitions) allAnswered() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.answered) < f.parallelism {
		return fmt.Errorf("%d of %d subtasks took their partitions", len(f.answered), f.parallelism)
	}
	return nil
}

// kafkaOut reads what a kafka source's subtasks send to one consumer:
// records and, per producer, where each barrier fell.
type kafkaOut struct {
	mu       sync.Mutex
	recs     [][]produced // per producer
	barriers []map[int64]int
	wms      [][]int64
	idle     []bool // the producer's newest watermark status
	err      error
}

func readKafkaOut(ctx context.Context, t *testing.T, m *exchange.Manager, rid string, producers int) *kafkaOut {
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: rid, Producers: producers}, 0)
	if err != nil {
		t.Fatal(err)
	}
	o := &kafkaOut{recs: make([][]produced, producers), barriers: make([]map[int64]int, producers), wms: make([][]int64, producers), idle: make([]bool, producers)}
	for i := range o.barriers {
		o.barriers[i] = map[int64]int{}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := g.Next(ctx)
			o.mu.Lock()
			if err != nil {
				o.err = err
				o.mu.Unlock()
				return
			}
			switch b.Event.Type {
			case exchange.CheckpointBarrier:
				o.barriers[b.Producer][b.Event.CheckpointID] = len(o.recs[b.Producer])
			case exchange.Watermark:
				o.wms[b.Producer] = append(o.wms[b.Producer], b.Event.Timestamp)
			case exchange.WatermarkStatus:
				o.idle[b.Producer] = b.Event.Idle
			}
			for _, r := range b.Records {
				o.recs[b.Producer] = append(o.recs[b.Producer], produced{key: string(r.Key), value: string(r.Value), time: r.Time})
			}
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() { <-done })
	return o
}

// all returns every record read, and with upto > 0 only those before each
// producer's barrier upto.
func (o *kafkaOut) all(upto int64) []produced {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []produced
	for p, rs := range o.recs {
		n := len(rs)
		if upto > 0 {
			n = o.barriers[p][upto]
		}
		out = append(out, rs[:n]...)
	}
	return out
}

func (o *kafkaOut) count() int { return len(o.all(0)) }

func (o *kafkaOut) watermarks() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Concat(o.wms...)
}

// kafkaTasks are the subtasks of one kafka source writing to one output.
type kafkaTasks struct {
	runs   []*started
	ctls   []*Control
	acks   *fakeAcks
	cancel context.CancelFunc
}

type kafkaSpec struct {
	config   map[string]string
	guest    []jobgraph.Vertex // after the source in its chain
	p        int
	parts    *fakePartitions
	rid      string
	restore  *checkpoint.TaskRestore
	giveUp   time.Duration
	store    blob.Store
	exchange *exchange.Manager
	modules  ModuleSource
	digest   string
	args     []string
}

func startKafka(t *testing.T, s kafkaSpec) *kafkaTasks {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	k := &kafkaTasks{acks: &fakeAcks{}, cancel: cancel}
	t.Cleanup(func() {
		cancel()
		for _, r := range k.runs {
			<-r.done
		}
	})
	for sub := 0; sub < s.p; sub++ {
		ctl := NewControl()
		k.ctls = append(k.ctls, ctl)
		k.runs = append(k.runs, start(ctx, Spec{
			ExecutionID: fmt.Sprintf("%s-%d", s.rid, sub), JobID: "job1", Tenant: "acme", ModuleDigest: s.digest, Args: s.args,
			Chain:   append([]jobgraph.Vertex{{ID: 1000, Name: "in", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorKafkaSource, Config: s.config}}, s.guest...),
			Subtask: sub, Parallelism: s.p, MaxParallelism: 128,
			Outputs: []control.OutputSpec{{ResultID: s.rid, Partitioner: jobgraph.Rebalance, Targets: []string{s.exchange.Addr()}}},
			Restore: s.restore,
		}, Deps{Exchange: s.exchange, Blob: s.store, Splits: s.parts.forSubtask(sub), Control: ctl, Checkpoints: k.acks, KafkaGiveUp: s.giveUp, Modules: s.modules}))
	}
	return k
}

// checkpoint triggers checkpoint id at every subtask and waits for their
// acks, then notifies its completion.
func (k *kafkaTasks) checkpoint(t *testing.T, id int64) []checkpoint.Ack {
	t.Helper()
	for _, c := range k.ctls {
		must(t, c.Trigger(checkpoint.Trigger{ID: id}))
	}
	var acks []checkpoint.Ack
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		acks = acks[:0]
		k.acks.mu.Lock()
		defer k.acks.mu.Unlock()
		for _, a := range k.acks.acks {
			if a.CheckpointID == id {
				acks = append(acks, a)
			}
		}
		if len(k.acks.declines) > 0 {
			return fmt.Errorf("declined: %+v", k.acks.declines)
		}
		if len(acks) < len(k.ctls) {
			return fmt.Errorf("%d of %d acks of checkpoint %d", len(acks), len(k.ctls), id)
		}
		return nil
	})
	for _, c := range k.ctls {
		must(t, c.Notify(id, true))
	}
	return acks
}

// failure returns the first subtask's error once one ended.
func (k *kafkaTasks) failure() error {
	for _, r := range k.runs {
		select {
		case <-r.done:
			if r.err == nil {
				return errors.New("a kafka source task finished")
			}
			return r.err
		default:
		}
	}
	return nil
}

// restoreOf is what the JobMaster restores the subtasks from after the
// checkpoint acks acknowledge: their states, and the partitions of base
// no subtask took before it.
func restoreOf(acks []checkpoint.Ack, base []checkpoint.Split) (*checkpoint.TaskRestore, []checkpoint.Split) {
	r := &checkpoint.TaskRestore{CheckpointID: acks[0].CheckpointID}
	var positions []checkpoint.SourcePosition
	for _, a := range acks {
		r.States = append(r.States, *a.State)
		positions = append(positions, *a.Source)
	}
	return r, checkpoint.RemainingSplits(base, positions)
}

// sameRecords says whether got holds each of want exactly once, with its
// key, value and time, and nothing else.
func sameRecords(got, want []produced) error {
	seen := map[string]produced{}
	for _, g := range got {
		if _, dup := seen[g.value]; dup {
			return fmt.Errorf("%s read twice", g.value)
		}
		seen[g.value] = g
	}
	for _, w := range want {
		g, ok := seen[w.value]
		if !ok {
			return fmt.Errorf("%s (%s/%d@%d) not read; read %d of %d", w.value, w.key, w.partition, w.offset, len(got), len(want))
		}
		if g.key != w.key || g.time != w.time {
			return fmt.Errorf("%s read as key %q time %d, want %q %d", w.value, g.key, g.time, w.key, w.time)
		}
		delete(seen, w.value)
	}
	for v := range seen {
		return fmt.Errorf("%s read but not wanted (%d extra)", v, len(seen))
	}
	return nil
}

func waitCount(t *testing.T, o *kafkaOut, k *kafkaTasks, n int) {
	t.Helper()
	testutil.CheckFor(t, 2*time.Minute, 10*time.Millisecond, func() error {
		if err := k.failure(); err != nil {
			t.Fatalf("task failed: %v", err)
		}
		if got := o.count(); got < n {
			return fmt.Errorf("%d of %d records read", got, n)
		}
		return nil
	})
}

// A topic of 3 partitions read by 2 subtasks: every record once, with its
// key, value and timestamp, from each start mode.
func TestKafkaSourceStarts(t *testing.T) {
	k := testutil.StartKafka(t, 3, "bids")
	const n = 600
	old := produce(t, k, "bids", 0, n, -1)
	adm := kadmFor(t, k.Brokers)
	// The group has committed offsets on partitions 0 and 1, none on 2.
	commit := kadm.Offsets{}
	commit.AddOffset("bids", 0, 5, -1)
	commit.AddOffset("bids", 1, 7, -1)
	must(t, adm.CommitAllOffsets(context.Background(), "readers", commit))

	for _, tc := range []struct {
		start string
		group string
		want  func(p produced) bool
		more  bool // the records produced after the source took its partitions
	}{
		{"earliest", "", func(produced) bool { return true }, false},
		{fmt.Sprintf("timestamp:%d", testutil.KafkaBase+n/2), "", func(p produced) bool { return p.time >= testutil.KafkaBase+n/2 }, false},
		{"group", "readers", func(p produced) bool {
			return (p.partition == 0 && p.offset >= 5) || (p.partition == 1 && p.offset >= 7) || p.partition == 2
		}, false},
		// Last: it writes more records.
		{"latest", "", func(produced) bool { return false }, true},
	} {
		t.Run(strings.Split(tc.start, ":")[0], func(t *testing.T) {
			cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "start": tc.start, "discovery-interval-ms": "0"}
			if tc.group != "" {
				cfg["group"] = tc.group
			}
			m := newManager(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := readKafkaOut(ctx, t, m, "out", 2)
			parts := newFakePartitions(2, testutil.KafkaSplits("bids", 3))
			tasks := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: parts, rid: "out", exchange: m, store: openStore(t)})
			var want []produced
			for _, p := range old {
				if tc.want(p) {
					want = append(want, p)
				}
			}
			if tc.more {
				// Once both have resolved where they start (a checkpoint
				// after they took their partitions is taken after that).
				testutil.CheckFor(t, time.Minute, 10*time.Millisecond, parts.allAnswered)
				tasks.checkpoint(t, 1)
				want = append(want, produce(t, k, "bids", n, n+50, -1)...)
			}
			waitCount(t, out, tasks, len(want))
			// One checkpoint more: what was read before its barrier is all
			// that was read, so nothing else comes late.
			tasks.checkpoint(t, 2)
			if err := sameRecords(out.all(0), want); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func kadmFor(t *testing.T, brokers string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// A checkpoint mid-stream, then the subtasks die: restored from the
// checkpoint, they read on from its offsets, so what came before its
// barriers and what the restored ones read is every record once. The
// group has the checkpoint's offsets once it completed.
func TestKafkaSourceRestoresItsOffsets(t *testing.T) {
	k := testutil.StartKafka(t, 3, "bids")
	const n = 3000
	all := produce(t, k, "bids", 0, n/2, -1)
	cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "group": "sluice", "discovery-interval-ms": "0"}
	store := openStore(t)
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out1 := readKafkaOut(ctx, t, m, "out1", 2)
	base := testutil.KafkaSplits("bids", 3)
	parts := newFakePartitions(2, slices.Clone(base))
	run1 := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: parts, rid: "out1", exchange: m, store: store})
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if out1.count() == 0 {
			return errors.New("nothing read yet")
		}
		return nil
	})
	acks := run1.checkpoint(t, 1)
	all = append(all, produce(t, k, "bids", n/2, n, -1)...)
	before := out1.all(1)

	// The group gets the checkpoint's offsets: they add up to what was
	// read before the barriers.
	adm := kadmFor(t, k.Brokers)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		offs, err := adm.FetchOffsets(context.Background(), "sluice")
		if err != nil {
			return err
		}
		sum := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != int64(len(before)) {
			return fmt.Errorf("the group's offsets add up to %d, %d records came before the barriers", sum, len(before))
		}
		return nil
	})
	run1.cancel()
	for _, r := range run1.runs {
		<-r.done
	}

	restore, rest := restoreOf(acks, base)
	if len(rest) != 0 {
		t.Fatalf("after the checkpoint the JobMaster still has %v to hand out, want none", rest)
	}
	out2 := readKafkaOut(ctx, t, m, "out2", 2)
	run2 := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: newFakePartitions(2, rest), rid: "out2", exchange: m, store: store, restore: restore})
	waitCount(t, out2, run2, n-len(before))
	run2.checkpoint(t, 2)
	if err := sameRecords(append(before, out2.all(0)...), all); err != nil {
		t.Fatal(err)
	}
}

// Chained to guest code, the source keeps its offsets in the guest's
// state: restored from it, the chain's output is every record once.
func TestKafkaSourceChainedToGuest(t *testing.T) {
	mod := testGuest(t)
	g := plan(t, mod, "upper")
	upper := vertexNamed(t, g, "upper")
	k := testutil.StartKafka(t, 2, "bids")
	const n = 1000
	k.Produce(t, "bids", -1, 0, n/2)
	cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0"}
	store := openStore(t)
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec := kafkaSpec{config: cfg, guest: []jobgraph.Vertex{upper}, p: 2, exchange: m, store: store, modules: oneModule{mod}, digest: mod.Digest(), args: []string{"upper"}}
	base := testutil.KafkaSplits("bids", 2)
	out1 := readKafkaOut(ctx, t, m, "out1", 2)
	spec.rid, spec.parts = "out1", newFakePartitions(2, slices.Clone(base))
	run1 := startKafka(t, spec)
	waitCount(t, out1, run1, n/2)
	acks := run1.checkpoint(t, 1)
	k.Produce(t, "bids", -1, n/2, n)
	before := out1.all(1)
	run1.cancel()
	for _, r := range run1.runs {
		<-r.done
	}
	restore, rest := restoreOf(acks, base)
	out2 := readKafkaOut(ctx, t, m, "out2", 2)
	spec.rid, spec.parts, spec.restore = "out2", newFakePartitions(2, rest), restore
	run2 := startKafka(t, spec)
	waitCount(t, out2, run2, n-len(before))
	run2.checkpoint(t, 2)
	seen := map[string]int{}
	for _, r := range append(before, out2.all(0)...) {
		seen[r.value]++
	}
	for i := range n {
		if v := fmt.Sprintf("V%d", i); seen[v] != 1 {
			t.Fatalf("%s emitted %d times, want once", v, seen[v])
		}
	}
	if len(seen) != n {
		t.Fatalf("%d values emitted, want %d", len(seen), n)
	}
}

// A partition added while the job runs is found and read.
func TestKafkaSourceReadsAnAddedPartition(t *testing.T) {
	k := testutil.StartKafka(t, 2, "bids")
	want := produce(t, k, "bids", 0, 100, -1)
	cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "50"}
	set, err := (&jobgraph.Vertex{Connector: jobgraph.ConnectorKafkaSource, Config: cfg}).Kafka()
	must(t, err)
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := readKafkaOut(ctx, t, m, "out", 2)
	parts := newFakePartitions(2, testutil.KafkaSplits("bids", 2))
	parts.follow = &set
	tasks := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: parts, rid: "out", exchange: m, store: openStore(t)})
	waitCount(t, out, tasks, len(want))

	adm := kadmFor(t, k.Brokers)
	if _, err := adm.CreatePartitions(context.Background(), 1, "bids"); err != nil {
		t.Fatal(err)
	}
	want = append(want, produce(t, k, "bids", 100, 150, 2)...)
	waitCount(t, out, tasks, len(want))
	tasks.checkpoint(t, 1)
	if err := sameRecords(out.all(0), want); err != nil {
		t.Fatal(err)
	}
}

// Each partition is a watermark split: the source's watermark is the
// minimum over its partitions, a partition without records holds it back,
// and with watermark.idle-timeout it stops doing so once idle.
func TestKafkaSourcePartitionWatermarks(t *testing.T) {
	setup := func(t *testing.T, idle bool) (*testutil.Kafka, *kafkaOut, *kafkaTasks) {
		k := testutil.StartKafka(t, 3, "bids")
		produce(t, k, "bids", 0, 10, 0)    // times base+0..9
		produce(t, k, "bids", 500, 510, 1) // base+500..509
		cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0",
			jobgraph.ConfigWatermark: "bounded", jobgraph.ConfigWatermarkMaxOutOfOrderness: "0s", jobgraph.ConfigWatermarkInterval: "10ms"}
		if idle {
			cfg[jobgraph.ConfigWatermarkIdleTimeout] = "300ms"
		}
		m := newManager(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		out := readKafkaOut(ctx, t, m, "out", 1)
		tasks := startKafka(t, kafkaSpec{config: cfg, p: 1, parts: newFakePartitions(1, testutil.KafkaSplits("bids", 3)), rid: "out", exchange: m, store: openStore(t)})
		waitCount(t, out, tasks, 20)
		return k, out, tasks
	}
	reaches := func(t *testing.T, out *kafkaOut, want int64) {
		t.Helper()
		testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
			if wms := out.watermarks(); len(wms) == 0 || slices.Max(wms) != want {
				return fmt.Errorf("watermarks %v, want them to reach %d", wms, want)
			}
			return nil
		})
		for _, wm := range out.watermarks() {
			if wm > want {
				t.Fatalf("watermark %d passed %d", wm, want)
			}
		}
	}

	t.Run("held back", func(t *testing.T) {
		k, out, tasks := setup(t, false)
		// A checkpoint's barrier follows what the source sent so far; no
		// watermark may pass what partition 2 holds back.
		tasks.checkpoint(t, 1)
		if wms := out.watermarks(); len(wms) != 0 {
			t.Fatalf("watermarks %v while partition 2 has no record, want none", wms)
		}
		produce(t, k, "bids", 100, 101, 2) // base+100
		waitCount(t, out, tasks, 21)
		reaches(t, out, testutil.KafkaBase+9-1) // partition 0 is the slowest
		produce(t, k, "bids", 1000, 1001, 0)
		reaches(t, out, testutil.KafkaBase+100-1) // now partition 2 is
	})

	t.Run("idle", func(t *testing.T) {
		k, out, _ := setup(t, true)
		// Partitions 0 and 1 stay active; partition 2 never has a record
		// and goes idle, so the watermark follows the slower of 0 and 1.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := 10; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				produce(t, k, "bids", i, i+1, 0)
				produce(t, k, "bids", 500+i, 501+i, 1)
			}
		}()
		testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
			if len(out.watermarks()) == 0 {
				return errors.New("no watermark yet: partition 2 holds it back")
			}
			return nil
		})
		close(stop)
		<-done
		var newest0 int64
		for _, r := range out.all(0) {
			if r.time < testutil.KafkaBase+500 {
				newest0 = max(newest0, r.time)
			}
		}
		for _, wm := range out.watermarks() {
			if wm >= newest0 || wm == watermark.Max {
				t.Fatalf("watermark %d passed partition 0's newest record %d", wm, newest0)
			}
		}
	})
}

// More subtasks than partitions: the subtask that owns none is idle, so
// it holds no consumer's watermark back, and the one that owns the
// partition sends its watermarks.
func TestKafkaSourceSubtaskWithoutPartitionsIsIdle(t *testing.T) {
	k := testutil.StartKafka(t, 1, "bids")
	produce(t, k, "bids", 0, 10, -1)
	cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0",
		jobgraph.ConfigWatermark: "monotonous", jobgraph.ConfigWatermarkInterval: "10ms"}
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := readKafkaOut(ctx, t, m, "out", 2)
	tasks := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: newFakePartitions(2, testutil.KafkaSplits("bids", 1)), rid: "out", exchange: m, store: openStore(t)})
	waitCount(t, out, tasks, 10)
	owner := jobgraph.KafkaPartitionOwner("bids", 0, 2)
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		out.mu.Lock()
		defer out.mu.Unlock()
		if !out.idle[1-owner] {
			return fmt.Errorf("subtask %d owns no partition and is not idle", 1-owner)
		}
		if out.idle[owner] || len(out.wms[owner]) == 0 || slices.Max(out.wms[owner]) != testutil.KafkaBase+9-1 {
			return fmt.Errorf("subtask %d: idle %v, watermarks %v, want it active at %d", owner, out.idle[owner], out.wms[owner], testutil.KafkaBase+9-1)
		}
		return nil
	})
}

// The broker goes away: the source fails after its give-up time with an
// error that says so; restored from its checkpoint once the broker is
// back, it reads on, and the output is every record once.
func TestKafkaSourceBrokerDown(t *testing.T) {
	k := testutil.StartKafka(t, 3, "bids")
	all := produce(t, k, "bids", 0, 500, -1)
	cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0"}
	store := openStore(t)
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out1 := readKafkaOut(ctx, t, m, "out1", 2)
	base := testutil.KafkaSplits("bids", 3)
	run1 := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: newFakePartitions(2, slices.Clone(base)), rid: "out1", exchange: m, store: store, giveUp: 3 * time.Second})
	waitCount(t, out1, run1, len(all))
	acks := run1.checkpoint(t, 1)
	before := out1.all(1)

	k.Stop()
	for _, r := range run1.runs {
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatal("the source did not fail with its broker gone")
		}
		if r.err == nil || !strings.Contains(r.err.Error(), "no broker at "+k.Brokers+" answered") {
			t.Fatalf("failure %v, want it to say no broker answered", r.err)
		}
	}
	k.Start()
	all = append(all, produce(t, k, "bids", 500, 800, -1)...)

	restore, rest := restoreOf(acks, base)
	out2 := readKafkaOut(ctx, t, m, "out2", 2)
	run2 := startKafka(t, kafkaSpec{config: cfg, p: 2, parts: newFakePartitions(2, rest), rid: "out2", exchange: m, store: store, restore: restore})
	waitCount(t, out2, run2, len(all)-len(before))
	run2.checkpoint(t, 2)
	if err := sameRecords(append(before, out2.all(0)...), all); err != nil {
		t.Fatal(err)
	}
}

// What a source keeps in a checkpoint is what it gets back; a truncated
// entry is an error, and so is another parallelism.
func TestKafkaEntryRoundTrip(t *testing.T) {
	parts := []*kafkaPart{{topic: "bids", p: 0, next: 17}, {topic: "asks.eu", p: 12, next: -1}}
	tk := &task{spec: Spec{Subtask: 1, Parallelism: 3, Chain: []jobgraph.Vertex{{ID: 4}}}, kafka: &kafkaSource{parts: map[string]*kafkaPart{}}}
	for _, p := range parts {
		tk.kafka.parts[p.key()] = p
	}
	st := wasmhost.NewState(128, 0, 127)
	tk.snapshotKafka(st, 1)
	entries := st.TakeHostEntries(4, kafkaSourceEntry)
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	got, par, err := decodeKafkaEntry(entries[0])
	if err != nil || par != 3 || len(got) != 2 {
		t.Fatalf("decoded %v parallelism %d: %v", got, par, err)
	}
	slices.SortFunc(got, func(a, b *kafkaPart) int { return strings.Compare(a.topic, b.topic) })
	if *got[0] != *parts[1] || *got[1] != *parts[0] {
		t.Fatalf("decoded %+v %+v, want %+v %+v", *got[0], *got[1], *parts[1], *parts[0])
	}
	for _, n := range []int{0, 7, len(entries[0]) - 1} {
		if _, _, err := decodeKafkaEntry(entries[0][:n]); err == nil {
			t.Fatalf("%d of %d bytes decoded", n, len(entries[0]))
		}
	}
}

// read_committed (the default) reads the records of committed
// transactions only; read_uncommitted reads the aborted ones too.
func TestKafkaSourceIsolation(t *testing.T) {
	k := testutil.StartKafka(t, 1, "bids")
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers), kgo.TransactionalID("writer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	must(t, err)
	defer cl.Close()
	ctx := context.Background()
	txn := func(value string, end kgo.TransactionEndTry) {
		t.Helper()
		must(t, cl.BeginTransaction())
		must(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "bids", Key: []byte("k"), Value: []byte(value), Timestamp: time.UnixMilli(testutil.KafkaBase)}).FirstErr())
		must(t, cl.EndTransaction(ctx, end))
	}
	txn("aborted", kgo.TryAbort)
	txn("committed", kgo.TryCommit)
	for _, tc := range []struct {
		isolation string
		want      []string
	}{{"read_committed", []string{"committed"}}, {"read_uncommitted", []string{"aborted", "committed"}}} {
		t.Run(tc.isolation, func(t *testing.T) {
			cfg := map[string]string{"brokers": k.Brokers, "topics": "bids", "discovery-interval-ms": "0"}
			if tc.isolation != "read_committed" {
				cfg["isolation"] = tc.isolation // else the default
			}
			m := newManager(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := readKafkaOut(ctx, t, m, "out", 1)
			tasks := startKafka(t, kafkaSpec{config: cfg, p: 1, parts: newFakePartitions(1, testutil.KafkaSplits("bids", 1)), rid: "out", exchange: m, store: openStore(t)})
			waitCount(t, out, tasks, len(tc.want))
			tasks.checkpoint(t, 1)
			var got []string
			for _, r := range out.all(0) {
				got = append(got, r.value)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("read %q, want %q", got, tc.want)
			}
		})
	}
}
