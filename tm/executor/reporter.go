package executor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// reporter sends one task's state updates to its JobMaster in order, each
// retried with backoff for up to a timeout, from its own goroutine so the
// task never blocks on the network.
type reporter struct {
	jms     JobMasters
	d       Deployment
	timeout time.Duration
	log     *slog.Logger
	// abandon cancels the task when the JobMaster rejects an update: it no
	// longer wants this execution (a newer attempt, a canceled job).
	abandon func()

	mu      sync.Mutex
	queue   []TaskStateUpdate
	closing bool
	wake    chan struct{}
	done    chan struct{}
}

func newReporter(ctx context.Context, jms JobMasters, d Deployment, timeout time.Duration, log *slog.Logger, abandon func()) *reporter {
	r := &reporter{
		jms: jms, d: d, timeout: timeout, log: log, abandon: abandon,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go r.loop(ctx)
	return r
}

// send queues u; it never blocks.
func (r *reporter) send(u TaskStateUpdate) {
	u.Fencing = r.d.Fencing
	u.ExecutionID = r.d.ExecutionID
	r.mu.Lock()
	r.queue = append(r.queue, u)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// close waits until every queued update was sent or given up.
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
		u := r.queue[0]
		r.queue = r.queue[1:]
		r.mu.Unlock()
		if rejected {
			continue // the JobMaster no longer wants this execution
		}
		if err := r.deliver(ctx, u); err != nil {
			if errors.Is(err, ErrRejected) {
				rejected = true
				r.log.Info("job master rejected the task's state update: canceling the task", "state", u.State, "err", err)
				r.abandon()
				continue
			}
			r.log.Warn("could not report task state", "state", u.State, "err", err)
		}
	}
}

func (r *reporter) deliver(ctx context.Context, u TaskStateUpdate) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		err := r.jms.UpdateTaskState(ctx, r.d.JobMasterAddress, u)
		if err == nil || errors.Is(err, ErrRejected) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
