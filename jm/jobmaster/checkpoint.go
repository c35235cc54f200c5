package jobmaster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// The checkpoint coordinator. Its state lives in JobMaster.cp and, like
// the rest of the job, is owned by the loop goroutine; blob IO and RPCs run
// in the background (goBG) and come back as events.
//
// A checkpoint goes through these stages:
//
//	trigger ──► ACKING ── every execution acked ──► WRITING ── metadata written ──► COMMITTING ──► COMPLETED
//	  (sources)   │  decline, trigger RPC error,      │ (savepoint copy,               │ (file-sink parts;
//	              │  timeout, a task finished,        │  metadata last)                │  retried until done
//	              │  the attempt ended                │ write failed                   │  or the attempt ends)
//	              └───────────────────────────────────┴──► ABORTED (directory deleted, tasks told)
//
// Once its metadata is written a checkpoint exists and is the restore
// point, even before its sink parts are committed: a restore commits them
// again (Commit is idempotent), so every committed part is covered by a
// checkpoint that exists.
//
// Periodic checkpoints run only while the job is RUNNING and every
// execution of the attempt is RUNNING: none before the last task reported
// RUNNING and none after the first one FINISHED (a finished task can no
// longer acknowledge), as Flink before 1.14 (FLIP-147 added checkpoints
// after tasks finish). A checkpoint in ACKING that is missing the ack of a
// task that finishes is aborted.

// Retry bounds of blob work that must eventually succeed (restore
// preparation, sink commits).
const (
	retryMin = 200 * time.Millisecond
	retryMax = 5 * time.Second
	// maxCheckpointHistory bounds what Checkpoints returns.
	maxCheckpointHistory = 100
	// maxMissingNamed bounds the tasks an expiry message names.
	maxMissingNamed = 8
)

type cpStage int

const (
	stageAcking cpStage = iota
	stageWriting
	stageCommitting
)

// coordinator is the checkpoint coordinator's state.
type coordinator struct {
	conf    checkpoint.Config // with defaults applied
	keys    blob.Keys         // valid when the job has a blob store
	nextID  int64
	pending map[int64]*pendingCheckpoint
	// completed are the retained completed checkpoints of this job, by id.
	completed []int64
	// latest is the restore point: the newest checkpoint whose metadata is
	// written, or the Restore the job started from.
	latest *checkpoint.Metadata
	// history holds ended checkpoints, oldest first.
	history   []checkpoint.Stats
	failures  int       // periodic checkpoints failed in a row
	lastEnd   time.Time // last completion or abort (monotonic clock)
	tickArmed bool
	stopping  bool // a stop-with-savepoint completed: tasks are being canceled
	// undeleted are directories whose deletion failed (the store was
	// down): deleted again once a checkpoint completes, as the store works
	// again then.
	undeleted map[string]int64
}

// pendingCheckpoint is one checkpoint not yet completed or aborted.
type pendingCheckpoint struct {
	id        int64
	attempt   int64
	savepoint bool
	stop      bool
	spID      string
	dir       string // the checkpoint's directory
	spDir     string // savepoints: the savepoint's directory
	triggered time.Time
	began     time.Time // monotonic, for the duration
	stage     cpStage
	waiting   map[string]*execution
	acks      map[string]checkpoint.Ack
	meta      *checkpoint.Metadata
	spMeta    *checkpoint.Metadata
	// work is closed when the stage's background blob work has returned.
	work chan struct{}
	// ended is closed when the checkpoint leaves pending: it stops its
	// expiry timer.
	ended   chan struct{}
	expired bool
	reply   chan savepointReply // savepoints: the caller of TriggerSavepoint
}

func (p *pendingCheckpoint) location() string {
	if p.savepoint {
		return p.spDir
	}
	return p.dir
}

func (p *pendingCheckpoint) stats(status, reason string, end time.Time, size int64) checkpoint.Stats {
	s := checkpoint.Stats{
		ID: p.id, Savepoint: p.savepoint, SavepointID: p.spID, Status: status,
		Triggered: p.triggered, Size: size, Reason: reason, Location: p.location(),
	}
	if !end.IsZero() {
		s.Duration = end.Sub(p.triggered)
	}
	return s
}

type savepointReply struct {
	stats checkpoint.Stats
	err   error
}

// Checkpoint events.
type (
	evCheckpointTick    struct{ attempt int64 }
	evCheckpointExpired struct{ id int64 }
	evTriggerFailed     struct {
		id     int64
		execID string
		err    error
	}
	evAck struct {
		f     FencingToken
		a     checkpoint.Ack
		reply chan error
	}
	evDecline struct {
		f     FencingToken
		d     checkpoint.Decline
		reply chan error
	}
	evWritten struct {
		id  int64
		err error
	}
	evCommitted struct {
		id  int64
		err error
	}
	evSavepoint struct {
		stop  bool
		reply chan savepointReply
	}
)

// TriggerSavepoint takes a savepoint of the running job and returns once
// it completed or aborted. With stop, the sources emit nothing after the
// savepoint's barrier and, once the savepoint completes, the JobMaster
// cancels the tasks and the job ends FINISHED (Flink's
// stop-with-savepoint); use Wait for the end.
//
// A savepoint runs outside the periodic schedule, concurrently with any
// periodic checkpoint in progress (barriers stay ordered), and ignores
// MaxConcurrent and MinPause. Its failure never counts against the
// tolerable checkpoint failures. On completion it is also a completed
// checkpoint of the job (sink parts committed, restore point); its state
// is copied to the tenant's savepoints/<id>/ directory, which outlives the
// job.
//
// # Errors
//
//   - ErrFailedPrecondition: the job is not RUNNING with every task
//     RUNNING, has no blob store, or a stop-with-savepoint is under way.
//   - ErrUnavailable: the savepoint aborted (a task declined, a trigger
//     failed, the store failed); the message has the reason. A stopping
//     job keeps running.
//   - ErrDeadlineExceeded: the savepoint timed out, or ctx ended first (the
//     savepoint may still complete; see Checkpoints).
func (jm *JobMaster) TriggerSavepoint(ctx context.Context, stop bool) (checkpoint.Stats, error) {
	reply := make(chan savepointReply, 1)
	if !jm.send(evSavepoint{stop: stop, reply: reply}) {
		return checkpoint.Stats{}, jm.endedError()
	}
	select {
	case r := <-reply:
		return r.stats, r.err
	case <-ctx.Done():
		return checkpoint.Stats{}, rpcerr.Errorf(rpcerr.ErrDeadlineExceeded, "job %s: stopped waiting for the savepoint: %v (it may still complete)", jm.cfg.JobID, ctx.Err())
	}
}

// Checkpoints returns the job's checkpoints and savepoints, newest first:
// those in progress and the last 100 that ended.
func (jm *JobMaster) Checkpoints() []checkpoint.Stats {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return slices.Clone(jm.cpSnap)
}

// AcknowledgeCheckpoint records that a task has stored its state for a
// checkpoint. Every execution of the attempt acknowledges each checkpoint
// once. An ack for a checkpoint that aborted (or that the JobMaster does
// not know) is not an error: its state object is deleted.
//
// # Errors
//
//   - ErrStaleFencingToken: the ack is from another attempt or session.
//   - ErrNotFound: no such execution in this attempt.
//   - ErrInvalidArgument: the state or sink parts lie outside the job's
//     checkpoint or pending directories (the checkpoint aborts).
//   - ErrFailedPrecondition: the job has ended.
func (jm *JobMaster) AcknowledgeCheckpoint(ctx context.Context, f FencingToken, a checkpoint.Ack) error {
	return jm.ask(ctx, func(reply chan error) any { return evAck{f: f, a: a, reply: reply} })
}

// DeclineCheckpoint records that a task could not take a checkpoint; the
// checkpoint aborts with the task's reason.
//
// # Errors
//
// As AcknowledgeCheckpoint.
func (jm *JobMaster) DeclineCheckpoint(ctx context.Context, f FencingToken, d checkpoint.Decline) error {
	return jm.ask(ctx, func(reply chan error) any { return evDecline{f: f, d: d, reply: reply} })
}

// handleCheckpoint dispatches the coordinator's events; false when ev is
// not one of them.
func (jm *JobMaster) handleCheckpoint(ev any) bool {
	switch ev := ev.(type) {
	case evCheckpointTick:
		jm.onTick(ev.attempt)
	case evCheckpointExpired:
		jm.onExpired(ev.id)
	case evTriggerFailed:
		if p := jm.cp.pending[ev.id]; p != nil && p.stage == stageAcking {
			x := jm.byID[ev.execID]
			// A source that is not running (it just finished, or is not
			// there yet) is a race with its report, not a failure.
			notReady := errors.Is(ev.err, rpcerr.ErrFailedPrecondition) || errors.Is(ev.err, rpcerr.ErrNotFound)
			jm.abortCheckpoint(p, fmt.Sprintf("trigger at %s: %v", x.describe(), ev.err), !notReady)
		}
	case evAck:
		ev.reply <- jm.onAck(ev.f, ev.a)
	case evDecline:
		ev.reply <- jm.onDecline(ev.f, ev.d)
	case evWritten:
		jm.onWritten(ev.id, ev.err)
	case evCommitted:
		jm.onCommitted(ev.id, ev.err)
	case evSavepoint:
		jm.onSavepoint(ev)
	case evUndeleted:
		if jm.cp.undeleted == nil {
			jm.cp.undeleted = map[string]int64{}
		}
		jm.cp.undeleted[ev.dir] = ev.id
	default:
		return false
	}
	return true
}

func (x *execution) describe() string {
	if x == nil {
		return "an unknown task"
	}
	return fmt.Sprintf("task %q subtask %d/%d", x.task.name, x.subtask+1, x.task.parallelism)
}

// allRunning reports whether every execution of the attempt is RUNNING.
func (jm *JobMaster) allRunning() bool {
	for _, x := range jm.execs {
		if x.state != ExecRunning {
			return false
		}
	}
	return len(jm.execs) > 0
}

// armTick schedules the next periodic trigger in d, once.
func (jm *JobMaster) armTick(d time.Duration) {
	if !jm.cp.conf.Enabled() || jm.cp.tickArmed {
		return
	}
	jm.cp.tickArmed = true
	jm.after(d, evCheckpointTick{attempt: jm.attempt})
}

// maybeStartPeriodic starts the periodic schedule once every execution of
// the attempt runs: the first checkpoint an interval later.
func (jm *JobMaster) maybeStartPeriodic() {
	if jm.state == Running && jm.allRunning() && !jm.cp.stopping {
		jm.armTick(jm.cp.conf.Interval)
	}
}

func (jm *JobMaster) onTick(attempt int64) {
	if attempt != jm.attempt {
		return // a timer of an old attempt; the current one arms its own
	}
	jm.cp.tickArmed = false
	if jm.state != Running || !jm.allRunning() || jm.cp.stopping || jm.stopSavepointPending() {
		return // re-armed when every task runs again (next attempt)
	}
	conf := jm.cp.conf
	periodic := 0
	for _, p := range jm.cp.pending {
		if !p.savepoint {
			periodic++
		}
	}
	if periodic >= conf.MaxConcurrent || (conf.MinPause > 0 && periodic > 0) {
		jm.armTick(conf.Interval)
		return
	}
	if conf.MinPause > 0 && !jm.cp.lastEnd.IsZero() {
		if wait := conf.MinPause - time.Since(jm.cp.lastEnd); wait > 0 {
			jm.armTick(wait)
			return
		}
	}
	jm.triggerCheckpoint(false, false)
	jm.armTick(conf.Interval)
}

// stopSavepointPending reports whether a stop-with-savepoint is under way:
// its sources emit no further barriers, so no checkpoint may start.
func (jm *JobMaster) stopSavepointPending() bool {
	for _, p := range jm.cp.pending {
		if p.stop {
			return true
		}
	}
	return false
}

// triggerCheckpoint starts a checkpoint at every source execution.
func (jm *JobMaster) triggerCheckpoint(savepoint, stop bool) (*pendingCheckpoint, error) {
	id := jm.cp.nextID
	dir, err := jm.cp.keys.Checkpoint(jm.cfg.JobID, uint64(id))
	if err != nil {
		return nil, err
	}
	jm.cp.nextID++
	now := jm.cfg.Now()
	p := &pendingCheckpoint{
		id: id, attempt: jm.attempt, savepoint: savepoint, stop: stop, dir: dir,
		triggered: now, began: time.Now(), stage: stageAcking,
		waiting: map[string]*execution{}, acks: map[string]checkpoint.Ack{},
		ended: make(chan struct{}),
	}
	if savepoint {
		p.spID = newSavepointID()
		if p.spDir, err = jm.cp.keys.Savepoint(p.spID); err != nil {
			return nil, err
		}
	}
	for _, x := range jm.execs {
		p.waiting[x.id] = x
	}
	jm.cp.pending[id] = p
	t := checkpoint.Trigger{ID: id, TimestampMs: now.UnixMilli(), Savepoint: savepoint, Stop: stop}
	f := jm.fencing()
	sources := 0
	for _, x := range jm.execs {
		if len(x.task.inputs) > 0 {
			continue
		}
		sources++
		addr, execID := x.slot.RPCAddress, x.id
		jm.goBG(func() {
			ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
			defer cancel()
			if err := jm.cfg.Gateway.TriggerCheckpoint(ctx, addr, f, execID, t); err != nil {
				jm.send(evTriggerFailed{id: id, execID: execID, err: err})
			}
		})
	}
	jm.goBG(func() {
		t := time.NewTimer(jm.cp.conf.Timeout)
		defer t.Stop()
		select {
		case <-t.C:
			jm.send(evCheckpointExpired{id: id})
		case <-p.ended:
		case <-jm.done:
		}
	})
	jm.log.Info("checkpoint triggered", "checkpoint", id, "savepoint", savepoint, "stop", stop, "attempt", jm.attempt, "sources", sources)
	return p, nil
}

func newSavepointID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sp-" + hex.EncodeToString(b[:])
}

func (jm *JobMaster) onSavepoint(ev evSavepoint) {
	fail := func(format string, args ...any) {
		ev.reply <- savepointReply{err: rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "job %s: "+format, append([]any{jm.cfg.JobID}, args...)...)}
	}
	switch {
	case jm.cfg.Blob == nil:
		fail("no blob store to keep savepoints in: configure the JobManager's blob store")
	case jm.state != Running || jm.cp.stopping || jm.finishing:
		fail("cannot take a savepoint while the job is %s: wait until it is RUNNING", jm.stateWord())
	case !jm.allRunning():
		fail("cannot take a savepoint until every task is RUNNING (some are deploying or have finished)")
	case jm.stopSavepointPending():
		fail("a stop-with-savepoint is in progress")
	default:
		p, err := jm.triggerCheckpoint(true, ev.stop)
		if err != nil {
			ev.reply <- savepointReply{err: rpcerr.Errorf(rpcerr.ErrInternal, "job %s: savepoint: %v", jm.cfg.JobID, err)}
			return
		}
		p.reply = ev.reply
	}
}

func (jm *JobMaster) stateWord() string {
	switch {
	case jm.finishing:
		return "finishing"
	case jm.cp.stopping:
		return "stopping"
	}
	return string(jm.state)
}

func (jm *JobMaster) onExpired(id int64) {
	p := jm.cp.pending[id]
	if p == nil || p.stage != stageAcking {
		return
	}
	var missing []string
	for _, x := range jm.execs {
		if _, ok := p.waiting[x.id]; ok {
			missing = append(missing, fmt.Sprintf("%q %d/%d", x.task.name, x.subtask+1, x.task.parallelism))
		}
	}
	if n := len(missing); n > maxMissingNamed {
		missing = append(missing[:maxMissingNamed], fmt.Sprintf("and %d more", n-maxMissingNamed))
	}
	p.expired = true
	jm.abortCheckpoint(p, fmt.Sprintf("checkpoint %d expired after %v before all tasks acknowledged (missing: %s)", id, jm.cp.conf.Timeout, strings.Join(missing, ", ")), true)
}

// checkReport checks a task's checkpoint report like UpdateTaskState.
func (jm *JobMaster) checkReport(f FencingToken, execID string) (*execution, error) {
	if err := jm.checkFencing(f); err != nil {
		return nil, err
	}
	x := jm.byID[execID]
	if x == nil {
		return nil, rpcerr.Errorf(rpcerr.ErrNotFound, "job %s has no execution %q in attempt %d", jm.cfg.JobID, execID, jm.attempt)
	}
	return x, nil
}

func (jm *JobMaster) onAck(f FencingToken, a checkpoint.Ack) error {
	x, err := jm.checkReport(f, a.ExecutionID)
	if err != nil {
		if errors.Is(err, rpcerr.ErrStaleFencingToken) && f.JobID == jm.cfg.JobID && f.LeaderSession == jm.cfg.LeaderSession {
			jm.discardAck(a) // a zombie of an older attempt of this job
		}
		return err
	}
	p := jm.cp.pending[a.CheckpointID]
	if p == nil || p.stage != stageAcking {
		jm.discardAck(a)
		return nil
	}
	if _, ok := p.waiting[x.id]; !ok {
		return nil // a repeated ack
	}
	if err := jm.checkAck(p, a); err != nil {
		jm.abortCheckpoint(p, fmt.Sprintf("%s sent a bad acknowledgement: %v", x.describe(), err), true)
		return err
	}
	delete(p.waiting, x.id)
	p.acks[x.id] = a
	if len(p.waiting) == 0 {
		jm.writeCheckpoint(p)
	}
	return nil
}

// checkAck makes sure an ack names only objects the checkpoint may own or
// commit, so a faulty task cannot make the JobMaster copy or delete other
// keys of the store.
func (jm *JobMaster) checkAck(p *pendingCheckpoint, a checkpoint.Ack) error {
	if a.State != nil && (!strings.HasPrefix(a.State.Key, p.dir) || a.State.KeyGroupStart > a.State.KeyGroupEnd) {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "state %q (key groups %d..%d) is not in the checkpoint's directory %s",
			a.State.Key, a.State.KeyGroupStart, a.State.KeyGroupEnd, p.dir)
	}
	return jm.checkSinkParts(a.SinkParts)
}

// checkSinkParts requires pending parts under the job's pending directory
// and final parts under the tenant's files.
func (jm *JobMaster) checkSinkParts(parts []checkpoint.SinkPart) error {
	if len(parts) == 0 {
		return nil
	}
	job, _ := jm.cp.keys.Job(jm.cfg.JobID)
	files := jm.cp.keys.Prefix() + "files/"
	for _, sp := range parts {
		if !strings.HasPrefix(sp.Pending, job+"pending/") || !strings.HasPrefix(sp.Final, files) {
			return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "file-sink part %q -> %q: want a pending key under %spending/ and a final key under %s", sp.Pending, sp.Final, job, files)
		}
	}
	return nil
}

// discardAck deletes the state object of an ack that arrived too late:
// its checkpoint aborted (or never existed here).
func (jm *JobMaster) discardAck(a checkpoint.Ack) {
	if a.State == nil || jm.cfg.Blob == nil || jm.cp.pending[a.CheckpointID] != nil || slices.Contains(jm.cp.completed, a.CheckpointID) || a.CheckpointID < 1 {
		return
	}
	dir, err := jm.cp.keys.Checkpoint(jm.cfg.JobID, uint64(a.CheckpointID))
	if err != nil || !strings.HasPrefix(a.State.Key, dir) {
		return
	}
	key := a.State.Key
	jm.log.Info("late checkpoint ack: deleting its state", "checkpoint", a.CheckpointID, "execution", a.ExecutionID, "key", key)
	jm.goBG(func() {
		ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
		defer cancel()
		if err := jm.cfg.Blob.Delete(ctx, key); err != nil {
			jm.log.Warn("delete state of a late ack failed", "checkpoint", a.CheckpointID, "key", key, "err", err)
		}
	})
}

func (jm *JobMaster) onDecline(f FencingToken, d checkpoint.Decline) error {
	x, err := jm.checkReport(f, d.ExecutionID)
	if err != nil {
		return err
	}
	if p := jm.cp.pending[d.CheckpointID]; p != nil && p.stage == stageAcking {
		jm.abortCheckpoint(p, fmt.Sprintf("%s declined: %s", x.describe(), d.Reason), true)
	}
	return nil
}

// buildMetadata is the metadata of p once every execution acked.
func (jm *JobMaster) buildMetadata(p *pendingCheckpoint) *checkpoint.Metadata {
	m := &checkpoint.Metadata{
		JobID: jm.cfg.JobID, Tenant: jm.cfg.Tenant, ID: p.id,
		ModuleDigest: jm.cfg.ModuleDigest, MaxParallelism: jobgraph.MaxParallelismOf(jm.cfg.Graph),
		TriggeredMs: p.triggered.UnixMilli(), CompletedMs: jm.cfg.Now().UnixMilli(),
	}
	seen := map[string]bool{}
	positions := map[int][]checkpoint.SourcePosition{}
	for _, x := range jm.execs {
		a := p.acks[x.id]
		if a.State != nil {
			m.Tasks = append(m.Tasks, checkpoint.TaskState{Vertices: vertexIDs(x.task), Subtask: x.subtask, Parallelism: x.task.parallelism, State: *a.State})
		}
		if v, ok := x.task.textSource(); ok && a.Source != nil {
			positions[v.ID] = append(positions[v.ID], *a.Source)
		}
		for _, sp := range a.SinkParts {
			if !seen[sp.Pending] {
				seen[sp.Pending] = true
				m.SinkParts = append(m.SinkParts, sp)
			}
		}
	}
	for _, t := range jm.tasks {
		v, ok := t.textSource()
		if !ok {
			continue
		}
		if m.Sources == nil {
			m.Sources = map[int][]checkpoint.Split{}
		}
		rest := checkpoint.RemainingSplits(toCheckpointSplits(jm.base[v.ID]), positions[v.ID])
		if rest == nil {
			rest = []checkpoint.Split{} // "nothing left", not "unknown"
		}
		m.Sources[v.ID] = rest
	}
	return m
}

// writeCheckpoint stores p's metadata (and, for a savepoint, first copies
// its state into the savepoint's directory) in the background.
func (jm *JobMaster) writeCheckpoint(p *pendingCheckpoint) {
	p.stage = stageWriting
	p.meta = jm.buildMetadata(p)
	done := make(chan struct{})
	p.work = done
	store, meta, id := jm.cfg.Blob, p.meta, p.id
	savepoint, dir, spDir, spID := p.savepoint, p.dir, p.spDir, p.spID
	timeout := jm.cp.conf.Timeout
	jm.goBG(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(jm.jobCtx, timeout)
		defer cancel()
		err := func() error {
			if savepoint {
				sp := *meta
				sp.Savepoint, sp.SavepointID = true, spID
				sp.Tasks = slices.Clone(meta.Tasks)
				for i := range sp.Tasks {
					from := sp.Tasks[i].State.Key
					to := spDir + strings.TrimPrefix(from, dir)
					if _, err := checkpoint.Copy(ctx, store, from, to); err != nil {
						return fmt.Errorf("copy %s to the savepoint: %w", from, err)
					}
					sp.Tasks[i].State.Key = to
				}
				if err := checkpoint.WriteMetadata(ctx, store, spDir, &sp); err != nil {
					return fmt.Errorf("savepoint %s: %w", spID, err)
				}
			}
			return checkpoint.WriteMetadata(ctx, store, dir, meta)
		}()
		jm.send(evWritten{id: id, err: err})
	})
}

func (jm *JobMaster) onWritten(id int64, err error) {
	p := jm.cp.pending[id]
	if p == nil || p.stage != stageWriting {
		return
	}
	p.work = nil
	if err != nil {
		jm.abortCheckpoint(p, err.Error(), true)
		jm.maybeProceed()
		return
	}
	// The checkpoint exists: it is the restore point from now on.
	if l := jm.cp.latest; l == nil || l.JobID != jm.cfg.JobID || p.id > l.ID {
		jm.cp.latest = p.meta
	}
	if !slices.Contains(jm.cp.completed, id) {
		jm.cp.completed = append(jm.cp.completed, id)
		slices.Sort(jm.cp.completed)
	}
	if len(p.meta.SinkParts) == 0 || p.attempt != jm.attempt || jm.state != Running {
		// Nothing to commit, or the attempt ended: a restore commits the
		// parts again.
		jm.completeCheckpoint(p)
		return
	}
	p.stage = stageCommitting
	done := make(chan struct{})
	p.work = done
	parts := p.meta.SinkParts
	ctx := jm.attemptCtx
	jm.goBG(func() {
		defer close(done)
		err := jm.retry(ctx, fmt.Sprintf("commit file-sink parts of checkpoint %d", id), func(ctx context.Context) error {
			return checkpoint.Commit(ctx, jm.cfg.Blob, parts)
		})
		jm.send(evCommitted{id: id, err: err})
	})
}

func (jm *JobMaster) onCommitted(id int64, err error) {
	p := jm.cp.pending[id]
	if p == nil || p.stage != stageCommitting {
		return
	}
	p.work = nil
	if err != nil {
		// Only when the attempt ended: its metadata exists, so it stays the
		// restore point and the restore commits the parts.
		jm.log.Info("checkpoint commit interrupted; the restore commits its parts", "checkpoint", id, "err", err)
	}
	jm.completeCheckpoint(p)
}

// completeCheckpoint marks p COMPLETED: tasks are told, old checkpoints
// deleted, a savepoint's caller answered.
func (jm *JobMaster) completeCheckpoint(p *pendingCheckpoint) {
	jm.endPending(p)
	now := jm.cfg.Now()
	jm.cp.lastEnd = time.Now()
	jm.cp.failures = 0
	size := p.meta.Size()
	st := p.stats(checkpoint.StatusCompleted, "", now, size)
	jm.record(st)
	live := p.attempt == jm.attempt && jm.state == Running
	if live {
		jm.notifyCheckpoint(p.id, true)
	}
	jm.log.Info("checkpoint completed", "checkpoint", p.id, "savepoint", p.savepoint, "size", size, "duration", time.Since(p.began), "location", p.location())
	jm.retain()
	for dir, id := range jm.cp.undeleted {
		jm.deleteDirs("aborted checkpoint (again)", id, dir)
	}
	clear(jm.cp.undeleted)
	if p.reply != nil {
		if p.stop && !live {
			p.reply <- savepointReply{stats: st, err: rpcerr.Errorf(rpcerr.ErrUnavailable,
				"savepoint %s completed at %s but the job failed before it could stop (%s): it keeps running from its restart", p.spID, p.spDir, jm.failure)}
		} else {
			p.reply <- savepointReply{stats: st}
		}
	}
	if p.stop && live && !jm.finishing {
		jm.stopTasks()
	}
	jm.maybeProceed()
}

// retain deletes the completed checkpoints beyond Retained, oldest first,
// never the restore point.
func (jm *JobMaster) retain() {
	for len(jm.cp.completed) > jm.cp.conf.Retained {
		id := jm.cp.completed[0]
		if l := jm.cp.latest; l != nil && l.JobID == jm.cfg.JobID && l.ID == id {
			break
		}
		jm.cp.completed = jm.cp.completed[1:]
		dir, err := jm.cp.keys.Checkpoint(jm.cfg.JobID, uint64(id))
		if err != nil {
			continue
		}
		jm.deleteDirs("subsumed checkpoint", id, dir)
	}
}

// evUndeleted reports a directory whose deletion failed.
type evUndeleted struct {
	id  int64
	dir string
}

// deleteDirs deletes checkpoint or savepoint directories in the background;
// one that cannot be deleted now is tried again after the next completed
// checkpoint.
func (jm *JobMaster) deleteDirs(what string, id int64, dirs ...string) {
	store := jm.cfg.Blob
	jm.goBG(func() {
		ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.CancelTimeout)
		defer cancel()
		for _, dir := range dirs {
			if dir == "" {
				continue
			}
			if err := checkpoint.DeletePrefix(ctx, store, dir); err != nil {
				jm.log.Warn("delete "+what+" failed; will retry", "checkpoint", id, "dir", dir, "err", err)
				jm.send(evUndeleted{id: id, dir: dir})
			}
		}
	})
}

// abortCheckpoint ends p as ABORTED. counted failures of periodic
// checkpoints count towards TolerableFailures.
func (jm *JobMaster) abortCheckpoint(p *pendingCheckpoint, reason string, counted bool) {
	jm.endPending(p)
	jm.cp.lastEnd = time.Now()
	jm.record(p.stats(checkpoint.StatusAborted, reason, jm.cfg.Now(), 0))
	jm.log.Warn("checkpoint aborted", "checkpoint", p.id, "savepoint", p.savepoint, "reason", reason)
	if p.attempt == jm.attempt {
		jm.notifyCheckpoint(p.id, false)
	}
	if jm.cfg.Blob != nil {
		spDir := ""
		if p.stage == stageWriting {
			spDir = p.spDir // the copy may have started
		}
		jm.deleteDirs("aborted checkpoint", p.id, p.dir, spDir)
	}
	if p.reply != nil {
		kind := rpcerr.ErrUnavailable
		if p.expired {
			kind = rpcerr.ErrDeadlineExceeded
		}
		p.reply <- savepointReply{stats: p.stats(checkpoint.StatusAborted, reason, jm.cfg.Now(), 0),
			err: rpcerr.Errorf(kind, "savepoint of job %s aborted: %s", jm.cfg.JobID, reason)}
	}
	if !counted || p.savepoint {
		return
	}
	jm.cp.failures++
	if k := jm.cp.conf.TolerableFailures; k >= 0 && jm.cp.failures > k {
		jm.cp.failures = 0 // the next attempt gets its own allowance
		jm.fail(nil, fmt.Sprintf("checkpoint %d failed: %s (more than %d checkpoints failed in a row)", p.id, reason, k))
	}
}

// endPending removes p from the pending checkpoints.
func (jm *JobMaster) endPending(p *pendingCheckpoint) {
	delete(jm.cp.pending, p.id)
	close(p.ended)
}

// abortInProgress aborts the checkpoints still collecting acks, because
// the attempt ends. Those already writing finish: they are complete.
func (jm *JobMaster) abortInProgress(reason string) {
	for _, id := range jm.pendingIDs() {
		if p := jm.cp.pending[id]; p != nil && p.stage == stageAcking {
			jm.abortCheckpoint(p, reason, false)
		}
	}
}

func (jm *JobMaster) pendingIDs() []int64 {
	ids := make([]int64, 0, len(jm.cp.pending))
	for id := range jm.cp.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// execEndedBeforeAck aborts the checkpoints that wait for x, which will
// never acknowledge them.
func (jm *JobMaster) execEndedBeforeAck(x *execution) {
	for _, id := range jm.pendingIDs() {
		p := jm.cp.pending[id]
		if _, waiting := p.waiting[x.id]; waiting && p.stage == stageAcking {
			jm.abortCheckpoint(p, fmt.Sprintf("%s finished before it acknowledged checkpoint %d (no checkpoints once a task finished)", x.describe(), id), false)
		}
	}
}

// notifyCheckpoint tells every live execution of the attempt, best effort.
func (jm *JobMaster) notifyCheckpoint(id int64, completed bool) {
	f := jm.fencing()
	for _, x := range jm.execs {
		if execTerminal(x.state) || !x.deployAcked {
			continue
		}
		addr, execID := x.slot.RPCAddress, x.id
		jm.goBG(func() {
			ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
			defer cancel()
			if err := jm.cfg.Gateway.NotifyCheckpoint(ctx, addr, f, execID, id, completed); err != nil {
				jm.log.Debug("notify checkpoint failed", "checkpoint", id, "execution", execID, "err", err)
			}
		})
	}
}

// record adds an ended checkpoint to the history.
func (jm *JobMaster) record(s checkpoint.Stats) {
	jm.cp.history = append(jm.cp.history, s)
	if n := len(jm.cp.history) - maxCheckpointHistory; n > 0 {
		jm.cp.history = slices.Delete(jm.cp.history, 0, n)
	}
}

// checkpointStats is what Checkpoints shows, newest first.
func (jm *JobMaster) checkpointStats() []checkpoint.Stats {
	out := make([]checkpoint.Stats, 0, len(jm.cp.history)+len(jm.cp.pending))
	out = append(out, jm.cp.history...)
	for _, p := range jm.cp.pending {
		out = append(out, p.stats(checkpoint.StatusInProgress, "", time.Time{}, 0))
	}
	slices.SortFunc(out, func(a, b checkpoint.Stats) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > maxCheckpointHistory {
		out = out[:maxCheckpointHistory]
	}
	return out
}

// stopTasks cancels every task after a stop-with-savepoint completed; the
// job then ends FINISHED.
func (jm *JobMaster) stopTasks() {
	jm.cp.stopping = true
	jm.log.Info("stopping the job after its savepoint")
	for _, x := range jm.execs {
		if !execTerminal(x.state) && x.deployAcked {
			jm.cancelExec(x)
		}
	}
	jm.after(jm.cfg.CancelTimeout, evCancelTimeout{attempt: jm.attempt})
}

// blobWork returns the done channels of the background blob work of the
// checkpoints still pending.
func (jm *JobMaster) blobWork() []chan struct{} {
	var out []chan struct{}
	for _, p := range jm.cp.pending {
		if p.work != nil {
			out = append(out, p.work)
		}
	}
	return out
}

// writing reports whether some checkpoint is writing or committing.
func (jm *JobMaster) writing() bool {
	for _, p := range jm.cp.pending {
		if p.stage != stageAcking {
			return true
		}
	}
	return false
}

// retry runs f until it succeeds or ctx ends, waiting retryMin, doubling
// up to retryMax, between tries. It returns f's last error when ctx ended.
func (jm *JobMaster) retry(ctx context.Context, what string, f func(context.Context) error) error {
	wait := retryMin
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		jm.log.Warn(what+" failed; retrying", "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, retryMax)
	}
}

// prepareRestore readies the store for an attempt: it commits the restore
// point's sink parts (again), deletes the job's pending parts left after
// that (they belong to checkpoints that never completed), and deletes
// every checkpoint directory of the job that is not a retained completed
// checkpoint (leftovers of aborts raced by slow uploads).
func (jm *JobMaster) prepareRestore(ctx context.Context, meta *checkpoint.Metadata, keep []int64) error {
	store := jm.cfg.Blob
	if meta != nil {
		if err := checkpoint.Commit(ctx, store, meta.SinkParts); err != nil {
			return err
		}
	}
	job, err := jm.cp.keys.Job(jm.cfg.JobID)
	if err != nil {
		return err
	}
	if err := checkpoint.DeletePrefix(ctx, store, job+"pending/"); err != nil {
		return fmt.Errorf("delete uncommitted file-sink parts: %w", err)
	}
	prefix, _ := jm.cp.keys.Checkpoints(jm.cfg.JobID)
	var stale []string
	for o, err := range blob.All(ctx, store, prefix) {
		if err != nil {
			return fmt.Errorf("list checkpoints: %w", err)
		}
		seg, _, ok := strings.Cut(strings.TrimPrefix(o.Key, prefix), "/")
		if !ok {
			continue
		}
		n, err := blob.ParseCheckpoint(seg)
		if err != nil || slices.Contains(keep, int64(n)) {
			continue
		}
		if dir := prefix + seg + "/"; !slices.Contains(stale, dir) {
			stale = append(stale, dir)
		}
	}
	for _, dir := range stale {
		if err := checkpoint.DeletePrefix(ctx, store, dir); err != nil {
			return fmt.Errorf("delete unfinished checkpoint %s: %w", dir, err)
		}
		jm.log.Info("deleted unfinished checkpoint", "dir", dir)
	}
	return nil
}

// cleanupJob deletes the job's checkpoints and pending parts once it ended
// FINISHED or CANCELED (kept on FAILED and SUSPENDED, to resume from),
// after the checkpoints' own blob work has returned. Best effort; Close
// waits for it.
func (jm *JobMaster) cleanupJob(work []chan struct{}) {
	jm.goBG(func() {
		for _, w := range work {
			<-w
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(jm.cfg.CancelTimeout, jm.cfg.RPCTimeout))
		defer cancel()
		cps, _ := jm.cp.keys.Checkpoints(jm.cfg.JobID)
		job, _ := jm.cp.keys.Job(jm.cfg.JobID)
		for _, dir := range []string{cps, job + "pending/"} {
			if err := checkpoint.DeletePrefix(ctx, jm.cfg.Blob, dir); err != nil {
				jm.log.Warn("delete the job's checkpoints failed", "dir", dir, "err", err)
			}
		}
	})
}

func vertexIDs(t *task) []int {
	ids := make([]int, len(t.vertices))
	for i, v := range t.vertices {
		ids[i] = v.ID
	}
	return ids
}

func toCheckpointSplits(s []Split) []checkpoint.Split {
	out := make([]checkpoint.Split, len(s))
	for i := range s {
		out[i] = checkpoint.Split(s[i])
	}
	return out
}

func fromCheckpointSplits(s []checkpoint.Split) []Split {
	out := make([]Split, len(s))
	for i := range s {
		out[i] = Split(s[i])
	}
	return out
}
