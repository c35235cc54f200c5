package task

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/watermark"
	"github.com/sluicehq/sluice/tm/exchange"
)

// Event time in a task (docs/event-time.md)
//
// A source with a watermark strategy generates watermarks from the times of
// the records its chain emits (per split for a text source, one for a
// guest source) or takes them from the guest ("guest" strategy); every
// Watermarks.Interval it merges them (watermark.Splits) and sends what
// advanced. A task with inputs merges its channels (watermark.Valve). Either
// way, when the task's watermark advances to W:
//
//	guest: event timers ≤ W fire, sluice_watermark(W) ─▶ WATERMARK(W) on every output
//
// and idleness travels as WATERMARK_STATUS. The watermark is in no
// checkpoint (as in Flink): sources regenerate it after a restore, and a
// timer that fired before a checkpoint is not in it.

// eventTime is a task's watermark bookkeeping.
type eventTime struct {
	// A source's: its strategy, the merge of its splits, when it next
	// polls the merge, and the split whose records the chain emits now.
	strategy jobgraph.Watermarks
	splits   *watermark.Splits
	next     time.Time
	split    string
	guestWM  int64 // the guest source's newest watermark_emit, applied after the poll
	hasGuest bool
	// A task with inputs: the merge of its channels; gate gi's producer p
	// is channel offsets[gi]+p.
	valve   *watermark.Valve
	offsets []int
	sizes   []int
}

// initEventTime sets up the task's watermarks once its inputs are known.
func (t *task) initEventTime() error {
	if len(t.gates) > 0 {
		n := 0
		for _, in := range t.spec.Inputs {
			t.et.offsets = append(t.et.offsets, n)
			t.et.sizes = append(t.et.sizes, in.Producers)
			n += in.Producers
		}
		t.et.valve = watermark.NewValve(n)
		return nil
	}
	head := t.spec.Chain[0]
	if head.Kind != jobgraph.KindSource {
		return nil
	}
	w, err := head.Watermarks()
	if err != nil {
		return fmt.Errorf("vertex %d (%s): %w", head.ID, head.Name, err)
	}
	if !w.Enabled() {
		return nil
	}
	if t.kafka != nil && t.kafka.set.IdleTimeout > 0 {
		// The kafka source's own key: how long a partition may hold the
		// watermark back.
		w.IdleTimeout = t.kafka.set.IdleTimeout
	}
	t.et.strategy = w
	now := time.Now()
	t.et.splits = watermark.NewSplits(w, now)
	t.et.next = now.Add(w.Interval)
	return nil
}

// hostGenerated reports whether the host generates the source's
// watermarks from its records.
func (t *task) hostGenerated() bool {
	return t.et.splits != nil && t.et.strategy.Kind != jobgraph.WatermarkGuest
}

// observeEmitted feeds the times of a source chain's output to the split
// being read.
func (t *task) observeEmitted(recs []abi.Record) {
	newest, any := watermark.Min, false
	for i := range recs {
		if recs[i].HasTime {
			newest, any = max(newest, recs[i].Time), true
		}
	}
	if any {
		t.et.splits.Observe(t.et.split, newest, time.Now())
	}
}

// guestWatermark takes a guest source's watermark_emit, during its poll.
func (t *task) guestWatermark(ts int64) error {
	if !t.et.hasGuest || ts > t.et.guestWM {
		t.et.guestWM, t.et.hasGuest = ts, true
	}
	return nil
}

// sourceTick runs the periodic emission of a source's watermarks when it
// is due; force runs it now (before a checkpoint, at a split's end).
func (t *task) sourceTick(ctx context.Context, force bool) error {
	s := t.et.splits
	if s == nil {
		return nil
	}
	now := time.Now()
	if t.et.hasGuest {
		// A guest generator's watermark goes out after the poll that
		// emitted it, not at the next interval: it is punctuated.
		s.SetWatermark("", t.et.guestWM, now)
		t.et.hasGuest = false
		force = true
	}
	if !force && now.Before(t.et.next) {
		return nil
	}
	t.et.next = now.Add(t.et.strategy.Interval)
	return t.applyWatermark(ctx, s.Poll(now), true)
}

// onWatermarkEvent feeds an input event to the valve.
func (t *task) onWatermarkEvent(ctx context.Context, gi, producer int, ev exchange.Event) error {
	if t.et.valve == nil || gi >= len(t.et.offsets) || producer < 0 || producer >= t.et.sizes[gi] {
		return nil
	}
	ch := t.et.offsets[gi] + producer
	switch ev.Type {
	case exchange.Watermark:
		return t.applyWatermark(ctx, t.et.valve.Watermark(ch, ev.Timestamp), true)
	case exchange.WatermarkStatus:
		return t.applyWatermark(ctx, t.et.valve.Status(ch, ev.Idle), true)
	case exchange.EndOfPartition:
		// When the last channel ends the watermark is Max: the timers fire
		// here, but END_OF_PARTITION tells the consumers the rest (a Max
		// sent now would pass a consumer's idle channels early).
		return t.applyWatermark(ctx, t.et.valve.End(ch), false)
	}
	return nil
}

// applyWatermark acts on an update of the task's watermark: an active
// status first, then the guest's timers and the watermark, an idle status
// last.
func (t *task) applyWatermark(ctx context.Context, u watermark.Update, forward bool) error {
	if u.StatusChanged && !u.Idle && forward {
		if err := t.forwardEvent(ctx, exchange.Event{Type: exchange.WatermarkStatus}); err != nil {
			return err
		}
	}
	if u.Advanced {
		if t.inst != nil {
			if err := t.inst.AdvanceWatermark(ctx, u.Watermark); err != nil {
				return err
			}
		}
		t.met.setWatermark(u.Watermark)
		if forward {
			if err := t.forwardEvent(ctx, exchange.Event{Type: exchange.Watermark, Timestamp: u.Watermark}); err != nil {
				return err
			}
		}
	}
	if u.StatusChanged && u.Idle && forward {
		return t.forwardEvent(ctx, exchange.Event{Type: exchange.WatermarkStatus, Idle: true})
	}
	return nil
}

func (t *task) forwardEvent(ctx context.Context, ev exchange.Event) error {
	for _, w := range t.writers {
		if err := w.EmitEvent(ctx, ev); err != nil {
			return fmt.Errorf("task %s: forward %v: %w", t.spec.ExecutionID, ev, err)
		}
	}
	return nil
}

// drainWatermark is stop --drain at a source: event time ends (Max), so
// every event-time timer downstream fires before the savepoint's barrier.
func (t *task) drainWatermark(ctx context.Context) error {
	if t.inst != nil {
		if err := t.inst.AdvanceWatermark(ctx, watermark.Max); err != nil {
			return err
		}
	}
	t.met.setWatermark(watermark.Max)
	return t.forwardEvent(ctx, exchange.Event{Type: exchange.Watermark, Timestamp: watermark.Max})
}
