package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/jobmaster/checkpointing"
)

// The checkpoint coordinator is checkpointing.Coordinator: a state
// machine (its states are drawn in its package doc) that the loop
// goroutine feeds with events and whose commands it carries out here:
// trigger and notify RPCs, the metadata writes, sink commits and deletes
// of the blob store, and the timers. Every RPC and all blob IO run in the
// background (goBG) and come back as checkpointing events.
//
// Once its metadata is written a checkpoint exists and is the restore
// point, even before its sink parts are committed: a restore commits them
// again (Commit is idempotent), so every committed part is covered by a
// checkpoint that exists.

// Retry bounds of blob work that must eventually succeed (restore
// preparation, sink commits).
const (
	retryMin = 200 * time.Millisecond
	retryMax = 5 * time.Second
)

type savepointReply struct {
	stats checkpoint.Stats
	err   error
}

// Checkpoint events that need an answer; the others are checkpointing
// events, sent to the loop as they are.
type (
	evAck struct {
		f     control.FencingToken
		a     checkpoint.Ack
		reply chan error
	}
	evDecline struct {
		f     control.FencingToken
		d     checkpoint.Decline
		reply chan error
	}
	evSavepoint struct {
		stop, drain bool
		reply       chan savepointReply
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
	return jm.triggerSavepoint(ctx, stop, false)
}

// StopWithDrain is TriggerSavepoint with stop, after the sources sent the
// maximum watermark: every event-time timer fires (and its output is in
// the savepoint's sinks) before the barrier (Flink's stop --drain).
//
// # Errors
//
// As TriggerSavepoint.
func (jm *JobMaster) StopWithDrain(ctx context.Context) (checkpoint.Stats, error) {
	return jm.triggerSavepoint(ctx, true, true)
}

func (jm *JobMaster) triggerSavepoint(ctx context.Context, stop, drain bool) (checkpoint.Stats, error) {
	reply := make(chan savepointReply, 1)
	if !jm.send(evSavepoint{stop: stop, drain: drain, reply: reply}) {
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

// CheckpointCounts returns how many of the job's checkpoints and
// savepoints completed and failed, all of them (Checkpoints keeps the last
// 100).
func (jm *JobMaster) CheckpointCounts() checkpointing.Counts {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.cpCounts
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
func (jm *JobMaster) AcknowledgeCheckpoint(ctx context.Context, f control.FencingToken, a checkpoint.Ack) error {
	return jm.ask(ctx, func(reply chan error) any { return evAck{f: f, a: a, reply: reply} })
}

// DeclineCheckpoint records that a task could not take a checkpoint; the
// checkpoint aborts with the task's reason.
//
// # Errors
//
// As AcknowledgeCheckpoint.
func (jm *JobMaster) DeclineCheckpoint(ctx context.Context, f control.FencingToken, d checkpoint.Decline) error {
	return jm.ask(ctx, func(reply chan error) any { return evDecline{f: f, d: d, reply: reply} })
}

// handleCheckpoint dispatches the checkpoint events; false when ev is not
// one of them.
func (jm *JobMaster) handleCheckpoint(ev any) bool {
	switch ev := ev.(type) {
	case checkpointing.Event:
		switch ev := ev.(type) {
		case checkpointing.Written:
			delete(jm.cpWork, ev.ID) // the write's goroutine has returned
		case checkpointing.Committed:
			delete(jm.cpWork, ev.ID)
		}
		jm.checkpointEvent(ev)
	case evAck:
		ev.reply <- jm.onAck(ev.f, ev.a)
	case evDecline:
		ev.reply <- jm.onDecline(ev.f, ev.d)
	case evSavepoint:
		jm.lastWaiter++
		jm.waiters[jm.lastWaiter] = ev.reply
		jm.checkpointEvent(checkpointing.SavepointRequested{Stop: ev.stop, Drain: ev.drain, Waiter: jm.lastWaiter})
	default:
		return false
	}
	return true
}

// checkpointEvent feeds ev to the coordinator and carries out its
// commands, in order.
func (jm *JobMaster) checkpointEvent(ev checkpointing.Event) error {
	v := checkpointing.View{
		Attempt: jm.attempt, Running: jm.state == Running, AllRunning: jm.allRunning(), Finishing: jm.finishing,
		State: string(jm.state), Failure: jm.failure, Now: jm.cfg.Now(), Mono: time.Now(),
	}
	cmds, err := jm.cp.Handle(v, ev)
	for _, c := range cmds {
		jm.carryOut(c)
	}
	return err
}

func (jm *JobMaster) carryOut(c checkpointing.Command) {
	switch c := c.(type) {
	case checkpointing.ArmTick:
		jm.after(c.After, checkpointing.Tick{Attempt: c.Attempt})
	case checkpointing.SendTrigger:
		jm.sendTrigger(c)
	case checkpointing.ArmExpiry:
		ended := make(chan struct{})
		jm.cpExpiry[c.ID] = ended
		jm.goBG(func() {
			t := time.NewTimer(c.After)
			defer t.Stop()
			select {
			case <-t.C:
				jm.send(checkpointing.Expired{ID: c.ID})
			case <-ended:
			case <-jm.done:
			}
		})
	case checkpointing.DisarmExpiry:
		if ended := jm.cpExpiry[c.ID]; ended != nil {
			close(ended)
			delete(jm.cpExpiry, c.ID)
		}
	case checkpointing.WriteMetadata:
		jm.writeMetadata(c)
	case checkpointing.CommitSinkParts:
		jm.commitSinkParts(c)
	case checkpointing.Notify:
		if c.Completed {
			jm.records.release(c.ID)
		}
		jm.notifyCheckpoint(c.ID, c.Completed)
	case checkpointing.DeleteDirs:
		jm.deleteDirs(c.What, c.ID, c.Dirs...)
	case checkpointing.DeleteState:
		jm.deleteState(c.ID, c.Key)
	case checkpointing.AnswerSavepoint:
		if reply := jm.waiters[c.Waiter]; reply != nil {
			reply <- savepointReply{stats: c.Stats, err: c.Err}
			delete(jm.waiters, c.Waiter)
		}
	case checkpointing.StopTasks:
		jm.stopTasks()
	case checkpointing.FailJob:
		jm.fail(nil, c.Cause)
	case checkpointing.Proceed:
		jm.maybeProceed()
	default:
		panic(fmt.Sprintf("jobmaster: unknown checkpoint command %T", c))
	}
}

// cpTasks describes the attempt's executions to the coordinator.
func (jm *JobMaster) cpTasks() []checkpointing.Task {
	out := make([]checkpointing.Task, len(jm.execs))
	for i, x := range jm.execs {
		_, text := x.task.textSource()
		out[i] = checkpointing.Task{
			ExecutionID: x.id, Name: x.task.name, Subtask: x.subtask, Parallelism: x.task.parallelism,
			Vertices: vertexIDs(x.task), Source: len(x.task.inputs) == 0, TextSource: text,
		}
	}
	return out
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

// checkReport checks a task's checkpoint report like UpdateTaskState.
func (jm *JobMaster) checkReport(f control.FencingToken, execID string) error {
	if err := jm.checkFencing(f); err != nil {
		return err
	}
	if jm.byID[execID] == nil {
		return rpcerr.Errorf(rpcerr.ErrNotFound, "job %s has no execution %q in attempt %d", jm.cfg.JobID, execID, jm.attempt)
	}
	return nil
}

func (jm *JobMaster) onAck(f control.FencingToken, a checkpoint.Ack) error {
	if err := jm.checkReport(f, a.ExecutionID); err != nil {
		if errors.Is(err, rpcerr.ErrStaleFencingToken) && f.JobID == jm.cfg.JobID && f.LeaderSession == jm.cfg.LeaderSession {
			jm.checkpointEvent(checkpointing.LateAck{Ack: a}) // a zombie of an older attempt of this job
		}
		return err
	}
	jm.records.add(a.CheckpointID, a.ExecutionID, a.Collected, a.CollectedFrom)
	return jm.checkpointEvent(checkpointing.Acked{Ack: a})
}

func (jm *JobMaster) onDecline(f control.FencingToken, d checkpoint.Decline) error {
	if err := jm.checkReport(f, d.ExecutionID); err != nil {
		return err
	}
	return jm.checkpointEvent(checkpointing.Declined{Decline: d})
}

// sendTrigger calls TriggerCheckpoint on a source in the background.
func (jm *JobMaster) sendTrigger(c checkpointing.SendTrigger) {
	x := jm.byID[c.ExecutionID]
	if x == nil {
		return
	}
	addr, f := x.slot.RPCAddress, jm.fencing()
	jm.goBG(func() {
		ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
		defer cancel()
		if err := jm.cfg.Gateway.TriggerCheckpoint(ctx, addr, f, c.ExecutionID, c.Trigger); err != nil {
			jm.send(checkpointing.TriggerFailed{ID: c.Trigger.ID, ExecutionID: c.ExecutionID, Err: err})
		}
	})
}

// writeMetadata stores a checkpoint's metadata (and, for a savepoint,
// first copies its state into the savepoint's directory) in the
// background.
func (jm *JobMaster) writeMetadata(c checkpointing.WriteMetadata) {
	var released [][]byte
	released, c.Meta.RecordsReleased = jm.records.releasing(c.ID)
	if jm.cfg.CheckpointStored == nil {
		released = nil // no next leader to read them
	}
	done := make(chan struct{})
	jm.cpWork[c.ID] = done
	store, timeout, attempt := jm.cfg.Blob, jm.cfg.JobConfig.Checkpoints.Timeout, jm.attempt
	jm.goBG(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(jm.jobCtx, timeout)
		defer cancel()
		err := func() error {
			if len(released) > 0 {
				_, _, dir, err := checkpoint.ResultKeys(jm.cfg.Tenant, jm.cfg.JobID)
				if err == nil {
					err = checkpoint.PutRecords(ctx, store, checkpoint.ReleasedKey(dir, c.ID), released)
				}
				if err != nil {
					return fmt.Errorf("keep the records checkpoint %d releases: %w", c.ID, err)
				}
			}
			for _, cp := range c.Copies {
				if _, err := checkpoint.Copy(ctx, store, cp.From, cp.To); err != nil {
					return fmt.Errorf("copy %s to the savepoint: %w", cp.From, err)
				}
			}
			if sp := c.SavepointMeta; sp != nil {
				if err := checkpoint.WriteMetadata(ctx, store, c.SavepointDir, sp); err != nil {
					return fmt.Errorf("savepoint %s: %w", sp.SavepointID, err)
				}
			}
			if err := checkpoint.WriteMetadata(ctx, store, c.Dir, c.Meta); err != nil {
				return err
			}
			if stored := jm.cfg.CheckpointStored; stored != nil {
				if err := stored(ctx, c.Meta, attempt); err != nil {
					return fmt.Errorf("record checkpoint %d in the job store: %w", c.ID, err)
				}
			}
			return nil
		}()
		jm.send(checkpointing.Written{ID: c.ID, Err: err})
	})
}

// commitSinkParts commits a checkpoint's file-sink parts in the
// background, retrying until it works or the attempt ends.
func (jm *JobMaster) commitSinkParts(c checkpointing.CommitSinkParts) {
	done := make(chan struct{})
	jm.cpWork[c.ID] = done
	ctx := jm.attemptCtx
	jm.goBG(func() {
		defer close(done)
		err := jm.retry(ctx, fmt.Sprintf("commit file-sink parts of checkpoint %d", c.ID), func(ctx context.Context) error {
			return checkpoint.Commit(ctx, jm.cfg.Blob, c.Parts)
		})
		jm.send(checkpointing.Committed{ID: c.ID, Err: err})
	})
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
			if err := checkpoint.DeletePrefix(ctx, store, dir); err != nil {
				jm.log.Warn("delete "+what+" failed; will retry", "checkpoint", id, "dir", dir, "err", err)
				jm.send(checkpointing.DeleteFailed{ID: id, Dir: dir})
			}
		}
	})
}

// deleteState deletes the state object of a late ack in the background.
func (jm *JobMaster) deleteState(id int64, key string) {
	jm.goBG(func() {
		ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
		defer cancel()
		if err := jm.cfg.Blob.Delete(ctx, key); err != nil {
			jm.log.Warn("delete state of a late ack failed", "checkpoint", id, "key", key, "err", err)
		}
	})
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

// stopTasks cancels every task after a stop-with-savepoint completed; the
// job then ends FINISHED.
func (jm *JobMaster) stopTasks() {
	jm.log.Info("stopping the job after its savepoint")
	for _, x := range jm.execs {
		if !execTerminal(x.state) && x.deployAcked {
			jm.cancelExec(x)
		}
	}
	jm.after(jm.cfg.CancelTimeout, evCancelTimeout{attempt: jm.attempt})
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
	job, err := jm.keys.Job(jm.cfg.JobID)
	if err != nil {
		return err
	}
	if err := checkpoint.DeletePrefix(ctx, store, job+"pending/"); err != nil {
		return fmt.Errorf("delete uncommitted file-sink parts: %w", err)
	}
	prefix, _ := jm.keys.Checkpoints(jm.cfg.JobID)
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

// cleanupJob tidies the job's part of the store once it ended, after the
// checkpoints' own blob work has returned; best effort, and Close waits
// for it. A job that FINISHED, or was CANCELED with
// DELETE_ON_CANCELLATION, deletes its checkpoints and pending parts. One
// that FAILED, or was CANCELED with RETAIN_ON_CANCELLATION, keeps its
// retained completed checkpoints to be resumed from (sluice run
// --from-checkpoint): it commits the latest one's file-sink parts (again:
// its commit may have been cut short) and deletes everything no retained
// checkpoint needs, as a restore would. A SUSPENDED job is not passed
// here: a JobManager shutting down leaves the store as it is.
func (jm *JobMaster) cleanupJob(work []chan struct{}) {
	state := jm.state
	keep := state == Failed || (state == Canceled && jm.cfg.JobConfig.Checkpoints.KeepOnCancel())
	var latest *checkpoint.Metadata
	if l := jm.cp.Latest(); l != nil && l.JobID == jm.cfg.JobID {
		latest = l // the restore point of another job had its parts committed by our restore
	}
	retained := jm.cp.Completed()
	jm.goBG(func() {
		for _, w := range work {
			<-w
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(jm.cfg.CancelTimeout, jm.cfg.RPCTimeout))
		defer cancel()
		if err := jm.stillLeader(ctx); err != nil {
			jm.log.Warn("not tidying the ended job's checkpoints", "err", err)
			return
		}
		if keep {
			if err := jm.prepareRestore(ctx, latest, retained); err != nil {
				jm.log.Warn("tidy the job's retained checkpoints failed", "err", err)
				return
			}
			jm.log.Info("job ended with retained checkpoints", "state", state, "checkpoints", retained)
			return
		}
		cps, _ := jm.keys.Checkpoints(jm.cfg.JobID)
		job, _ := jm.keys.Job(jm.cfg.JobID)
		for _, dir := range []string{cps, job + "pending/"} {
			if err := checkpoint.DeletePrefix(ctx, jm.cfg.Blob, dir); err != nil {
				jm.log.Warn("delete the job's checkpoints failed", "dir", dir, "err", err)
			}
		}
	})
}

// stillLeader asks Config.StillLeader, when set.
func (jm *JobMaster) stillLeader(ctx context.Context) error {
	if jm.cfg.StillLeader == nil {
		return nil
	}
	return jm.cfg.StillLeader(ctx)
}

func vertexIDs(t *task) []int {
	ids := make([]int, len(t.vertices))
	for i, v := range t.vertices {
		ids[i] = v.ID
	}
	return ids
}
