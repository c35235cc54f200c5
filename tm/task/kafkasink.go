package task

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/kafkaconn"
	"github.com/sluicehq/sluice/wasmhost"
)

// The Kafka sink (docs/ABI.md section 5, docs/RATIONALE.md "Why does the
// exactly-once Kafka sink commit a marker offset in its transactions?").
const (
	// kafkaSinkEntry names an exactly-once sink's held records in the
	// task's operator state: kafkaSinkEntry + the subtask.
	kafkaSinkEntry = "kafka-sink-"
	// kafkaGiveUp is how long the sink goes on retrying a produce or a
	// transaction that fails before it fails the task, so the job's
	// restart strategy applies.
	kafkaGiveUp = 30 * time.Second
	// kafkaAttempt bounds one attempt at committing one checkpoint's
	// records, or at the recovery before it.
	kafkaAttempt = 10 * time.Second
	// kafkaBuffered bounds the records the client buffers unacknowledged:
	// a write blocks beyond it.
	kafkaBuffered = 10_000
	// kafkaMarkerPartition is the partition of the sink's topic under
	// which the marker groups keep their checkpoint id; no consumer reads
	// it as an offset.
	kafkaMarkerPartition = 0
)

// kafkaBatch is the records one subtask held for one checkpoint, encoded
// as abi batches (one per write), committed in one transaction once the
// checkpoint completed (ready: restored from a completed one).
type kafkaBatch struct {
	id     int64
	chunks [][]byte
	ready  bool
}

// kafkaHeld is what one restored entry held: the job and subtask that
// held it and its batches, not yet checked against that subtask's marker.
type kafkaHeld struct {
	job     string
	holder  int
	batches []*kafkaBatch
}

// kafkaMark is a marker: the last checkpoint whose records a subtask
// committed, and the job it belongs to (the offset's metadata), so the
// marker of another job that used the prefix is not taken for this one's.
type kafkaMark struct {
	id  int64
	job string
}

// covers reports whether the marker says job's checkpoint id was
// committed.
func (m kafkaMark) covers(job string, id int64) bool { return m.job == job && id <= m.id }

// kafkaSink produces a chain's output to one topic; each record's key,
// value and time become the Kafka record's (no headers).
//
// At least once: records are produced as they come, with at most
// kafkaBuffered in flight, and a barrier waits for every acknowledgement.
//
// Exactly once (two-phase commit): the records between barriers are held
// and kept in the checkpoint (the host entry kafka-sink-<subtask>); when
// the checkpoint completes the committer goroutine produces them in one
// transaction of the transactional id "<prefix>-<subtask>", which also
// commits the checkpoint id as the offset of partition
// kafkaMarkerPartition in the group "<prefix>-<subtask>-marker". After a
// restore the committer first initialises the transactional ids (fencing
// an older producer and aborting its open transaction), reads the markers
// and drops what they say was committed; the rest is committed in order.
//
// The task's goroutine owns cur and, at least once, the producing client;
// the committer owns txn and topicID; pending, held, recheck and err are
// under mu.
type kafkaSink struct {
	vertex      int
	job         string
	subtask     int
	parallelism int
	set         jobgraph.KafkaSettings
	client      string // client id
	exactly     bool
	completed   func() int64
	log         *slog.Logger

	cl *kgo.Client // at least once
	// At least once, records are produced under a context that fails
	// them kafkaGiveUp after it began (kgo's record timeout counts from
	// the record's timestamp, the record's own time here); a new one
	// begins every kafkaGiveUp/2, so each record gets at least half.
	prodCtx   context.Context
	prodSince time.Time
	prodEnds  []context.CancelFunc

	cur [][]byte // exactly once: encoded since the last barrier

	// With a topic header: the topics records were routed to that exist,
	// and the client that looked them up (the task's goroutine owns both).
	routed map[string]bool
	meta   *kgo.Client

	txn     *kgo.Client
	topicID [16]byte
	// unsure is the batch whose commit failed with an unknown outcome:
	// the recovery after it reads this subtask's marker to know.
	unsure *kafkaBatch

	mu      sync.Mutex
	pending []*kafkaBatch
	held    []kafkaHeld
	recheck bool  // read the markers before the next commit
	err     error // at least once: a produce failed; exactly once: the committer gave up
	stop    chan struct{}
	done    chan struct{}
}

func (t *task) newKafkaSink(ctx context.Context, v jobgraph.Vertex) error {
	set, err := v.Kafka()
	if err != nil {
		return fmt.Errorf("task %s: vertex %d (%s): %w", t.spec.ExecutionID, v.ID, v.Name, err)
	}
	if set.TxnPrefix == "" {
		set.TxnPrefix = fmt.Sprintf("sluice-%s-v%d", t.spec.JobID, v.ID)
	}
	s := &kafkaSink{vertex: v.ID, job: t.spec.JobID, subtask: t.spec.Subtask, parallelism: t.spec.Parallelism, set: set,
		client: "sluice " + t.spec.ExecutionID, exactly: set.Delivery == jobgraph.DeliveryExactlyOnce,
		completed: t.ctl.completedMax, log: t.log, recheck: true,
		stop: make(chan struct{}), done: make(chan struct{})}
	if !s.exactly {
		cl, err := kgo.NewClient(append(kafkaconn.Options(set, s.client), kgo.MaxBufferedRecords(kafkaBuffered))...)
		if err != nil {
			return fmt.Errorf("task %s: kafka sink: %w", t.spec.ExecutionID, err)
		}
		s.cl = cl
		close(s.done)
	} else {
		go s.committer()
	}
	t.kafkaSink = s
	return nil
}

// txnID is the transactional id of the sink's subtask sub.
func (s *kafkaSink) txnID(sub int) string { return s.set.TxnPrefix + "-" + strconv.Itoa(sub) }

// markerGroup is the group whose offset is the last checkpoint whose
// records subtask sub committed.
func (s *kafkaSink) markerGroup(sub int) string { return s.txnID(sub) + "-marker" }

// record is r as a Kafka record: its key, value, time and headers, to the
// topic its topic header names, if the sink has one, or the sink's topic.
func (s *kafkaSink) record(r abi.Record) *kgo.Record {
	kr := &kgo.Record{Topic: s.set.Topic, Value: r.Value}
	if r.HasKey {
		kr.Key = r.Key
	}
	if r.HasTime {
		kr.Timestamp = time.UnixMilli(r.Time)
	}
	for _, h := range r.Headers {
		if s.set.TopicHeader != "" && string(h.Key) == s.set.TopicHeader {
			kr.Topic = string(h.Value)
			continue
		}
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
	}
	return kr
}

// checkRoutes fails when a record's topic header names a topic that
// Kafka refuses or that does not exist, before the record is held or
// produced: such a record would otherwise fail every commit of its
// checkpoint. A topic found once is not looked up again.
func (s *kafkaSink) checkRoutes(ctx context.Context, recs []abi.Record) error {
	if s.set.TopicHeader == "" {
		return nil
	}
	for _, r := range recs {
		for _, h := range r.Headers {
			if string(h.Key) != s.set.TopicHeader || s.routed[string(h.Value)] {
				continue
			}
			tp := string(h.Value)
			if why := jobgraph.BadKafkaTopic(tp); why != "" {
				return fmt.Errorf("kafka sink: a record's header %q (the sink's %s) names topic %q, which %s: fix the job's routing", s.set.TopicHeader, jobgraph.ConfigKafkaTopicHeader, tp, why)
			}
			if err := s.lookUpTopic(ctx, tp); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *kafkaSink) lookUpTopic(ctx context.Context, tp string) error {
	if s.meta == nil {
		cl, err := kgo.NewClient(kafkaconn.Options(s.set, s.client)...)
		if err != nil {
			return fmt.Errorf("kafka sink: %w", err)
		}
		s.meta = cl
	}
	ctx, cancel := context.WithTimeout(ctx, kafkaGiveUp)
	defer cancel()
	tds, err := kadm.NewClient(s.meta).ListTopics(ctx, tp)
	if err != nil {
		return fmt.Errorf("kafka sink: look up topic %q at %s: %w; check that Kafka runs", tp, strings.Join(s.set.Brokers, ","), err)
	}
	if td, ok := tds[tp]; !ok || td.Err != nil {
		return fmt.Errorf("kafka sink: a record's header %q (the sink's %s) names topic %q, which does not exist at %s: create it, or fix the job's routing", s.set.TopicHeader, jobgraph.ConfigKafkaTopicHeader, tp, strings.Join(s.set.Brokers, ","))
	}
	if s.routed == nil {
		s.routed = map[string]bool{}
	}
	s.routed[tp] = true
	return nil
}

func (s *kafkaSink) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *kafkaSink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// write takes the chain's output: encoded once (the copy the records need
// beyond this call), then held or produced.
func (s *kafkaSink) write(ctx context.Context, recs []abi.Record) error {
	if err := s.failed(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	if err := s.checkRoutes(ctx, recs); err != nil {
		return err
	}
	chunk := abi.AppendBatch(nil, recs)
	if s.exactly {
		s.cur = append(s.cur, chunk)
		return nil
	}
	own, err := abi.DecodeBatch(nil, chunk)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	if s.prodCtx == nil || time.Since(s.prodSince) > kafkaGiveUp/2 {
		c, cancel := context.WithTimeout(ctx, kafkaGiveUp)
		s.prodCtx, s.prodSince, s.prodEnds = c, time.Now(), append(s.prodEnds, cancel)
	}
	for _, r := range own {
		s.cl.Produce(s.prodCtx, s.record(r), func(_ *kgo.Record, err error) {
			if err != nil {
				s.fail(fmt.Errorf("kafka sink: produce to %q: %w", s.set.Topic, err))
			}
		})
	}
	return nil
}

// atBarrier is the sink's part of a checkpoint's synchronous step: at
// least once it waits for every acknowledgement (a checkpoint covers only
// what the broker stored); either way a sink that gave up fails the task.
func (s *kafkaSink) atBarrier(ctx context.Context) error {
	if !s.exactly {
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	return s.failed()
}

func (s *kafkaSink) flush(ctx context.Context) error {
	// Records not stored when their context ends fail, so Flush returns.
	err := s.cl.Flush(ctx)
	for _, end := range s.prodEnds {
		end()
	}
	s.prodCtx, s.prodEnds = nil, s.prodEnds[:0]
	if err != nil {
		return fmt.Errorf("kafka sink: produce to %q: %w", s.set.Topic, err)
	}
	if err := s.failed(); err != nil {
		return fmt.Errorf("%w; check that Kafka runs at %s", err, strings.Join(s.set.Brokers, ","))
	}
	return nil
}

// barrier closes the records held for checkpoint id and returns the
// encoding of every batch not yet committed, for the checkpoint: u32 the
// holding subtask, u32 length and the job id, then per batch u64 id, u32
// chunk count, and each chunk as u32 length and bytes.
func (s *kafkaSink) barrier(id int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) > 0 {
		s.pending = appendBatch(s.pending, &kafkaBatch{id: id, chunks: s.cur})
		s.cur = nil
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(s.subtask))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s.job)))
	b = append(b, s.job...)
	// Restored batches not yet checked against their markers are still
	// the checkpoint's to keep.
	for _, h := range s.held {
		for _, p := range h.batches {
			b = appendKafkaBatch(b, p)
		}
	}
	for _, p := range s.pending {
		b = appendKafkaBatch(b, p)
	}
	return b
}

func appendKafkaBatch(b []byte, p *kafkaBatch) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(p.id))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.chunks)))
	for _, c := range p.chunks {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(c)))
		b = append(b, c...)
	}
	return b
}

// appendBatch adds p to batches, kept in id order; a batch of the same id
// (two subtasks' records for one checkpoint, after a rescale) is merged
// into it, so one transaction and one marker value cover both.
func appendBatch(batches []*kafkaBatch, p *kafkaBatch) []*kafkaBatch {
	i, found := slices.BinarySearchFunc(batches, p.id, func(b *kafkaBatch, id int64) int {
		switch {
		case b.id < id:
			return -1
		case b.id > id:
			return 1
		}
		return 0
	})
	if found {
		batches[i].chunks = append(batches[i].chunks, p.chunks...)
		batches[i].ready = batches[i].ready || p.ready
		return batches
	}
	return slices.Insert(batches, i, p)
}

// restore takes back an entry a completed checkpoint held; the committer
// checks it against its holder's marker before committing what is left.
func (s *kafkaSink) restore(b []byte) error {
	h, err := decodeKafkaSinkEntry(b)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.held = append(s.held, h)
	s.recheck = true
	s.mu.Unlock()
	return nil
}

func decodeKafkaSinkEntry(b []byte) (kafkaHeld, error) {
	if len(b) < 8 || uint64(len(b)-8) < uint64(binary.LittleEndian.Uint32(b[4:])) {
		return kafkaHeld{}, errors.New("truncated kafka sink entry")
	}
	n := binary.LittleEndian.Uint32(b[4:])
	h := kafkaHeld{holder: int(binary.LittleEndian.Uint32(b)), job: string(b[8 : 8+n])}
	b = b[8+n:]
	for len(b) > 0 {
		if len(b) < 12 {
			return kafkaHeld{}, errors.New("truncated kafka sink batch header")
		}
		p := &kafkaBatch{id: int64(binary.LittleEndian.Uint64(b)), ready: true}
		n := binary.LittleEndian.Uint32(b[8:])
		b = b[12:]
		for range n {
			if len(b) < 4 || uint64(len(b)-4) < uint64(binary.LittleEndian.Uint32(b)) {
				return kafkaHeld{}, errors.New("truncated kafka sink records")
			}
			l := binary.LittleEndian.Uint32(b)
			c := append([]byte(nil), b[4:4+l]...)
			if _, err := abi.DecodeBatch(nil, c); err != nil {
				return kafkaHeld{}, fmt.Errorf("kafka sink records: %w", err)
			}
			p.chunks = append(p.chunks, c)
			b = b[4+l:]
		}
		h.batches = append(h.batches, p)
	}
	return h, nil
}

// committer commits the batches of completed checkpoints, in order, until
// stopped; a failure that lasts kafkaGiveUp fails the sink.
func (s *kafkaSink) committer() {
	defer close(s.done)
	err := retryEvery(s.stop, kafkaGiveUp, func() error { return s.commitReady(s.completed(), false) },
		func(err error) {
			s.log.Warn("kafka sink: commit failed; retrying", "topic", s.set.Topic, "err", err)
		})
	if err != nil {
		s.fail(fmt.Errorf("kafka sink: committing to %q at %s failed for %s: %w; check that Kafka runs", s.set.Topic, s.set.String(), kafkaGiveUp, err))
	}
}

var errKafkaSinkClosed = errors.New("kafka sink closed")

// attemptCtx is a context for one attempt, ended by stop too.
func (s *kafkaSink) attemptCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaAttempt)
	stop := s.stop // finish replaces it once the committer is done
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// commitReady commits every batch whose checkpoint completed (all of them
// with all set), after the recovery a restore or a failure asks for. On
// an error the transactional client is dropped: the next attempt's new
// one fences it and aborts what it left open.
func (s *kafkaSink) commitReady(completed int64, all bool) error {
	for {
		select {
		case <-s.stop:
			if !all {
				return errKafkaSinkClosed
			}
		default:
		}
		s.mu.Lock()
		recheck := s.recheck
		var p *kafkaBatch
		if len(s.pending) > 0 && (all || s.pending[0].ready || s.pending[0].id <= completed) {
			p = s.pending[0]
		}
		s.mu.Unlock()
		if !recheck && p == nil {
			return nil
		}
		ctx, cancel := s.attemptCtx()
		var err error
		if recheck {
			err = s.recover(ctx)
		} else {
			err = s.commit(ctx, p)
		}
		cancel()
		if err != nil {
			if !recheck {
				s.unsure = p
			}
			s.mu.Lock()
			s.recheck = true
			s.mu.Unlock()
			if s.txn != nil {
				s.txn.Close()
				s.txn = nil
			}
			return err
		}
		if !recheck {
			s.mu.Lock()
			s.pending = s.pending[1:]
			s.mu.Unlock()
		}
	}
}

// recover makes sure no older producer of the sink's transactional ids can
// still commit, then drops the batches the markers say were committed:
// those restored, each against the marker of the subtask that held it,
// and the one whose commit failed with an unknown outcome, against this
// subtask's. (Nothing else is checked: a fresh job that reuses a prefix
// must not lose its first checkpoints to an older job's marker.)
func (s *kafkaSink) recover(ctx context.Context) error {
	if s.txn == nil {
		cl, err := s.initTxn(ctx, s.subtask)
		if err != nil {
			return err
		}
		s.txn = cl
	}
	adm := kadm.NewClient(s.txn)
	if s.topicID == ([16]byte{}) {
		tds, err := adm.ListTopics(ctx, s.set.Topic)
		if err != nil {
			return fmt.Errorf("look up topic %q: %w", s.set.Topic, err)
		}
		td, ok := tds[s.set.Topic]
		if !ok || td.Err != nil {
			return fmt.Errorf("topic %q does not exist (%v)", s.set.Topic, td.Err)
		}
		s.topicID = td.ID
	}
	s.mu.Lock()
	held := slices.Clone(s.held)
	s.mu.Unlock()
	for _, h := range held {
		if h.holder != s.subtask {
			// Another subtask's entry, after a rescale: its producer,
			// if one lingers, must not commit it as well.
			cl, err := s.initTxn(ctx, h.holder)
			if err != nil {
				return err
			}
			cl.Close()
		}
	}
	marks := map[int]kafkaMark{}
	mark := func(sub int) (kafkaMark, error) {
		if m, ok := marks[sub]; ok {
			return m, nil
		}
		m, err := s.marker(ctx, adm, sub)
		marks[sub] = m
		return m, err
	}
	if u := s.unsure; u != nil {
		m, err := mark(s.subtask)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if m.covers(s.job, u.id) && len(s.pending) > 0 && s.pending[0] == u {
			s.pending = s.pending[1:]
		}
		s.mu.Unlock()
		s.unsure = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.held {
		m, err := mark(h.holder)
		if err != nil {
			return err
		}
		for _, p := range h.batches {
			if !m.covers(h.job, p.id) {
				s.pending = appendBatch(s.pending, p)
			}
		}
	}
	s.held = nil
	s.recheck = false
	return nil
}

// initTxn returns a client of the transactional id of subtask sub whose
// producer id is initialised: the broker has then aborted the open
// transaction of an older producer of the id, and fenced it.
func (s *kafkaSink) initTxn(ctx context.Context, sub int) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(kafkaconn.Options(s.set, s.client),
		kgo.TransactionalID(s.txnID(sub)), kgo.MaxBufferedRecords(kafkaBuffered))...)
	if err != nil {
		return nil, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("initialise transactional id %q: %w", s.txnID(sub), err)
	}
	return cl, nil
}

// marker returns subtask sub's marker, id -1 if it has none.
func (s *kafkaSink) marker(ctx context.Context, adm *kadm.Client, sub int) (kafkaMark, error) {
	// Stable: a pending transactional commit of the marker is waited for.
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), s.markerGroup(sub))
	if errors.Is(err, kerr.GroupIDNotFound) {
		return kafkaMark{id: -1}, nil
	}
	if err != nil {
		return kafkaMark{}, fmt.Errorf("read the commit marker of group %q: %w", s.markerGroup(sub), err)
	}
	o, ok := offs.Lookup(s.set.Topic, kafkaMarkerPartition)
	if !ok {
		return kafkaMark{id: -1}, nil
	}
	if o.Err != nil {
		return kafkaMark{}, fmt.Errorf("read the commit marker of group %q: %w", s.markerGroup(sub), o.Err)
	}
	return kafkaMark{id: o.At, job: o.Metadata}, nil
}

// commit produces p's records in one transaction that also moves this
// subtask's marker to p's checkpoint.
func (s *kafkaSink) commit(ctx context.Context, p *kafkaBatch) error {
	cl := s.txn
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin the transaction of checkpoint %d: %w", p.id, err)
	}
	var mu sync.Mutex
	var perr error
	for _, c := range p.chunks {
		recs, err := abi.DecodeBatch(nil, c)
		if err != nil {
			return fmt.Errorf("checkpoint %d's records: %w", p.id, err)
		}
		for _, r := range recs {
			cl.Produce(ctx, s.record(r), func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = cmp.Or(perr, err)
					mu.Unlock()
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("produce checkpoint %d's records: %w", p.id, err)
	}
	mu.Lock()
	err := perr
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("produce checkpoint %d's records: %w", p.id, err)
	}
	if err := s.commitMarker(ctx, cl, p.id); err != nil {
		return err
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit the transaction of checkpoint %d: %w", p.id, err)
	}
	return nil
}

// commitMarker adds this subtask's marker group to the open transaction
// and commits id as its offset, visible exactly when the transaction's
// records are.
func (s *kafkaSink) commitMarker(ctx context.Context, cl *kgo.Client, id int64) error {
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint %d's marker: %w", id, err)
	}
	txnID, group := s.txnID(s.subtask), s.markerGroup(s.subtask)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
	ar, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ar.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("checkpoint %d's marker: add group %q to the transaction: %w", id, group, err)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.ProducerID, tc.ProducerEpoch, tc.Group, tc.Generation = txnID, pid, epoch, group, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic, tt.TopicID = s.set.Topic, s.topicID
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset, tp.Metadata = kafkaMarkerPartition, id, &s.job
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	tr, err := tc.RequestWith(ctx, cl)
	if err == nil {
		if len(tr.Topics) != 1 || len(tr.Topics[0].Partitions) != 1 {
			err = errors.New("the broker answered for no partition")
		} else {
			err = kerr.ErrorForCode(tr.Topics[0].Partitions[0].ErrorCode)
		}
	}
	if err != nil {
		return fmt.Errorf("checkpoint %d's marker: commit it to group %q: %w", id, group, err)
	}
	return nil
}

// finish delivers everything the sink holds at the end of its input (the
// records after the last barrier under id final).
func (s *kafkaSink) finish(ctx context.Context, final int64) error {
	if !s.exactly {
		return s.flush(ctx)
	}
	close(s.stop)
	<-s.done
	if err := s.failed(); err != nil {
		return err
	}
	s.stop = make(chan struct{})
	s.mu.Lock()
	if len(s.cur) > 0 {
		s.pending = appendBatch(s.pending, &kafkaBatch{id: final, chunks: s.cur})
		s.cur = nil
	}
	s.mu.Unlock()
	deadline := time.Now().Add(kafkaGiveUp)
	warned := false
	for {
		err := s.commitReady(0, true)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kafka sink: commit the last records to %q: %w", s.set.Topic, err)
		}
		if !warned {
			warned = true
			s.log.Warn("kafka sink: commit failed; retrying", "topic", s.set.Topic, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close stops the committer and the clients; what is still held is in the
// checkpoint (exactly once) or replayed (at least once).
func (s *kafkaSink) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	if s.cl != nil {
		s.cl.Close()
	}
	if s.meta != nil {
		s.meta.Close()
	}
	for _, end := range s.prodEnds {
		end()
	}
	if s.txn != nil {
		s.txn.Close()
		s.txn = nil
	}
}

// snapshotKafkaSink puts the exactly-once sink's held records into st, at
// barrier id, before st is frozen.
func (t *task) snapshotKafkaSink(st *wasmhost.State, id int64) {
	if s := t.kafkaSink; s != nil && s.exactly {
		st.PutHostEntry(s.vertex, kafkaSinkEntry+strconv.Itoa(t.spec.Subtask), s.barrier(id))
	}
}

// restoreKafkaSink takes the sink's entries out of restored state.
func (t *task) restoreKafkaSink(st *wasmhost.State) error {
	if s := t.kafkaSink; s != nil {
		for _, b := range st.TakeHostEntries(s.vertex, kafkaSinkEntry) {
			if err := s.restore(b); err != nil {
				return fmt.Errorf("task %s: restore the kafka sink's records: %w", t.spec.ExecutionID, err)
			}
		}
	}
	return nil
}
