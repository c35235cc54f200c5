package guest

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Event time (docs/event-time.md): a source declares how its watermarks
// are made; records carry their event time in Record.Time (HasTime); a
// keyed Process reads the task's watermark and registers event-time timers
// that fire when the watermark passes them.

// WatermarkStrategy is how a source's watermarks are made: build one with
// BoundedOutOfOrderness, Monotonous or GuestWatermarks and pass it to
// Stream.WithWatermarks. It is immutable; its With methods return a copy.
type WatermarkStrategy struct{ w jobgraph.Watermarks }

// BoundedOutOfOrderness makes the host generate watermarks from the times
// of the records the source emits: the newest time seen minus d minus 1 ms,
// per split. A record more than d behind the newest is late.
func BoundedOutOfOrderness(d time.Duration) WatermarkStrategy {
	return WatermarkStrategy{jobgraph.Watermarks{Kind: jobgraph.WatermarkBounded, MaxOutOfOrderness: d}}
}

// Monotonous is for sources whose record times never go back: the
// watermark is the newest time seen minus 1 ms.
func Monotonous() WatermarkStrategy {
	return WatermarkStrategy{jobgraph.Watermarks{Kind: jobgraph.WatermarkMonotonous}}
}

// GuestWatermarks makes a Go source emit its watermarks itself, with
// Context.EmitWatermark, for example from markers in its input.
func GuestWatermarks() WatermarkStrategy {
	return WatermarkStrategy{jobgraph.Watermarks{Kind: jobgraph.WatermarkGuest}}
}

// WithIdleness marks a split (or a Go source subtask) idle after d without
// records, so that it stops holding the watermark back downstream until
// its next record. Without it a silent split stalls event time.
func (s WatermarkStrategy) WithIdleness(d time.Duration) WatermarkStrategy {
	s.w.IdleTimeout = d
	return s
}

// WithInterval sets how often, in processing time, the host sends the
// watermark downstream when it advanced (default 200 ms).
func (s WatermarkStrategy) WithInterval(d time.Duration) WatermarkStrategy {
	s.w.Interval = d
	return s
}

// WithWatermarks declares the source's watermark strategy. Only sources
// take one; the cluster checks the durations when the job is submitted.
func (s *Stream) WithWatermarks(w WatermarkStrategy) *Stream {
	if s.op.kind != jobgraph.KindSource {
		s.env.fail("WithWatermarks on %q: only sources generate watermarks; declare them on the source", s.op.name)
		return s
	}
	if w.w.Kind == jobgraph.WatermarkNone {
		s.env.fail("WithWatermarks on %q: build the strategy with BoundedOutOfOrderness, Monotonous or GuestWatermarks", s.op.name)
		return s
	}
	if w.w.Kind == jobgraph.WatermarkGuest && s.op.connector != "" {
		s.env.fail("WithWatermarks on %q: GuestWatermarks needs a Go source (env.Source); the %s connector's come from the host: use BoundedOutOfOrderness or Monotonous", s.op.name, s.op.connector)
		return s
	}
	v := jobgraph.Vertex{Config: s.op.config}
	v.SetWatermarks(w.w)
	s.op.config = v.Config
	return s
}

// Watermark returns the task's current watermark in milliseconds since the
// Unix epoch: no record with a time at or below it is expected any more.
// It is math.MinInt64 before the first watermark.
func (c *Context) Watermark() int64 { return hostWatermark() }

// EmitWatermark is a Go source's own watermark (GuestWatermarks): no record
// it emits from now on has a time at or below ts. Call it from the
// SourceFunc; a lower ts than before is ignored.
func (c *Context) EmitWatermark(ts int64) {
	if c.op.kind != jobgraph.KindSource || c.op.connector != "" {
		panic(fmt.Sprintf("EmitWatermark in %q: only Go sources emit watermarks", c.op.name))
	}
	hostWatermarkEmit(ts)
}

// RegisterEventTimer asks for the operator's OnEventTimer callback to run
// for the current key once the watermark reaches timeMs. Registering the
// same time twice for a key gives one call. Event timers are keyed state:
// they are in checkpoints and move with their key group on rescale.
func (k *KeyedContext) RegisterEventTimer(timeMs int64) {
	if k.op.eventTimer == nil {
		panic(fmt.Sprintf("RegisterEventTimer in %q: give the operator an OnEventTimer callback first", k.op.name))
	}
	hostEventTimerRegister(int32(k.op.id), k.key, timeMs)
}

// DeleteEventTimer cancels an event-time timer registered for the current
// key.
func (k *KeyedContext) DeleteEventTimer(timeMs int64) {
	hostEventTimerDelete(int32(k.op.id), k.key, timeMs)
}

// OnEventTimer sets the event-time timer callback of a Process operator:
// it runs for each timer the watermark passed, earliest first, before the
// watermark goes downstream (so what it emits is on time there).
func (s *Stream) OnEventTimer(fn TimerFunc) *Stream {
	if s.op.kind != jobgraph.KindProcess {
		s.env.fail("OnEventTimer on %q: only Process operators have timers", s.op.name)
	}
	if s.op.window != nil {
		s.env.fail("OnEventTimer on %q: a window operator's timers are its own", s.op.name)
		return s
	}
	if s.op.interval != nil {
		s.env.fail("OnEventTimer on %q: an interval join's timers are its own", s.op.name)
		return s
	}
	s.op.eventTimer = fn
	return s
}

func doEventTimers(batch []byte) int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return failf("event timers before open")
		}
		var err error
		if t.recs, err = abi.DecodeBatch(t.recs[:0], batch); err != nil {
			return failf("event timers: %v", err)
		}
		for _, r := range t.recs {
			if len(r.Value) != 4 {
				return failf("event timers: a timer's value must be its 4-byte vertex id")
			}
			id := int(binary.LittleEndian.Uint32(r.Value))
			var ps *processStage
			for i, o := range t.ops {
				if o.id == id {
					ps, _ = t.stages[i].(*processStage)
				}
			}
			if ps == nil || ps.op.eventTimer == nil {
				return failf("event timers: vertex %d is not a process operator with OnEventTimer in this task", id)
			}
			ps.ctx.key = r.Key
			ps.op.eventTimer(&ps.ctx, r.Time, &ps.out)
		}
		return abi.StatusOK
	})
}
