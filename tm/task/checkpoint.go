package task

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

// Checkpoints in a task
//
// A source takes checkpoint N when the JobMaster's trigger reaches it
// (through Control), at its next safe point; a task with inputs takes it
// when barrier N has arrived on every input channel (aligned). Either way:
//
//	guest barrier hooks ─▶ freeze State (copy-on-write) ─▶ close the file-sink part
//	     ─▶ barrier N on every output ─▶ (background) encode, upload ─▶ Ack or Decline
//
// Processing goes on while the snapshot is encoded and uploaded. One upload goroutine per
// task handles checkpoints in order, so acknowledgements leave in
// checkpoint order, and Run waits for it, so the last one leaves before the
// task's final state and nothing is written after Run returns.
//
// Barrier alignment (tasks with inputs), per checkpoint:
//
//	idle ──barrier N (N > last)──▶ aligning N: block each channel that delivered N
//	aligning N ──every channel delivered N or ended──▶ snapshot, unblock all, idle
//	aligning N ──barrier M > N──▶ unblock, Decline N "superseded", aligning M
//	aligning N ──barrier M < N (first time)──▶ Decline M "superseded"
//	aligning N ──Notify(N, aborted)──▶ unblock, idle
//
// Barriers at or below the last checkpoint taken or given up are ignored.
// A superseded checkpoint's barrier is not forwarded: the JobMaster aborts
// a checkpoint at its first decline, so no task waits for it.

// uploadQueue bounds the checkpoints (and rolled file-sink parts) waiting
// for upload; a task that takes them faster than the store accepts them
// waits.
const uploadQueue = 4

// uploadJob is one checkpoint's background work, or a rolled file-sink
// part's upload (id 0), or a decline (reason set).
type uploadJob struct {
	id       int64
	reason   string
	state    *wasmhost.Frozen // the task's state at the barrier, encoded here
	kgStart  int
	kgEnd    int
	source   *checkpoint.SourcePosition
	sinkUpto int           // file-sink parts below this seq belong to the checkpoint
	dlqUpto  int           // dead-letter parts likewise
	aligned  time.Duration // the barrier alignment, for a task with inputs
	collUpto int64         // collected records below this index precede the barrier
}

type uploader struct {
	t      *task
	buf    []byte // the encoded state of the checkpoint being uploaded
	jobs   chan *uploadJob
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
}

func (t *task) startUploader(ctx context.Context) {
	u := &uploader{t: t, jobs: make(chan *uploadJob, uploadQueue), done: make(chan struct{})}
	u.ctx, u.cancel = context.WithCancel(ctx)
	t.up = u
	go u.run()
}

func (u *uploader) run() {
	defer close(u.done)
	for {
		select {
		case <-u.ctx.Done():
			return
		case j, ok := <-u.jobs:
			if !ok {
				return
			}
			u.handle(j)
		}
	}
}

// submit queues j, waiting while the queue is full.
func (u *uploader) submit(ctx context.Context, j *uploadJob) error {
	select {
	case u.jobs <- j:
		return nil
	case <-u.done:
		return fmt.Errorf("checkpoint uploads stopped: %w", context.Cause(u.ctx))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain lets the queued work finish and stops the goroutine.
func (u *uploader) drain() {
	if !u.closed {
		u.closed = true
		close(u.jobs)
	}
	<-u.done
	u.cancel()
}

// abort stops the goroutine, interrupting an upload in progress.
func (u *uploader) abort() {
	u.cancel()
	<-u.done
}

func (u *uploader) handle(j *uploadJob) {
	t := u.t
	ctx := u.ctx
	decline := func(reason string) {
		if ctx.Err() != nil {
			return // canceled: the JobMaster learns it from the task's state
		}
		t.log.Warn("declining checkpoint", "checkpoint", j.id, "reason", reason)
		if err := t.acks.Decline(ctx, checkpoint.Decline{ExecutionID: t.spec.ExecutionID, CheckpointID: j.id, Reason: reason}); err != nil {
			t.log.Warn("could not decline checkpoint", "checkpoint", j.id, "err", err)
		}
	}
	switch {
	case j.reason != "":
		decline(j.reason)
		return
	case j.id == 0: // a rolled part: upload it now to free memory
		if err := t.sink.upload(ctx, j.sinkUpto); err != nil && ctx.Err() == nil {
			t.log.Warn("file-sink part upload failed; retried at the next checkpoint", "err", err)
		}
		return
	}
	ack := checkpoint.Ack{ExecutionID: t.spec.ExecutionID, CheckpointID: j.id, Source: j.source, Alignment: j.aligned}
	if j.state != nil {
		// Encoding here, not at the barrier, keeps the task processing.
		u.buf = j.state.AppendTo(u.buf[:0]) // one buffer for every checkpoint
		j.state.Release()
		snap := u.buf
		t.pz.deliverBase(j.id, snap)
		key, err := t.stateKey(j.id)
		if err == nil && t.deps.Blob == nil {
			err = errNoStore
		}
		if err == nil {
			err = t.deps.Blob.Put(ctx, key, bytes.NewReader(snap), int64(len(snap)))
		}
		if err != nil {
			decline(fmt.Sprintf("task %s could not upload its state for checkpoint %d to %q: %v", t.spec.ExecutionID, j.id, key, err))
			return
		}
		ack.State = &checkpoint.StateHandle{Key: key, Size: int64(len(snap)), KeyGroupStart: j.kgStart, KeyGroupEnd: j.kgEnd}
	}
	if t.sink != nil {
		if err := t.sink.upload(ctx, j.sinkUpto); err != nil {
			decline(fmt.Sprintf("task %s could not upload its file-sink output for checkpoint %d: %v", t.spec.ExecutionID, j.id, err))
			return
		}
		ack.SinkParts = t.sink.ackParts(j.id, j.sinkUpto)
	}
	if dlq := t.pz.dlq; dlq != nil {
		if err := dlq.upload(ctx, j.dlqUpto); err != nil {
			decline(fmt.Sprintf("task %s could not upload its dead-letter records for checkpoint %d: %v", t.spec.ExecutionID, j.id, err))
			return
		}
		ack.SinkParts = append(ack.SinkParts, dlq.ackParts(j.id, j.dlqUpto)...)
	}
	if ctx.Err() != nil {
		return
	}
	ack.Collected, ack.CollectedFrom = t.collected.upTo(j.collUpto)
	if err := t.acks.Ack(ctx, ack); err != nil {
		// The records stay for the next acknowledgement.
		t.log.Warn("could not acknowledge checkpoint", "checkpoint", j.id, "err", err)
		return
	}
	t.collected.acked(j.collUpto)
}

// stateKey is where the task's snapshot of checkpoint id goes.
func (t *task) stateKey(id int64) (string, error) {
	keys, err := blob.ForTenant(t.spec.Tenant)
	if err != nil {
		return "", err
	}
	dir, err := keys.Checkpoint(t.spec.JobID, uint64(id))
	if err != nil {
		return "", err
	}
	return blob.Join(dir, checkpoint.StateObject(t.vertexIDs(), t.spec.Subtask))
}

func (t *task) vertexIDs() []int {
	ids := make([]int, len(t.spec.Chain))
	for i, v := range t.spec.Chain {
		ids[i] = v.ID
	}
	return ids
}

// declineLater queues a decline behind the checkpoints already queued.
func (t *task) declineLater(ctx context.Context, id int64, reason string) error {
	return t.up.submit(ctx, &uploadJob{id: id, reason: reason})
}

// takeCheckpoint runs the synchronous part of checkpoint id: the guest's
// barrier hooks, the state's freeze, the file-sink part, the barrier
// downstream; the encoding, the upload and the answer follow in the
// background. pos is a
// text source's position (already flushed to the guest).
func (t *task) takeCheckpoint(ctx context.Context, id int64, pos *checkpoint.SourcePosition, aligned time.Duration) error {
	j := &uploadJob{id: id, source: pos, aligned: aligned}
	if t.inst != nil {
		if err := t.inst.Barrier(ctx, id); err != nil {
			return err
		}
		st := t.inst.State()
		t.snapshotPoison(st)
		t.snapshotJetStream(st, id)
		t.snapshotKafka(st, id)
		t.snapshotKafkaSink(st, id)
		j.state = st.Freeze()
		_, j.kgStart, j.kgEnd = st.KeyGroups()
		t.markBase(id)
	} else if t.hostState != nil {
		t.snapshotJetStream(t.hostState, id)
		t.snapshotKafka(t.hostState, id)
		t.snapshotKafkaSink(t.hostState, id)
		j.state = t.hostState.Freeze()
		_, j.kgStart, j.kgEnd = t.hostState.KeyGroups()
	}
	if t.jsSink != nil && !t.jsSink.exactly {
		if err := t.jsSink.flushAcks(ctx); err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
	}
	if t.kafkaSink != nil {
		if err := t.kafkaSink.atBarrier(ctx); err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
	}
	if t.sink != nil {
		j.sinkUpto = t.sink.closePart()
	}
	j.collUpto = t.collected.end()
	if t.pz.dlq != nil {
		j.dlqUpto = t.pz.dlq.closePart()
	}
	for _, w := range t.writers {
		if err := w.EmitBarrier(ctx, id); err != nil {
			return fmt.Errorf("task %s: forward barrier %d: %w", t.spec.ExecutionID, id, err)
		}
	}
	t.lastID = max(t.lastID, id)
	t.log.Debug("checkpoint taken", "checkpoint", id)
	return t.up.submit(ctx, j)
}

// source is what a source hands serveControl: how to hand the records it
// holds to the guest, and where it stands (nil for a guest source).
type source struct {
	flush    func() error
	position func() *checkpoint.SourcePosition
}

// serveControl takes the commands waiting in the task's Control. A source
// passes src; for other tasks it is nil. A source stopped by
// stop-with-savepoint stays here until ctx ends or that savepoint aborts.
func (t *task) serveControl(ctx context.Context, src *source) error {
	for {
		for _, m := range t.ctl.take() {
			if err := t.onControl(ctx, m, src); err != nil {
				return err
			}
		}
		if t.stopID == 0 {
			return nil
		}
		// Stopped: emit nothing and do not finish (that would end the
		// input downstream) until canceled.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.ctl.wake:
		}
	}
}

func (t *task) onControl(ctx context.Context, m controlMsg, src *source) error {
	if m.trigger == nil {
		id := m.aborted
		t.log.Debug("checkpoint aborted", "checkpoint", id)
		if t.alignID == id {
			t.abandonAlignment()
		}
		if t.stopID == id {
			t.log.Info("stop-with-savepoint aborted: the source resumes", "checkpoint", id)
			t.stopID = 0
		}
		t.lastID = max(t.lastID, id)
		return nil
	}
	tr := *m.trigger
	switch {
	case src == nil:
		return t.declineLater(ctx, tr.ID, fmt.Sprintf("task %s is not a source: checkpoints reach it as barriers", t.spec.ExecutionID))
	case t.stopID != 0:
		return t.declineLater(ctx, tr.ID, fmt.Sprintf("source %s is stopped by stop-with-savepoint %d", t.spec.ExecutionID, t.stopID))
	case tr.ID <= t.lastID:
		return t.declineLater(ctx, tr.ID, fmt.Sprintf("source %s already took or gave up checkpoint %d, which is not older", t.spec.ExecutionID, t.lastID))
	}
	if err := src.flush(); err != nil {
		return err
	}
	if tr.Stop && tr.Drain {
		// Event time ends before the barrier, so the savepoint holds what
		// every timer downstream emitted.
		t.log.Info("stop --drain: the source sends the maximum watermark", "checkpoint", tr.ID)
		if err := t.drainWatermark(ctx); err != nil {
			return err
		}
	}
	var pos *checkpoint.SourcePosition
	if src.position != nil {
		pos = src.position()
	}
	if err := t.takeCheckpoint(ctx, tr.ID, pos, 0); err != nil {
		return err
	}
	if tr.Stop {
		t.log.Info("stop-with-savepoint: the source emits nothing more", "checkpoint", tr.ID)
		t.stopID = tr.ID
	}
	return nil
}

// chanKey is one input channel: a gate and a producer subtask.
type chanKey struct{ gate, producer int }

// onEvent handles an event from gate gi: barriers align, END_OF_PARTITION
// counts as aligned for every checkpoint from then on.
func (t *task) onEvent(ctx context.Context, gi int, producer int, ev exchange.Event) error {
	key := chanKey{gi, producer}
	id := ev.CheckpointID
	switch ev.Type {
	case exchange.CheckpointBarrier:
	case exchange.EndOfPartition:
		t.ended[key] = struct{}{}
		if t.alignID != 0 && t.aligned() {
			if err := t.completeAlignment(ctx); err != nil {
				return err
			}
		}
		return t.onWatermarkEvent(ctx, gi, producer, ev)
	default:
		return t.onWatermarkEvent(ctx, gi, producer, ev)
	}
	switch {
	case id <= t.lastID:
		t.log.Debug("ignoring an old barrier", "checkpoint", id, "producer", producer)
		return nil
	case t.alignID != 0 && id < t.alignID:
		// A channel that was behind: the newer checkpoint is being aligned
		// already, so this one cannot complete here. Say so once.
		if _, done := t.superseded[id]; done {
			return nil
		}
		t.superseded[id] = struct{}{}
		return t.declineLater(ctx, id, fmt.Sprintf("task %s: barrier %d arrived after barrier %d on another input; checkpoint %d is superseded", t.spec.ExecutionID, id, t.alignID, id))
	case t.alignID != 0 && id > t.alignID:
		old := t.alignID
		t.abandonAlignment()
		if err := t.declineLater(ctx, old, fmt.Sprintf("task %s: barrier %d arrived before barrier %d was aligned on every input; checkpoint %d is superseded", t.spec.ExecutionID, id, old, old)); err != nil {
			return err
		}
	}
	if t.alignID == 0 {
		t.startAlignment(ctx, id)
	}
	t.seen[key] = struct{}{}
	if t.aligned() {
		return t.completeAlignment(ctx)
	}
	return t.gates[gi].Block(producer)
}

func (t *task) aligned() bool { return len(t.seen)+len(t.ended) >= t.channels }

func (t *task) startAlignment(ctx context.Context, id int64) {
	t.log.Debug("aligning barriers", "checkpoint", id)
	t.alignID = id
	t.alignStart = time.Now()
	clear(t.seen)
	if t.singleGate {
		// runGate waits in the gate's Next: a command (an abort) must wake
		// it.
		t.alignCtx, t.alignCancel = context.WithCancel(ctx)
		t.ctl.setWaker(t.alignCancel)
	}
}

func (t *task) endAlignment() {
	for _, g := range t.gates {
		g.UnblockAll()
	}
	t.lastID = max(t.lastID, t.alignID)
	t.alignID = 0
	clear(t.seen)
	for id := range t.superseded {
		if id <= t.lastID {
			delete(t.superseded, id)
		}
	}
	if t.alignCancel != nil {
		t.ctl.setWaker(nil)
		t.alignCancel()
		t.alignCtx, t.alignCancel = nil, nil
	}
}

func (t *task) abandonAlignment() {
	t.log.Debug("barrier alignment abandoned", "checkpoint", t.alignID)
	t.endAlignment()
}

func (t *task) completeAlignment(ctx context.Context) error {
	id := t.alignID
	aligned := time.Since(t.alignStart)
	t.met.aligned(aligned)
	if err := t.takeCheckpoint(ctx, id, nil, aligned); err != nil {
		return err
	}
	t.endAlignment()
	return nil
}

// waitCtx is the context runGate waits for input with: while aligning, one
// that a command cancels (renewed once the command was served).
func (t *task) waitCtx(ctx context.Context) context.Context {
	if t.alignID == 0 || !t.singleGate {
		return ctx
	}
	if t.alignCtx.Err() != nil {
		t.alignCtx, t.alignCancel = context.WithCancel(ctx)
		t.ctl.setWaker(t.alignCancel)
	}
	return t.alignCtx
}

// textPosition is where a text source stands: the splits it finished and
// the unread rest of the one it reads.
func (t *task) textPosition() *checkpoint.SourcePosition {
	pos := &checkpoint.SourcePosition{Finished: slices.Clone(t.finishedSplits)}
	if t.inSplit {
		if rest, ok := t.split.Rest(t.nextOffset); ok {
			pos.Current = &rest
		} else {
			pos.Finished = append(pos.Finished, t.split.ID())
		}
	}
	return pos
}

// restoreState builds the task's State from the snapshots of Spec.Restore:
// every one whose key groups overlap the subtask's is merged in.
func (t *task) restoreState(ctx context.Context) (*wasmhost.State, error) {
	r := t.spec.Restore
	maxP := t.spec.MaxParallelism
	if maxP == 0 {
		maxP = jobgraph.DefaultMaxParallelism
	}
	start, end := keygroup.Range(t.spec.Subtask, t.spec.Parallelism, maxP)
	st := wasmhost.NewState(maxP, start, end)
	for _, h := range r.States {
		if h.Key == "" {
			continue
		}
		err := func() error {
			if t.deps.Blob == nil {
				return errNoStore
			}
			rc, err := t.deps.Blob.Get(ctx, h.Key)
			if err != nil {
				return err
			}
			defer rc.Close()
			return st.Restore(rc)
		}()
		if err != nil {
			return nil, fmt.Errorf("task %s: restore from checkpoint %d: state object %s: %w", t.spec.ExecutionID, r.CheckpointID, h.Key, err)
		}
	}
	t.log.Info("state restored", "checkpoint", r.CheckpointID, "objects", len(r.States), "key_groups", fmt.Sprintf("%d..%d", start, end))
	return st, nil
}

// collectedEntry names the collect sink's records in a subtask's operator
// state, as snapshots written before collected records travelled with the
// checkpoint acknowledgements held them (one entry per subtask). A task
// restored from such a snapshot hands them on like records it collected.
const collectedEntry = "collected-"

// restoreCollected takes the collect sink's records out of restored state.
func (t *task) restoreCollected(st *wasmhost.State) error {
	if !t.collectEnd {
		return nil
	}
	tail := t.spec.Chain[len(t.spec.Chain)-1].ID
	for _, b := range st.TakeHostEntries(tail, collectedEntry) {
		recs, err := abi.DecodeBatch(nil, b)
		if err != nil {
			return fmt.Errorf("task %s: restore collected records: %w", t.spec.ExecutionID, err)
		}
		if _, err := t.collected.add(t.spec.ExecutionID, recs); err != nil {
			return err
		}
	}
	return nil
}
