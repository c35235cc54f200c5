package executor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
)

// reporter sends one task's messages to its JobMaster in order — state
// updates, checkpoint acknowledgements and declines — each retried with
// backoff for up to a timeout, from its own goroutine so the task never
// blocks on the network. One queue keeps them in the order the task made
// them: a FINISHED update never overtakes the task's last acknowledgement.
type reporter struct {
	jms     JobMasters
	d       control.Deployment
	timeout time.Duration
	log     *slog.Logger
	// abandon cancels the task when the JobMaster rejects an update: it no
	// longer wants this execution (a newer attempt, a canceled job).
	abandon func()
	// deposed reports whether the task's JobManager has been deposed
	// (the TaskManager has seen a newer leader): nobody is left to
	// report to, and the new leader restarts the job from its checkpoint.
	deposed func() bool

	mu      sync.Mutex
	queue   []report
	closing bool
	wake    chan struct{}
	done    chan struct{}
}

// report is one queued message: exactly one field is set.
type report struct {
	update  *control.TaskUpdate
	ack     *checkpoint.Ack
	decline *checkpoint.Decline
}

func (r report) what() []any {
	switch {
	case r.update != nil:
		return []any{"state", r.update.State}
	case r.ack != nil:
		return []any{"ack", r.ack.CheckpointID}
	default:
		return []any{"decline", r.decline.CheckpointID}
	}
}

func newReporter(ctx context.Context, jms JobMasters, d control.Deployment, timeout time.Duration, log *slog.Logger, abandon func(), deposed func() bool) *reporter {
	r := &reporter{
		jms: jms, d: d, timeout: timeout, log: log, abandon: abandon, deposed: deposed,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go r.loop(ctx)
	return r
}

// send queues u; it never blocks.
func (r *reporter) send(u control.TaskUpdate) {
	u.Fencing = r.d.Fencing
	u.ExecutionID = r.d.ExecutionID
	r.enqueue(report{update: &u})
}

// Ack implements task.Checkpoints: it queues a, never blocking.
func (r *reporter) Ack(_ context.Context, a checkpoint.Ack) error {
	a.ExecutionID = r.d.ExecutionID
	r.enqueue(report{ack: &a})
	return nil
}

// Decline implements task.Checkpoints: it queues d, never blocking.
func (r *reporter) Decline(_ context.Context, d checkpoint.Decline) error {
	d.ExecutionID = r.d.ExecutionID
	r.enqueue(report{decline: &d})
	return nil
}

func (r *reporter) enqueue(rep report) {
	r.mu.Lock()
	r.queue = append(r.queue, rep)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// close waits until every queued message was sent or given up.
func (r *reporter) close() {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-r.done
}

func (r *reporter) loop(ctx context.Context) {
	defer close(r.done)
	rejected := false
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			closing := r.closing
			r.mu.Unlock()
			if closing {
				return
			}
			<-r.wake
			continue
		}
		rep := r.queue[0]
		r.queue[0] = report{}
		r.queue = r.queue[1:]
		r.mu.Unlock()
		if rejected {
			continue // the JobMaster no longer wants this execution
		}
		err := r.deliver(ctx, rep)
		switch {
		case err == nil:
		case errors.Is(err, errDeposed):
			r.log.Info("dropped a report to a deposed job manager", append(rep.what(), "session", r.d.Fencing.LeaderSession)...)
		case errors.Is(err, ErrRejected) && rep.update != nil:
			rejected = true
			r.log.Info("job master rejected the task's state update: canceling the task", append(rep.what(), "err", err)...)
			r.abandon()
		case errors.Is(err, ErrRejected):
			// An answer to a checkpoint the JobMaster has given up (aborted,
			// or of an older attempt): nothing to do; the task's fate is
			// decided by its state updates.
			r.log.Info("job master rejected a checkpoint answer", append(rep.what(), "err", err)...)
		default:
			r.log.Warn("could not report to the job master", append(rep.what(), "err", err)...)
		}
	}
}

// errDeposed: the report's JobManager was deposed while it was retried.
var errDeposed = errors.New("the job manager was deposed")

func (r *reporter) deliver(ctx context.Context, rep report) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		var err error
		switch {
		case rep.update != nil:
			err = r.jms.UpdateTaskState(ctx, r.d.JobMasterAddress, *rep.update)
		case rep.ack != nil:
			err = r.jms.AcknowledgeCheckpoint(ctx, r.d.JobMasterAddress, r.d.Fencing, *rep.ack)
		default:
			err = r.jms.DeclineCheckpoint(ctx, r.d.JobMasterAddress, r.d.Fencing, *rep.decline)
		}
		if err == nil || errors.Is(err, ErrRejected) {
			return err
		}
		if r.deposed() {
			return errDeposed
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
