package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/jsconn"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/wasmhost"
)

// The JetStream connectors keep what they must survive a restore as host
// entries in the task's state (wasmhost.State.PutHostEntry): the source
// its next stream sequence, the exactly-once sink the records it holds for
// checkpoints that have not been published yet. A chain without guest
// operators gets a state of its own for them (t.hostState).
const (
	jsSourceEntry = "jetstream-source-"
	jsSinkEntry   = "jetstream-sink-"
	// jsFetchWait is how long one fetch waits for messages: commands are
	// served between fetches.
	jsFetchWait = 100 * time.Millisecond
	// jsPublishGiveUp is how long the sink retries a publish that fails
	// before it fails the task (and the job's restart strategy applies).
	jsPublishGiveUp = 30 * time.Second
	// jsPublishWindow bounds the unacknowledged publishes of the sink.
	jsPublishWindow = 1000
	// jsKeyHeader carries a record's key in a published message.
	jsKeyHeader = "Sluice-Key"
)

// runJetStream reads the stream the head names, by sequence, from the
// restored position or the configured start, in batches: each message's
// subject is the record's key, its data the value, its timestamp the time.
func (t *task) runJetStream(ctx context.Context) error {
	head := &t.spec.Chain[0]
	set, err := head.JetStream()
	if err != nil {
		return fmt.Errorf("task %s: vertex %d (%s): %w", t.spec.ExecutionID, head.ID, head.Name, err)
	}
	nc, js, err := jsconn.Connect(ctx, set, "sluice "+t.spec.ExecutionID)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
	}
	defer nc.Close()
	cfg := jetstream.OrderedConsumerConfig{}
	if set.Subject != "" {
		cfg.FilterSubjects = []string{set.Subject}
	}
	if t.jsNext == 0 {
		switch set.Start.Kind {
		case "new":
			st, err := js.Stream(ctx, set.Stream)
			if err != nil {
				return fmt.Errorf("task %s: jetstream stream %q: %w", t.spec.ExecutionID, set.Stream, err)
			}
			// Resolved now, so a restore before the first message
			// resumes here rather than at a later "new".
			t.jsNext = st.CachedInfo().State.LastSeq + 1
		case "seq":
			t.jsNext = set.Start.Seq
		case "time":
			cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
			cfg.OptStartTime = &set.Start.Time
		}
	}
	if t.jsNext > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = t.jsNext
	}
	cons, err := js.OrderedConsumer(ctx, set.Stream, cfg)
	if err != nil {
		return fmt.Errorf("task %s: read jetstream stream %q: %w", t.spec.ExecutionID, set.Stream, err)
	}
	var recs []abi.Record
	flush := t.recordFlush(ctx, &recs)
	src := &source{flush: flush}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("task %s: read jetstream stream %q: %w", t.spec.ExecutionID, set.Stream, err)
	}
	defer it.Stop()
	for {
		if err := t.serveControl(ctx, src); err != nil {
			return err
		}
		waited := t.met.waitStart()
		// One context bounds the wait and honours ctx (the library takes
		// one or the other).
		wctx, cancel := context.WithTimeout(ctx, jsFetchWait)
		msg, err := it.Next(jetstream.NextContext(wctx))
		cancel()
		t.met.idleSince(waited)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
			// Nothing new: hand on what is held.
			if err := flush(); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("task %s: read jetstream stream %q: %w", t.spec.ExecutionID, set.Stream, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("task %s: jetstream message without metadata: %w", t.spec.ExecutionID, err)
		}
		recs = append(recs, abi.Record{Key: []byte(msg.Subject()), HasKey: true, Value: msg.Data(),
			Time: md.Timestamp.UnixMilli(), HasTime: true})
		t.jsNext = md.Sequence.Stream + 1
		if len(recs) >= batchRecords || t.ctl.pending() {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// recordFlush returns a host source's flush: the records it gathered in
// *recs go to the chain (their bytes counted), *recs is emptied, and the
// watermark tick runs.
func (t *task) recordFlush(ctx context.Context, recs *[]abi.Record) func() error {
	return func() error {
		if len(*recs) == 0 {
			return t.sourceTick(ctx, false)
		}
		n := 0
		for i := range *recs {
			n += len((*recs)[i].Value)
		}
		t.met.addIn(0, n)
		// Not encoded here: a chain without guest code needs no encoding,
		// and a guest's Process encodes into its memory directly.
		err := t.process(ctx, *recs, nil)
		clear(*recs)
		*recs = (*recs)[:0]
		if err == nil {
			err = t.sourceTick(ctx, false)
		}
		return err
	}
}

// snapshotJetStream puts the connectors' positions and held records into
// st, at barrier id, before st is frozen.
func (t *task) snapshotJetStream(st *wasmhost.State, id int64) {
	sub := strconv.Itoa(t.spec.Subtask)
	if t.jsHead {
		st.PutHostEntry(t.spec.Chain[0].ID, jsSourceEntry+sub, binary.LittleEndian.AppendUint64(nil, t.jsNext))
	}
	if s := t.jsSink; s != nil && s.exactly {
		st.PutHostEntry(s.vertex, jsSinkEntry+sub, s.barrier(id))
	}
}

// restoreJetStream takes the connectors' entries out of restored state.
func (t *task) restoreJetStream(st *wasmhost.State) error {
	if t.jsHead {
		for _, b := range st.TakeHostEntries(t.spec.Chain[0].ID, jsSourceEntry) {
			if len(b) == 8 {
				t.jsNext = max(t.jsNext, binary.LittleEndian.Uint64(b))
			}
		}
	}
	if s := t.jsSink; s != nil {
		for _, b := range st.TakeHostEntries(s.vertex, jsSinkEntry) {
			if err := s.restore(b); err != nil {
				return fmt.Errorf("task %s: restore the jetstream sink's records: %w", t.spec.ExecutionID, err)
			}
		}
	}
	return nil
}

// jsRec is one record a sink holds.
type jsRec struct{ key, value []byte }

// jsBatch is the records one subtask held for one checkpoint, published
// once that checkpoint completed (ready: restored from a completed one).
type jsBatch struct {
	id      int64
	subtask int
	recs    []jsRec
	ready   bool
}

// jetStreamSink publishes a chain's output to one subject. Exactly once:
// the records between barriers are held, kept in the checkpoint, and
// published by the publisher goroutine once the checkpoint completes,
// each with the Nats-Msg-Id jsconn.MsgID gives it, so a republish after a
// restore is dropped by the server within the stream's duplicate window.
// At least once: published at once, and a barrier waits for the acks.
//
// The task's goroutine owns cur and the async futures; the publisher
// reaches pending under mu.
type jetStreamSink struct {
	vertex    int
	job       string
	subtask   int
	subject   string
	exactly   bool
	completed func() int64
	log       interface{ Warn(string, ...any) }

	nc *nats.Conn
	js jetstream.JetStream

	cur     []jsRec
	futures []jetstream.PubAckFuture // at least once

	mu      sync.Mutex
	pending []*jsBatch
	err     error // the publisher gave up
	stop    chan struct{}
	done    chan struct{}
}

func (t *task) newJetStreamSink(ctx context.Context, v jobgraph.Vertex) error {
	set, err := v.JetStream()
	if err != nil {
		return fmt.Errorf("vertex %d (%s): %w", v.ID, v.Name, err)
	}
	nc, js, err := jsconn.Connect(ctx, set, "sluice "+t.spec.ExecutionID)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
	}
	s := &jetStreamSink{vertex: v.ID, job: t.spec.JobID, subtask: t.spec.Subtask, subject: set.Subject,
		exactly: set.Delivery == jobgraph.DeliveryExactlyOnce, completed: t.ctl.completedMax, log: t.log,
		nc: nc, js: js, stop: make(chan struct{}), done: make(chan struct{})}
	t.jsSink = s
	if s.exactly {
		go s.publisher()
	} else {
		close(s.done)
	}
	return nil
}

// write takes the chain's output.
func (s *jetStreamSink) write(ctx context.Context, recs []abi.Record) error {
	if err := s.failed(); err != nil {
		return err
	}
	for i := range recs {
		r := jsRec{value: append([]byte(nil), recs[i].Value...)}
		if recs[i].HasKey {
			r.key = append([]byte(nil), recs[i].Key...)
		}
		if !s.exactly {
			f, err := s.js.PublishMsgAsync(s.msg(r, ""))
			if err != nil {
				return fmt.Errorf("jetstream sink: publish to %q: %w", s.subject, err)
			}
			s.futures = append(s.futures, f)
			if len(s.futures) >= jsPublishWindow {
				if err := s.flushAcks(ctx); err != nil {
					return err
				}
			}
			continue
		}
		s.cur = append(s.cur, r)
	}
	return nil
}

func (s *jetStreamSink) msg(r jsRec, id string) *nats.Msg {
	m := nats.NewMsg(s.subject)
	m.Data = r.value
	if id != "" {
		m.Header.Set(jetstream.MsgIDHeader, id)
	}
	if r.key != nil {
		m.Header.Set(jsKeyHeader, string(r.key))
	}
	return m
}

// flushAcks waits for the acks of the at-least-once publishes made so far:
// a checkpoint covers only what the server stored.
func (s *jetStreamSink) flushAcks(ctx context.Context) error {
	for _, f := range s.futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("jetstream sink: publish to %q: %w", s.subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	clear(s.futures)
	s.futures = s.futures[:0]
	return nil
}

// barrier closes the records held for checkpoint id and returns the
// encoding of every batch not yet published, for the checkpoint.
func (s *jetStreamSink) barrier(id int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) > 0 {
		s.pending = append(s.pending, &jsBatch{id: id, subtask: s.subtask, recs: s.cur})
		s.cur = nil
	}
	var b []byte
	for _, p := range s.pending {
		b = binary.LittleEndian.AppendUint64(b, uint64(p.id))
		b = binary.LittleEndian.AppendUint32(b, uint32(p.subtask))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.recs)))
		for _, r := range p.recs {
			hasKey := uint32(0)
			if r.key != nil {
				hasKey = 1
			}
			b = binary.LittleEndian.AppendUint32(b, hasKey)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(r.key)))
			b = append(b, r.key...)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(r.value)))
			b = append(b, r.value...)
		}
	}
	return b
}

// restore takes back batches a completed checkpoint held: they are
// published (again) at once, under their first ids.
func (s *jetStreamSink) restore(b []byte) error {
	u32 := func() (uint32, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v := binary.LittleEndian.Uint32(b)
		b = b[4:]
		return v, true
	}
	bytesN := func() ([]byte, bool) {
		n, ok := u32()
		if !ok || uint64(len(b)) < uint64(n) {
			return nil, false
		}
		v := append([]byte{}, b[:n]...)
		b = b[n:]
		return v, true
	}
	var got []*jsBatch
	for len(b) > 0 {
		if len(b) < 16 {
			return errors.New("truncated batch header")
		}
		p := &jsBatch{id: int64(binary.LittleEndian.Uint64(b)), subtask: int(binary.LittleEndian.Uint32(b[8:])), ready: true}
		n := binary.LittleEndian.Uint32(b[12:])
		b = b[16:]
		for range n {
			hasKey, ok1 := u32()
			key, ok2 := bytesN()
			val, ok3 := bytesN()
			if !ok1 || !ok2 || !ok3 {
				return errors.New("truncated record")
			}
			if hasKey == 0 {
				key = nil
			}
			p.recs = append(p.recs, jsRec{key: key, value: val})
		}
		got = append(got, p)
	}
	s.mu.Lock()
	s.pending = append(s.pending, got...)
	s.mu.Unlock()
	return nil
}

func (s *jetStreamSink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// publisher publishes the batches of completed checkpoints, in order,
// until stopped.
func (s *jetStreamSink) publisher() {
	defer close(s.done)
	err := retryEvery(s.stop, jsPublishGiveUp, func() error { return s.publishReady(s.completed(), false) },
		func(err error) {
			s.log.Warn("jetstream sink: publish failed; retrying", "subject", s.subject, "err", err)
		})
	if err != nil {
		s.mu.Lock()
		s.err = fmt.Errorf("jetstream sink: publishing to %q failed for %s: %w", s.subject, jsPublishGiveUp, err)
		s.mu.Unlock()
	}
}

// retryEvery runs attempt every 20ms until stop closes (then it returns
// nil) or attempts have failed for longer than giveUp (then it returns
// the last error); warn hears the first failure of each run of them.
func retryEvery(stop <-chan struct{}, giveUp time.Duration, attempt func() error, warn func(error)) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var failingSince time.Time
	for {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		err := attempt()
		select {
		case <-stop:
			return nil
		default:
		}
		switch {
		case err == nil:
			failingSince = time.Time{}
		case failingSince.IsZero():
			failingSince = time.Now()
			warn(err)
		case time.Since(failingSince) > giveUp:
			return err
		}
	}
}

// publishReady publishes every batch whose checkpoint completed (all of
// them with all set) and forgets those the server acknowledged.
func (s *jetStreamSink) publishReady(completed int64, all bool) error {
	for {
		s.mu.Lock()
		var p *jsBatch
		if len(s.pending) > 0 && (all || s.pending[0].ready || s.pending[0].id <= completed) {
			p = s.pending[0]
		}
		s.mu.Unlock()
		if p == nil {
			return nil
		}
		if err := s.publishBatch(p); err != nil {
			return err
		}
		s.mu.Lock()
		s.pending = s.pending[1:]
		s.mu.Unlock()
	}
}

func (s *jetStreamSink) publishBatch(p *jsBatch) error {
	// In windows of jsPublishWindow, below the client's limit on
	// unacknowledged async publishes.
	for from := 0; from < len(p.recs); from += jsPublishWindow {
		futures := make([]jetstream.PubAckFuture, 0, jsPublishWindow)
		for i := from; i < min(from+jsPublishWindow, len(p.recs)); i++ {
			f, err := s.js.PublishMsgAsync(s.msg(p.recs[i], jsconn.MsgID(s.job, s.vertex, p.id, p.subtask, i)))
			if err != nil {
				return fmt.Errorf("publish checkpoint %d's records to %q: %w", p.id, s.subject, err)
			}
			futures = append(futures, f)
		}
		if err := s.waitAcks(p.id, futures); err != nil {
			return err
		}
	}
	return nil
}

func (s *jetStreamSink) waitAcks(id int64, futures []jetstream.PubAckFuture) error {
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish checkpoint %d's records to %q: %w", id, s.subject, err)
		case <-timeout.C:
			return fmt.Errorf("publish checkpoint %d's records to %q: no acknowledgement in 10s", id, s.subject)
		case <-s.stop:
			return errors.New("jetstream sink closed")
		}
	}
	return nil
}

// finish publishes everything the sink holds at the end of its input
// (the records after the last barrier under id final).
func (s *jetStreamSink) finish(ctx context.Context, final int64) error {
	if !s.exactly {
		return s.flushAcks(ctx)
	}
	close(s.stop)
	<-s.done
	s.stop = make(chan struct{})
	s.mu.Lock()
	if len(s.cur) > 0 {
		s.pending = append(s.pending, &jsBatch{id: final, subtask: s.subtask, recs: s.cur})
		s.cur = nil
	}
	s.mu.Unlock()
	return s.publishReady(0, true)
}

// close stops the publisher and the connection; what is still held is in
// the checkpoint (exactly once) or replayed (at least once).
func (s *jetStreamSink) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.nc.Close()
}

// openHostState gives a chain without guest operators a state for its
// JetStream and Kafka connectors, restored from the checkpoint when there is one.
func (t *task) openHostState(ctx context.Context) error {
	if t.spec.Restore == nil {
		maxP := t.spec.MaxParallelism
		if maxP == 0 {
			maxP = jobgraph.DefaultMaxParallelism
		}
		start, end := keygroup.Range(t.spec.Subtask, t.spec.Parallelism, maxP)
		t.hostState = wasmhost.NewState(maxP, start, end)
		return nil
	}
	st, err := t.restoreState(ctx)
	if err != nil {
		return err
	}
	t.hostState = st
	if err := t.restoreJetStream(st); err != nil {
		return err
	}
	if err := t.restoreKafka(st); err != nil {
		return err
	}
	return t.restoreKafkaSink(st)
}
