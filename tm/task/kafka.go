package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/kafkaconn"
	"github.com/sluicehq/sluice/wasmhost"
)

// The Kafka source (as Flink's KafkaSource)
//
// The JobMaster hands each partition, as a split (jobgraph.KafkaSplitKey),
// to the subtask that owns it, at deploy and as its discovery finds more.
// The subtask reads its partitions with one franz-go client, from the
// offsets its restored state holds, otherwise from where the source's
// start says (resolved when the partition is taken, so a checkpoint never
// holds a "latest" that would move). The next offset of every partition
// is the source's position: a host entry in the task's state at each
// barrier. After a checkpoint completes its offsets are committed to the
// consumer group, when one is configured, as a courtesy for tools that
// show lag: they are read back only by start "group" without a
// checkpoint. Each partition is a watermark split.
//
//	JobMaster ──split "topic/p"──▶ resolve the start offset ─▶ consume from it
//	barrier N ─▶ host entry {topic/p: next offset} ─▶ N completes ─▶ commit to the group
const (
	kafkaSourceEntry = "kafka-source-"
	// kafkaPollWait bounds one poll of the client: commands are served
	// between polls.
	kafkaPollWait = 100 * time.Millisecond
	// DefaultKafkaGiveUp is how long a kafka source goes on without an
	// answer from any broker before it fails the task, so the job's
	// restart strategy applies (Deps.KafkaGiveUp).
	DefaultKafkaGiveUp = 30 * time.Second
	// kafkaPingEvery is how often a source that receives nothing asks a
	// broker whether it is there.
	kafkaPingEvery = 2 * time.Second
	// kafkaRelistEvery is how often the offsets of a partition the
	// brokers did not list are asked for again.
	kafkaRelistEvery = 500 * time.Millisecond
	// kafkaAdminTimeout bounds one offset listing or group commit.
	kafkaAdminTimeout = 10 * time.Second
)

// kafkaPart is one partition a subtask reads.
type kafkaPart struct {
	topic string
	p     int32
	next  int64 // the next offset to hand on; -1: resolve from the start
}

func (p *kafkaPart) key() string { return jobgraph.KafkaSplitKey(p.topic, p.p) }

// kafkaSnap is the offsets one checkpoint holds, for the group commit.
type kafkaSnap struct {
	id   int64
	offs map[string]map[int32]int64
}

// kafkaSource is a task's Kafka source. The task's goroutine owns it.
type kafkaSource struct {
	set    jobgraph.KafkaSettings
	giveUp time.Duration
	cl     *kgo.Client
	adm    *kadm.Client

	parts map[string]*kafkaPart // by split key
	// taken are the IDs of the splits this subtask took from the JobMaster
	// since it started: the position the coordinator subtracts from what
	// it has not handed out.
	taken []string
	done  bool      // the JobMaster hands out no more partitions
	ask   time.Time // when to ask the JobMaster for partitions again

	snaps     []kafkaSnap // checkpoints not yet committed to the group
	committed int64

	// retry is when to list the offsets of partitions the brokers did not
	// list yet again; unlistedSince when that began.
	retry         time.Time
	unlistedSince time.Time

	lastOK   time.Time // records arrived or a broker answered
	lastPing time.Time
	lastErr  error
}

func (t *task) newKafkaSource(v jobgraph.Vertex) error {
	set, err := v.Kafka()
	if err != nil {
		return fmt.Errorf("vertex %d (%s): %w", v.ID, v.Name, err)
	}
	giveUp := t.deps.KafkaGiveUp
	if giveUp <= 0 {
		giveUp = DefaultKafkaGiveUp
	}
	t.kafka = &kafkaSource{set: set, giveUp: giveUp, parts: map[string]*kafkaPart{}}
	return nil
}

// runKafka reads the partitions the JobMaster hands the subtask: each
// record's key, value and timestamp (ms) become the record's. It never
// ends by itself.
func (t *task) runKafka(ctx context.Context) error {
	k := t.kafka
	iso := kgo.ReadCommitted()
	if !k.set.ReadCommitted {
		iso = kgo.ReadUncommitted()
	}
	cl, err := kgo.NewClient(append(kafkaconn.Options(k.set, "sluice-"+t.spec.ExecutionID),
		kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(kafkaPollWait),
		// An offset the broker no longer has (retention): from the start.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return fmt.Errorf("task %s: kafka source: %w", t.spec.ExecutionID, kafkaconn.Redact(err, k.set))
	}
	defer cl.Close()
	k.cl, k.adm = cl, kadm.NewClient(cl)
	k.lastOK = time.Now()

	var recs []abi.Record
	flush := t.recordFlush(ctx, &recs)
	src := &source{flush: flush, position: k.position}
	// What the restore holds is read first; unresolved ones are resolved
	// with those the JobMaster hands out now.
	var fresh []*kafkaPart
	for _, p := range k.parts {
		fresh = append(fresh, p)
	}
	for {
		if err := t.serveControl(ctx, src); err != nil {
			return err
		}
		if !k.done && !time.Now().Before(k.ask) {
			got, err := t.takePartitions(ctx, src)
			if err != nil {
				return err
			}
			fresh = append(fresh, got...)
		}
		if len(fresh) > 0 && !time.Now().Before(k.retry) {
			if fresh, err = t.consumeFrom(ctx, fresh); err != nil {
				return err
			}
		}
		t.commitCompleted(ctx)

		waited := t.met.waitStart()
		pctx, cancel := context.WithTimeout(ctx, kafkaPollWait)
		fs := cl.PollFetches(pctx)
		cancel()
		t.met.idleSince(waited)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				k.lastErr = fmt.Errorf("%s/%d: %w", topic, p, err)
			}
		})
		got := false
		var ferr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if ferr != nil || len(fp.Records) == 0 {
				return
			}
			part := k.parts[jobgraph.KafkaSplitKey(fp.Topic, fp.Partition)]
			if part == nil {
				return // not ours (any more)
			}
			got = true
			if t.et.splits != nil {
				t.et.split = part.key()
			}
			for _, r := range fp.Records {
				if r.Offset < part.next {
					continue // fetched before a restore moved it on
				}
				rec := abi.Record{Key: r.Key, HasKey: r.Key != nil, Value: r.Value,
					Time: r.Timestamp.UnixMilli(), HasTime: true}
				if k.set.Headers && len(r.Headers) > 0 {
					rec.Headers = make([]abi.Header, len(r.Headers))
					for i, h := range r.Headers {
						rec.Headers[i] = abi.Header{Key: []byte(h.Key), Value: h.Value}
					}
				}
				recs = append(recs, rec)
				part.next = r.Offset + 1
				if len(recs) >= batchRecords || t.ctl.pending() {
					// A barrier waits for one batch at most.
					if ferr = flush(); ferr != nil {
						return
					}
					if ferr = t.serveControl(ctx, src); ferr != nil {
						return
					}
				}
			}
			// A batch holds one partition's records: their times count
			// for its watermark.
			if ferr = flush(); ferr != nil {
				return
			}
			if t.ctl.pending() {
				ferr = t.serveControl(ctx, src)
			}
		})
		if ferr != nil {
			return ferr
		}
		if got {
			k.lastOK = time.Now()
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := t.kafkaAlive(ctx); err != nil {
			return err
		}
	}
}

// takePartitions asks the JobMaster for the partitions it has for the
// subtask, serving commands meanwhile, until it has none now.
func (t *task) takePartitions(ctx context.Context, src *source) ([]*kafkaPart, error) {
	k := t.kafka
	var got []*kafkaPart
	for {
		sp, done, err := t.nextSplit(ctx, src)
		if err != nil {
			return nil, err
		}
		if done || sp == (checkpoint.Split{}) {
			k.done = done
			k.ask = time.Now().Add(k.set.Discovery)
			if t.et.splits != nil {
				// Asked once: a subtask that owns no partition (more
				// subtasks than partitions) is idle, not holding its
				// consumers' watermark back.
				t.et.splits.IdleWhenEmpty()
			}
			return got, nil
		}
		topic, p, ok := jobgraph.ParseKafkaSplitKey(sp.Key)
		if !ok {
			return nil, fmt.Errorf("task %s: kafka source: split %q names no partition", t.spec.ExecutionID, sp.Key)
		}
		k.taken = append(k.taken, sp.ID())
		if k.parts[sp.Key] != nil {
			continue // restored: it was handed out before the checkpoint
		}
		part := &kafkaPart{topic: topic, p: p, next: -1}
		k.parts[sp.Key] = part
		got = append(got, part)
	}
}

// consumeFrom resolves the start of the partitions that have none and
// adds those that have one to the client, each from its next offset. It
// returns those whose offsets the brokers did not list yet (a partition
// created a moment ago may be missing from the client's metadata for a
// few seconds): they are tried again soon.
func (t *task) consumeFrom(ctx context.Context, parts []*kafkaPart) ([]*kafkaPart, error) {
	k := t.kafka
	var unresolved []*kafkaPart
	for _, p := range parts {
		if p.next < 0 {
			unresolved = append(unresolved, p)
		}
	}
	if len(unresolved) > 0 {
		if err := k.resolve(ctx, unresolved); err != nil {
			return nil, fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
	}
	add := map[string]map[int32]kgo.Offset{}
	now := time.Now()
	var later []*kafkaPart
	for _, p := range parts {
		if p.next < 0 {
			later = append(later, p)
			continue
		}
		if add[p.topic] == nil {
			add[p.topic] = map[int32]kgo.Offset{}
		}
		add[p.topic][p.p] = kgo.NewOffset().At(p.next)
		if t.et.splits != nil {
			t.et.splits.Add(p.key(), now)
		}
		t.log.Info("kafka partition assigned", "topic", p.topic, "partition", p.p, "offset", p.next)
	}
	k.cl.AddConsumePartitions(add)
	switch {
	case len(later) == 0:
		k.unlistedSince = time.Time{}
	case k.unlistedSince.IsZero():
		k.unlistedSince = now
	case now.Sub(k.unlistedSince) > k.giveUp:
		return nil, fmt.Errorf("task %s: kafka source: no offsets listed for %s/%d for %s: does the topic still exist?", t.spec.ExecutionID, later[0].topic, later[0].p, k.giveUp)
	}
	k.retry = now.Add(kafkaRelistEvery)
	return later, nil
}

// resolve sets the next offset of parts from the source's start.
func (k *kafkaSource) resolve(ctx context.Context, parts []*kafkaPart) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaAdminTimeout)
	defer cancel()
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	var listed kadm.ListedOffsets
	var err error
	switch k.set.Start {
	case jobgraph.KafkaStartLatest:
		listed, err = k.adm.ListEndOffsets(ctx, topics...)
	case jobgraph.KafkaStartTimestamp:
		listed, err = k.adm.ListOffsetsAfterMilli(ctx, k.set.StartMillis, topics...)
	default:
		listed, err = k.adm.ListStartOffsets(ctx, topics...)
	}
	if err != nil {
		return fmt.Errorf("kafka source: list the offsets of %s at %s: %w", strings.Join(topics, ","), strings.Join(k.set.Brokers, ","), kafkaconn.Redact(err, k.set))
	}
	var group kadm.OffsetResponses
	if k.set.Start == jobgraph.KafkaStartGroup {
		if group, err = k.adm.FetchOffsetsForTopics(ctx, k.set.Group, topics...); err != nil {
			return fmt.Errorf("kafka source: fetch the committed offsets of group %q: %w", k.set.Group, kafkaconn.Redact(err, k.set))
		}
	}
	for _, p := range parts {
		if c, ok := group.Lookup(p.topic, p.p); ok && c.Err == nil && c.At >= 0 {
			p.next = c.At
			continue
		}
		o, ok := listed.Lookup(p.topic, p.p)
		switch {
		case !ok:
			continue // not in the client's metadata yet
		case o.Err != nil:
			return fmt.Errorf("kafka source: list the offsets of %s/%d: %w", p.topic, p.p, kafkaconn.Redact(o.Err, k.set))
		}
		p.next = max(o.Offset, 0)
	}
	return nil
}

// kafkaAlive fails the task when no broker has answered for the give-up
// time; it asks one now and then while nothing arrives.
func (t *task) kafkaAlive(ctx context.Context) error {
	k := t.kafka
	now := time.Now()
	if now.Sub(k.lastPing) >= kafkaPingEvery && now.Sub(k.lastOK) >= kafkaPingEvery {
		k.lastPing = now
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := k.cl.Ping(pctx)
		cancel()
		if err == nil {
			k.lastOK = time.Now()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		k.lastErr = err
	}
	if since := now.Sub(k.lastOK); since > k.giveUp {
		return fmt.Errorf("task %s: kafka source: no broker at %s answered for %s (last error: %v): check that Kafka runs; the job's restart strategy applies",
			t.spec.ExecutionID, strings.Join(k.set.Brokers, ","), since.Round(time.Second), kafkaconn.Redact(k.lastErr, k.set))
	}
	return nil
}

// commitCompleted commits the offsets of the newest completed checkpoint
// to the group, when one is configured. A failure is only logged: the
// offsets that count are in the checkpoint.
func (t *task) commitCompleted(ctx context.Context) {
	k := t.kafka
	done := t.ctl.completedMax()
	if done <= k.committed {
		return
	}
	var snap *kafkaSnap
	for i := range k.snaps {
		if k.snaps[i].id <= done {
			snap = &k.snaps[i]
		}
	}
	k.committed = done
	if snap == nil {
		return
	}
	offs := kadm.Offsets{}
	for topic, ps := range snap.offs {
		for p, o := range ps {
			offs.AddOffset(topic, p, o, -1)
		}
	}
	k.snaps = slices.DeleteFunc(k.snaps, func(s kafkaSnap) bool { return s.id <= done })
	cctx, cancel := context.WithTimeout(ctx, kafkaAdminTimeout)
	defer cancel()
	if err := k.adm.CommitAllOffsets(cctx, k.set.Group, offs); err != nil && ctx.Err() == nil {
		t.log.Warn("kafka source: committing the offsets to the group failed (they are in the checkpoint; only lag tools see them late)", "group", k.set.Group, "checkpoint", done, "err", kafkaconn.Redact(err, k.set))
	}
}

// position is the source's position for the checkpoint coordinator: the
// partitions it took since it started.
func (k *kafkaSource) position() *checkpoint.SourcePosition {
	return &checkpoint.SourcePosition{Finished: slices.Clone(k.taken)}
}

// snapshotKafka puts the source's next offsets into st at barrier id, and
// keeps them for the group commit once id completes.
func (t *task) snapshotKafka(st *wasmhost.State, id int64) {
	k := t.kafka
	if k == nil {
		return
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for key := range k.parts {
			if !yield(key) {
				return
			}
		}
	})
	b := binary.LittleEndian.AppendUint32(nil, uint32(t.spec.Parallelism))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	offs := map[string]map[int32]int64{}
	for _, key := range keys {
		p := k.parts[key]
		b = binary.LittleEndian.AppendUint16(b, uint16(len(p.topic)))
		b = append(b, p.topic...)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.p))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.next))
		if p.next >= 0 {
			if offs[p.topic] == nil {
				offs[p.topic] = map[int32]int64{}
			}
			offs[p.topic][p.p] = p.next
		}
	}
	st.PutHostEntry(t.spec.Chain[0].ID, kafkaSourceEntry+strconv.Itoa(t.spec.Subtask), b)
	if k.set.Group != "" {
		k.snaps = append(k.snaps, kafkaSnap{id: id, offs: offs})
	}
}

// restoreKafka takes the source's offsets out of restored state.
func (t *task) restoreKafka(st *wasmhost.State) error {
	k := t.kafka
	if k == nil {
		return nil
	}
	for _, b := range st.TakeHostEntries(t.spec.Chain[0].ID, kafkaSourceEntry) {
		parts, par, err := decodeKafkaEntry(b)
		if err != nil {
			return fmt.Errorf("task %s: restore the kafka source's offsets: %w", t.spec.ExecutionID, err)
		}
		if par != t.spec.Parallelism {
			return fmt.Errorf("task %s: the kafka source's offsets were checkpointed at parallelism %d, the task runs at %d: a kafka source cannot be rescaled; restore at parallelism %d", t.spec.ExecutionID, par, t.spec.Parallelism, par)
		}
		for _, p := range parts {
			k.parts[p.key()] = p
		}
	}
	return nil
}

func decodeKafkaEntry(b []byte) ([]*kafkaPart, int, error) {
	if len(b) < 8 {
		return nil, 0, errors.New("truncated header")
	}
	par, n := int(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint32(b[4:])
	b = b[8:]
	var out []*kafkaPart
	for range n {
		if len(b) < 2 {
			return nil, 0, errors.New("truncated partition")
		}
		tl := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+tl+12 {
			return nil, 0, errors.New("truncated partition")
		}
		p := &kafkaPart{topic: string(b[2 : 2+tl]), p: int32(binary.LittleEndian.Uint32(b[2+tl:])), next: int64(binary.LittleEndian.Uint64(b[6+tl:]))}
		b = b[14+tl:]
		out = append(out, p)
	}
	if len(b) != 0 {
		return nil, 0, errors.New("trailing bytes")
	}
	return out, par, nil
}
