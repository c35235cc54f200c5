package task

import (
	"context"
	"time"
)

// awaitSplit waits one monitor interval when the JobMaster has no split
// yet for a text source that follows its paths (or for a subtask of an
// unbounded generator beyond its timelines, which is idle meanwhile): the lines it holds go to
// the guest first, and commands (barriers, stop-with-savepoint and its
// drain) are served while it waits, as a paced source does in waitDue;
// cancel ends the wait through ctx.
func (t *task) awaitSplit(ctx context.Context, src *source, flush func() error) error {
	if err := flush(); err != nil {
		return err
	}
	every := t.followEvery
	if every <= 0 {
		// Not a following source: a subtask of an unbounded generator
		// with more subtasks than timelines, which asks again now and
		// then.
		every = time.Second
	}
	timer := time.NewTimer(every)
	defer timer.Stop()
	var tick <-chan time.Time
	if t.et.splits != nil {
		if t.nexmarkHead {
			// A subtask of an unbounded generator beyond its timelines:
			// nothing to hold event time back with.
			t.et.splits.IdleWhenEmpty()
		}
		// Idleness and watermarks go on while no split is read.
		tk := time.NewTicker(t.et.strategy.Interval)
		defer tk.Stop()
		tick = tk.C
	}
	defer t.met.idleSince(t.met.waitStart())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if err := t.sourceTick(ctx, false); err != nil {
				return err
			}
		case <-t.ctl.wake:
			if err := t.serveControl(ctx, src); err != nil {
				return err
			}
		case <-timer.C:
			return nil
		}
	}
}
