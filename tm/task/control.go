package task

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/checkpoint"
)

// Checkpoints receives a task's answers to checkpoints: exactly one Ack or
// Decline per checkpoint the task takes part in, in checkpoint order, all
// before Run returns. Calls come from one goroutine of the task; they
// should not block for long (tm/executor queues them behind the task's
// state reports).
type Checkpoints interface {
	Ack(ctx context.Context, a checkpoint.Ack) error
	Decline(ctx context.Context, d checkpoint.Decline) error
}

// Errors of Control.
var (
	// ErrEnded: the task no longer runs, so it takes no more commands.
	ErrEnded = errors.New("task has ended")
	// ErrBusy: the task has maxQueued commands it has not taken yet.
	ErrBusy = errors.New("task has too many checkpoint commands queued")
)

// maxQueued bounds the commands waiting for a task: a task that does not
// keep up is told so rather than buffering without bound.
const maxQueued = 256

// Control carries the JobMaster's checkpoint commands to one running task:
// triggers (for source tasks) and notifications that a checkpoint completed
// or was aborted. Its methods never block; the task takes the commands at
// its next safe point (a source between batches or polls, a task with
// inputs between input elements or while it waits for input during barrier
// alignment).
//
// Create one per task with NewControl, pass it in Deps.Control and keep it
// to deliver commands. It is safe for concurrent use.
type Control struct {
	mu     sync.Mutex
	msgs   []controlMsg
	closed bool
	waker  func() // called when a command arrives, while the task waits elsewhere

	wake      chan struct{} // cap 1: a command arrived
	queued    atomic.Int32  // len(msgs), read per record by sources
	completed atomic.Int64  // the highest checkpoint notified completed
}

type controlMsg struct {
	trigger *checkpoint.Trigger // else an abort notification
	aborted int64
}

// NewControl returns an empty Control.
func NewControl() *Control { return &Control{wake: make(chan struct{}, 1)} }

// Trigger asks a source task to take checkpoint t.ID.
//
// # Errors
//
// ErrEnded once the task has ended (a trigger still queued then is
// declined by the task), ErrBusy, or an invalid id.
func (c *Control) Trigger(t checkpoint.Trigger) error {
	if t.ID < 1 {
		return fmt.Errorf("trigger checkpoint %d: ids start at 1", t.ID)
	}
	return c.post(controlMsg{trigger: &t})
}

// Notify tells the task that checkpoint id completed (its metadata is
// written: file-sink parts it covers are committed) or was aborted (a task
// aligning its barriers gives it up; a source stopped by it resumes).
//
// # Errors
//
// ErrEnded, ErrBusy, or an invalid id.
func (c *Control) Notify(id int64, completed bool) error {
	if id < 1 {
		return fmt.Errorf("notify checkpoint %d: ids start at 1", id)
	}
	if completed {
		// Nothing waits for it: the file sink reads it when it acknowledges
		// or finishes.
		for {
			old := c.completed.Load()
			if id <= old || c.completed.CompareAndSwap(old, id) {
				break
			}
		}
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return ErrEnded
		}
		return nil
	}
	return c.post(controlMsg{aborted: id})
}

func (c *Control) post(m controlMsg) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrEnded
	}
	if len(c.msgs) >= maxQueued {
		c.mu.Unlock()
		return ErrBusy
	}
	c.msgs = append(c.msgs, m)
	c.queued.Store(int32(len(c.msgs)))
	waker := c.waker
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if waker != nil {
		waker()
	}
	return nil
}

// pending reports whether commands wait; cheap enough to call per record.
func (c *Control) pending() bool { return c.queued.Load() > 0 }

// take returns the waiting commands, oldest first.
func (c *Control) take() []controlMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.msgs
	c.msgs = nil
	c.queued.Store(0)
	return m
}

// setWaker makes every new command call f (nil: none), and calls it at
// once when commands already wait.
func (c *Control) setWaker(f func()) {
	c.mu.Lock()
	c.waker = f
	now := f != nil && len(c.msgs) > 0
	c.mu.Unlock()
	if now {
		f()
	}
}

// completedMax returns the highest checkpoint notified completed.
func (c *Control) completedMax() int64 { return c.completed.Load() }

// close refuses further commands and returns the triggers never taken.
func (c *Control) close() []checkpoint.Trigger {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.waker = nil
	var out []checkpoint.Trigger
	for _, m := range c.msgs {
		if m.trigger != nil {
			out = append(out, *m.trigger)
		}
	}
	c.msgs = nil
	c.queued.Store(0)
	return out
}

// noCheckpoints drops answers: a task run without Deps.Checkpoints.
type noCheckpoints struct{}

func (noCheckpoints) Ack(context.Context, checkpoint.Ack) error         { return nil }
func (noCheckpoints) Decline(context.Context, checkpoint.Decline) error { return nil }
