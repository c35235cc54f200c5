package typed

import "github.com/sluicehq/sluice/sdk/guest"

// WithWatermarks declares a source's watermark strategy
// (guest.BoundedOutOfOrderness, guest.Monotonous, guest.GuestWatermarks);
// the event time of each element is the time it was emitted with (EmitAt).
func (s *Stream[T]) WithWatermarks(w guest.WatermarkStrategy) *Stream[T] {
	s.s.WithWatermarks(w)
	return s
}

// EmitAt passes v on with event time timeMs (milliseconds since the Unix
// epoch), the time watermarks and event-time timers measure: a source sets
// its elements' times this way, and any operator may reassign one.
func (e *Emitter[T]) EmitAt(v T, timeMs int64) {
	r := e.f.record(&e.sc, v)
	r.Time, r.HasTime = timeMs, true
	e.c.Emit(r)
}

// OnEventTimer sets the operator's event-time timer callback: it runs for
// each timer the watermark passed (ctx.RegisterEventTimer), earliest first.
// Elements it emits carry the timer's time as their event time, as in
// Flink.
func (p *ProcessStream[K, Out]) OnEventTimer(fn TimerFunc[K, Out]) *ProcessStream[K, Out] {
	if fn == nil {
		p.s.OnEventTimer(nil)
		return p
	}
	p.s.OnEventTimer(func(ctx *guest.KeyedContext, timeMs int64, c *guest.Collector) {
		p.ctx.KeyedContext = ctx
		p.e.setInput(c, timeMs, true)
		fn(&p.ctx, timeMs, p.e)
	})
	return p
}
