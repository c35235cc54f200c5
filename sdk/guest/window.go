package guest

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
)

// Windows on keyed streams (docs/event-time.md, "Windows"): a window
// operator is a keyed Process operator whose state is the key's open
// windows and whose timers fire them, so windows are checkpointed, restored
// and rescaled by key group as any keyed state and timers are, and a
// window fires once per key (plus its lateness updates), never twice after
// a restore: the firing and the state change it makes are in the same
// snapshot or neither is.

// Window is a window's bounds in milliseconds: [Start, End).
type Window struct{ Start, End int64 }

// MaxTimestamp is the last time in the window, End-1: the time of the
// records the window emits and of the timer that fires it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

type windowKind uint8

const (
	windowTumbling windowKind = iota + 1
	windowSliding
	windowSession
)

// Windows is how a keyed stream's records are grouped into windows: build
// one with Tumbling, Sliding or Session, and pass it to KeyedStream.Window.
// It is immutable; its methods return a copy. Windows are in event time
// (the records' Time; the source needs a watermark strategy) unless
// InProcessingTime says otherwise.
type Windows struct {
	kind        windowKind
	size, slide int64 // ms; slide = size for tumbling; size is the gap for sessions
	procTime    bool
	lateness    int64
	latenessSet bool
	err         string
}

// Tumbling windows of size: fixed, non-overlapping, aligned to the epoch
// ([0, size), [size, 2·size), …); each record is in exactly one.
func Tumbling(size time.Duration) Windows {
	w := Windows{kind: windowTumbling, size: size.Milliseconds(), slide: size.Milliseconds()}
	if size < time.Millisecond {
		w.err = fmt.Sprintf("Tumbling(%v): the size must be at least 1ms", size)
	}
	return w
}

// Sliding (hopping) windows of size that start every slide: each record is
// in about size/slide of them. The slide must be positive and at most the
// size.
func Sliding(size, slide time.Duration) Windows {
	w := Windows{kind: windowSliding, size: size.Milliseconds(), slide: slide.Milliseconds()}
	switch {
	case size < time.Millisecond:
		w.err = fmt.Sprintf("Sliding(%v, %v): the size must be at least 1ms", size, slide)
	case slide < time.Millisecond:
		w.err = fmt.Sprintf("Sliding(%v, %v): the slide must be at least 1ms", size, slide)
	case slide > size:
		w.err = fmt.Sprintf("Sliding(%v, %v): the slide is larger than the size, so records between windows would be lost: use a slide of at most the size", size, slide)
	}
	return w
}

// Session windows: a key's records less than gap apart are in one window,
// which ends gap after its last record. With Reduce the reduce function
// merges two sessions' accumulators; an Aggregator needs a Merge.
func Session(gap time.Duration) Windows {
	w := Windows{kind: windowSession, size: gap.Milliseconds()}
	if gap < time.Millisecond {
		w.err = fmt.Sprintf("Session(%v): the gap must be at least 1ms", gap)
	}
	return w
}

// InProcessingTime makes the windows measure the task's processing time:
// a record belongs to the windows of the time it arrives, and a window
// fires when processing time passes its end. No record is late.
func (w Windows) InProcessingTime() Windows { w.procTime = true; return w }

// WithAllowedLateness keeps an event-time window's state for d after it
// fired: a record for it that arrives while the watermark is below
// End-1+d updates the window and fires it again at once, with the update.
// A record whose windows are all past that is late: it goes to the
// operator's late output (Late) or, without one, is dropped and counted.
func (w Windows) WithAllowedLateness(d time.Duration) Windows {
	w.lateness, w.latenessSet = d.Milliseconds(), true
	if d < 0 && w.err == "" {
		w.err = fmt.Sprintf("WithAllowedLateness(%v): the allowed lateness must not be negative: use 0 for none", d)
	}
	return w
}

func (w Windows) String() string {
	var s string
	switch w.kind {
	case windowTumbling:
		s = "tumbling " + strconv.FormatInt(w.size, 10) + "ms"
	case windowSliding:
		s = "sliding " + strconv.FormatInt(w.size, 10) + "ms every " + strconv.FormatInt(w.slide, 10) + "ms"
	case windowSession:
		s = "session gap " + strconv.FormatInt(w.size, 10) + "ms"
	}
	if w.procTime {
		return s + " processing time"
	}
	return s + " event time, lateness " + strconv.FormatInt(w.lateness, 10) + "ms"
}

// WindowedStream is a keyed stream grouped into windows: give it a
// function with Reduce, Aggregate or Process.
type WindowedStream struct {
	k *KeyedStream
	w Windows
}

// Window groups a keyed stream's records into windows per key.
func (k *KeyedStream) Window(w Windows) *WindowedStream {
	e := k.s.env
	switch {
	case w.kind == 0:
		e.fail("Window: build the windows with Tumbling, Sliding or Session")
	case w.err != "":
		e.fail("Window: %s", w.err)
	case w.procTime && w.latenessSet && w.lateness != 0:
		e.fail("Window: %s: allowed lateness is for event time; in processing time no record is late", w)
	}
	return &WindowedStream{k: k, w: w}
}

// WindowReduceFunc combines two values of a window, the accumulator so far
// and a record's value (or, for sessions that merge, two accumulators),
// into one of the same encoding, Flink's ReduceFunction. It may modify and
// return acc in place.
type WindowReduceFunc func(acc, v []byte) []byte

// Aggregator is an incremental window aggregation, Flink's
// AggregateFunction: Create makes an empty accumulator (nil Create: an
// empty slice), Add folds a record into it, Merge combines two (needed by
// session windows only) and Result turns the final one into the value the
// window emits, appended to dst (nil Result: the accumulator itself).
type Aggregator struct {
	Create func() []byte
	Add    func(acc []byte, r Record) []byte
	Merge  func(a, b []byte) []byte
	Result func(dst, key []byte, w Window, acc []byte) []byte
}

// WindowProcessFunc sees all of a window's records when it fires (in the
// order they arrived) and emits what it likes through out; what it emits
// carries the window's MaxTimestamp as its time.
type WindowProcessFunc func(ctx *KeyedContext, w Window, recs []Record, out *Collector)

// Reduce emits, when a window fires, {Key: key, Value: the reduction of
// its records' values, Time: the window's MaxTimestamp}.
func (ws *WindowedStream) Reduce(name string, fn WindowReduceFunc) *Stream {
	var wo *windowOp
	if fn != nil {
		wo = &windowOp{add: func(acc []byte, r Record) []byte {
			if acc == nil {
				return append([]byte{}, r.Value...)
			}
			return fn(acc, r.Value)
		}, merge: func(a, b []byte) []byte { return fn(a, b) }}
	}
	return ws.add(name, wo, fn == nil)
}

// Aggregate emits, when a window fires, {Key: key, Value: Result of its
// accumulator, Time: the window's MaxTimestamp}.
func (ws *WindowedStream) Aggregate(name string, a Aggregator) *Stream {
	if a.Add == nil {
		return ws.add(name, nil, true)
	}
	if ws.w.kind == windowSession && a.Merge == nil {
		ws.k.s.env.fail("window %q: session windows merge, so the Aggregator needs a Merge function", name)
	}
	create := a.Create
	wo := &windowOp{add: func(acc []byte, r Record) []byte {
		if acc == nil {
			if create != nil {
				acc = create()
			} else {
				acc = []byte{}
			}
		}
		return a.Add(acc, r)
	}, merge: a.Merge, result: a.Result}
	return ws.add(name, wo, false)
}

// Process keeps every record of a window and calls fn with them when it
// fires.
func (ws *WindowedStream) Process(name string, fn WindowProcessFunc) *Stream {
	var wo *windowOp
	if fn != nil {
		wo = &windowOp{process: fn}
	}
	return ws.add(name, wo, fn == nil)
}

func (ws *WindowedStream) add(name string, wo *windowOp, nilFn bool) *Stream {
	o := ws.k.s.then(name, jobgraph.KindProcess, nilFn)
	if o.config == nil {
		o.config = map[string]string{}
	}
	o.config[configWindow] = ws.w.String()
	if wo == nil {
		return &Stream{env: ws.k.s.env, op: o}
	}
	wo.w, wo.op = ws.w, o
	o.window = wo
	o.process = wo.element
	if ws.w.procTime {
		o.timer = wo.fire
	} else {
		o.eventTimer = wo.fire
	}
	return &Stream{env: ws.k.s.env, op: o}
}

// Late returns the late output of a window operator: the records that
// arrived after all their windows' allowed lateness, unchanged. Route it
// to a sink like any stream. Call it once, on the stream a window
// operator returns.
//
// # Notes
//
// The operator's results and late records leave it tagged and two select
// operators (named "<name>.main" and name) take them apart, so its main
// output crosses one more exchange than without a late output
// (docs/RATIONALE.md, "Why is a side output two select operators?").
func (s *Stream) Late(name string) *Stream {
	e := s.env
	wo := s.op.window
	switch {
	case wo == nil:
		e.fail("Late(%q) on %q: only a window operator has a late output", name, s.op.name)
		return s
	case wo.lateOp != nil:
		e.fail("Late(%q) on %q: the late output is already %q", name, s.op.name, wo.lateOp.name)
		return &Stream{env: e, op: wo.lateOp}
	case wo.w.procTime:
		e.fail("Late(%q) on %q: processing-time windows have no late records", name, s.op.name)
		return s
	case wo.join:
		e.fail("Late(%q) on %q: a join has no late output: it counts its late records in %q", name, s.op.name, s.op.name+".late")
		return s
	}
	l := (&Stream{env: e, op: s.op, part: jobgraph.Forward}).then(name, jobgraph.KindFlatMap, false)
	l.flatMap = selectTag(tagLate)
	wo.lateOp = l
	return &Stream{env: e, op: l}
}

const (
	tagMain byte = 0
	tagLate byte = 1
)

// selectTag passes on the records of one tag, without it.
func selectTag(tag byte) FlatMapFunc {
	return func(r Record, out *Collector) {
		if len(r.Value) == 0 {
			panic("window output select: an untagged record: its input is not a window operator's")
		}
		if r.Value[0] == tag {
			r.Value = r.Value[1:]
			out.Emit(r)
		}
	}
}

// finishWindows gives each window operator with a late output its main
// select operator, which takes over the operator's other outputs. It runs
// at the end of declare, so the plan and every task number the operators
// alike.
func (e *Env) finishWindows() {
	for _, o := range e.ops {
		wo := o.window
		if wo == nil || wo.lateOp == nil || wo.mainOp != nil {
			continue
		}
		wo.lateOp.parallelism = o.parallelism
		m := e.add(o.name+".main", jobgraph.KindFlatMap, false)
		m.flatMap = selectTag(tagMain)
		m.parallelism = o.parallelism
		m.hasOutput = true
		for _, ed := range e.edges {
			if ed.src == o && ed.dst != wo.lateOp {
				ed.src = m
			}
		}
		e.edges = append(e.edges, &edge{src: o, dst: m, part: jobgraph.Forward})
		wo.mainOp = m
	}
}

// windowOp is a window operator's functions: exactly one of add (Reduce,
// Aggregate) and process is set.
type windowOp struct {
	w      Windows
	op     *op
	add    func(acc []byte, r Record) []byte
	merge  func(a, b []byte) []byte
	result func(dst, key []byte, w Window, acc []byte) []byte
	// process keeps the records: the window's state is their encoding.
	process WindowProcessFunc

	lateOp, mainOp *op
	// join: the operator is a window join's (join.go): its records are
	// tagged with their side, and it has no late output.
	join bool

	buf, res, tagged []byte
	recs             windowRecords
	wins             []Window
	sessions         []session
	names            windowNames
	cache            windowCache // windowcache.go
}

// A window's state is one keyed state entry per window ("w" and its
// start), or for sessions one entry ("s") with every session of the key:
// a flags byte (windowFired once it fired) and the accumulator or the
// records.
const windowFired = 1

// configWindow is the vertex config key that describes a window operator's
// windows (docs/ABI.md), for people reading the plan; the host ignores it.
const configWindow = "window"

func windowState(start int64) string { return "w" + strconv.FormatInt(start, 10) }

// windowNames caches windowState's names of the windows a task has used
// lately, one slot per window start modulo its length: a sliding window's
// record touches size/slide windows, and building each name anew (an
// allocation and a formatting, costly in Go's Wasm) was a third of a
// windowed query's guest time (BENCHMARKS.md, "Windows").
type windowNames [16]struct {
	start int64
	name  string
}

// name returns windowState(start); slide is the windows' slide, of which
// a window's start is a multiple (any start is right, others share slots).
func (c *windowNames) name(start, slide int64) string {
	e := &c[uint64(start/slide)%uint64(len(c))]
	if e.name == "" || e.start != start {
		e.start, e.name = start, windowState(start)
	}
	return e.name
}

const sessionState = "s"

// floorMod is x mod m rounded toward minus infinity, for times before
// the epoch.
func floorMod(x, m int64) int64 {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}

// assign returns the windows ts falls in (not sessions).
func (wo *windowOp) assign(ts int64) []Window {
	wo.wins = wo.wins[:0]
	last := ts - floorMod(ts, wo.w.slide)
	for start := last; start > ts-wo.w.size; start -= wo.w.slide {
		wo.wins = append(wo.wins, Window{start, start + wo.w.size})
	}
	return wo.wins
}

// clock is the operator's current time: the watermark, or processing time.
func (wo *windowOp) clock(ctx *KeyedContext) int64 {
	if wo.w.procTime {
		return ctx.Now()
	}
	return ctx.Watermark()
}

func (wo *windowOp) register(ctx *KeyedContext, t int64) {
	if wo.w.procTime {
		ctx.RegisterTimer(t)
	} else {
		ctx.RegisterEventTimer(t)
	}
}

func (wo *windowOp) unregister(ctx *KeyedContext, t int64) {
	if wo.w.procTime {
		ctx.DeleteTimer(t)
	} else {
		ctx.DeleteEventTimer(t)
	}
}

// cleanup is when a window's state goes: lateness after it fires.
func (wo *windowOp) cleanup(w Window) int64 {
	if w.MaxTimestamp() > math.MaxInt64-wo.w.lateness {
		return math.MaxInt64
	}
	return w.MaxTimestamp() + wo.w.lateness
}

// element handles one record: it adds it to its windows, or sends it to
// the late output when they are all past their lateness.
func (wo *windowOp) element(ctx *KeyedContext, r Record, out *Collector) {
	ts := r.Time
	if wo.w.procTime {
		ts = ctx.Now()
	} else if !r.HasTime {
		panic(fmt.Sprintf("window %q: a record without an event time: give the source a watermark strategy and emit records with their times (or use InProcessingTime)", wo.op.name))
	}
	now := wo.clock(ctx)
	if wo.w.kind == windowSession {
		wo.sessionElement(ctx, r, ts, now, out)
		return
	}
	added, grew := false, false
	h := keygroup.Hash(ctx.key)
	for _, w := range wo.assign(ts) {
		if !wo.w.procTime && wo.cleanup(w) <= now {
			continue // past its lateness
		}
		added = true
		ref, old, ok := wo.get(ctx, w.Start, h, true)
		grew = grew || !ok
		var flags byte
		var content []byte
		if ok {
			flags, content = old[0], old[1:]
		}
		wo.buf = append(wo.buf[:0], flags)
		wo.buf = wo.addTo(wo.buf, content, r, ok)
		if !ok {
			if w.MaxTimestamp() > now {
				wo.register(ctx, w.MaxTimestamp())
			}
			if wo.w.lateness > 0 {
				wo.register(ctx, wo.cleanup(w))
			}
		}
		if !wo.w.procTime && w.MaxTimestamp() <= now {
			// The watermark passed its end: a late update within the
			// allowed lateness fires the window again, with it.
			wo.buf[0] |= windowFired
			wo.emit(ctx, w, wo.buf[1:], out)
		}
		wo.put(ctx, ref, wo.buf)
	}
	if !added {
		wo.late(ctx, r, out)
	}
	if grew && wo.cached() {
		wo.bound()
	}
}

// addTo appends to dst the window content old (present when ok) with r
// added.
func (wo *windowOp) addTo(dst, old []byte, r Record, ok bool) []byte {
	if wo.process != nil {
		dst = append(dst, old...)
		return appendWindowRecord(dst, r)
	}
	var acc []byte
	if ok {
		acc = old
	}
	return append(dst, wo.add(acc, r)...)
}

func appendWindowRecord(b []byte, r Record) []byte {
	var flags byte
	if r.HasTime {
		flags = 1
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Time))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Value)))
	return append(b, r.Value...)
}

func (wo *windowOp) decodeRecords(key, b []byte) []Record { return wo.recs.decode(wo.op.name, key, b) }

// windowRecords decodes records in appendWindowRecord's encoding, into a
// slice it reuses.
type windowRecords struct{ recs []Record }

func (d *windowRecords) decode(opName string, key, b []byte) []Record {
	d.recs = d.recs[:0]
	for len(b) > 0 {
		if len(b) < 13 {
			panic(fmt.Sprintf("operator %q: malformed state", opName))
		}
		r := Record{Key: key, HasKey: true, HasTime: b[0] == 1, Time: int64(binary.LittleEndian.Uint64(b[1:]))}
		n := int(binary.LittleEndian.Uint32(b[9:]))
		b = b[13:]
		if n > len(b) {
			panic(fmt.Sprintf("operator %q: malformed state", opName))
		}
		r.Value, b = b[:n:n], b[n:]
		d.recs = append(d.recs, r)
	}
	return d.recs
}

// late passes r to the late output, or counts and drops it.
func (wo *windowOp) late(ctx *KeyedContext, r Record, out *Collector) {
	if wo.lateOp == nil {
		ctx.Count(wo.op.name+".late", 1)
		return
	}
	wo.tagged = append(append(wo.tagged[:0], tagLate), r.Value...)
	r.Value = wo.tagged
	out.Emit(r)
}

// emit emits window w's result from its content.
func (wo *windowOp) emit(ctx *KeyedContext, w Window, content []byte, out *Collector) {
	key := ctx.Key()
	if wo.process != nil {
		recs := wo.decodeRecords(key, content)
		wo.process(ctx, w, recs, &Collector{next: &windowEmit{out: out, time: w.MaxTimestamp(), tag: wo.lateOp != nil}})
		return
	}
	v := content
	if wo.result != nil {
		wo.res = wo.result(wo.res[:0], key, w, content)
		v = wo.res
	}
	if wo.lateOp != nil {
		wo.tagged = append(append(wo.tagged[:0], tagMain), v...)
		v = wo.tagged
	}
	out.Emit(Record{Key: key, HasKey: true, Value: v, Time: w.MaxTimestamp(), HasTime: true})
}

// windowEmit is the stage a WindowProcessFunc's collector feeds: it sets
// the window's time (and the main tag) on what the function emits.
type windowEmit struct {
	out  *Collector
	time int64
	tag  bool
	buf  []byte
}

func (s *windowEmit) push(r Record) {
	r.Time, r.HasTime = s.time, true
	if s.tag {
		s.buf = append(append(s.buf[:0], tagMain), r.Value...)
		r.Value = s.buf
	}
	s.out.Emit(r)
}

func (s *windowEmit) endInput() {}

// fire runs for a timer at t: it fires the window that ends at t+1 and
// drops the state of the windows whose lateness ends at t.
func (wo *windowOp) fire(ctx *KeyedContext, t int64, out *Collector) {
	if wo.w.kind == windowSession {
		wo.sessionTimer(ctx, t, out)
		return
	}
	h := keygroup.Hash(ctx.key)
	if t < math.MaxInt64 {
		w := Window{t + 1 - wo.w.size, t + 1}
		if ref, old, ok := wo.get(ctx, w.Start, h, false); ok && old[0]&windowFired == 0 {
			// A copy: a process function's state calls reuse the buffer.
			wo.buf = append(wo.buf[:0], old...)
			wo.emit(ctx, w, wo.buf[1:], out)
			if wo.w.lateness == 0 || wo.w.procTime {
				wo.del(ctx, ref)
			} else {
				wo.buf[0] |= windowFired
				wo.put(ctx, ref, wo.buf)
			}
		}
	}
	if wo.w.lateness > 0 && !wo.w.procTime {
		end := t + 1 - wo.w.lateness
		if ref, old, ok := wo.get(ctx, end-wo.w.size, h, false); ok && old[0]&windowFired != 0 {
			wo.del(ctx, ref)
		}
	}
	if wo.cached() {
		wo.dropDone(t)
	}
}

// A key's sessions, in its "s" state entry, each:
// start, end (8 bytes each), flags, content length (4) and content.
type session struct {
	w       Window
	flags   byte
	content []byte
}

func (wo *windowOp) loadSessions(ctx *KeyedContext) []session {
	wo.sessions = wo.sessions[:0]
	b, _ := ctx.Get(sessionState)
	for len(b) > 0 {
		if len(b) < 21 {
			panic(fmt.Sprintf("window %q: malformed session state", wo.op.name))
		}
		s := session{w: Window{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))}, flags: b[16]}
		n := int(binary.LittleEndian.Uint32(b[17:]))
		b = b[21:]
		if n > len(b) {
			panic(fmt.Sprintf("window %q: malformed session state", wo.op.name))
		}
		// A copy: the state buffer is reused by the next state call. Not
		// nil, even empty: a nil accumulator means "none yet".
		s.content, b = append([]byte{}, b[:n]...), b[n:]
		wo.sessions = append(wo.sessions, s)
	}
	return wo.sessions
}

func (wo *windowOp) storeSessions(ctx *KeyedContext, ss []session) {
	if len(ss) == 0 {
		ctx.Delete(sessionState)
		return
	}
	wo.buf = wo.buf[:0]
	for _, s := range ss {
		wo.buf = binary.LittleEndian.AppendUint64(wo.buf, uint64(s.w.Start))
		wo.buf = binary.LittleEndian.AppendUint64(wo.buf, uint64(s.w.End))
		wo.buf = append(wo.buf, s.flags)
		wo.buf = binary.LittleEndian.AppendUint32(wo.buf, uint32(len(s.content)))
		wo.buf = append(wo.buf, s.content...)
	}
	ctx.Put(sessionState, wo.buf)
}

func (wo *windowOp) mergeContent(a, b []byte) []byte {
	if wo.process != nil {
		return append(append([]byte(nil), a...), b...)
	}
	return append([]byte{}, wo.merge(a, b)...)
}

// sessionElement adds r (at ts) to the key's sessions: its own window
// [ts, ts+gap) merges with every session it overlaps.
func (wo *windowOp) sessionElement(ctx *KeyedContext, r Record, ts, now int64, out *Collector) {
	ss := wo.loadSessions(ctx)
	nw := Window{ts, ts + wo.w.size}
	merged := nw
	for _, s := range ss {
		if s.w.Start < merged.End && merged.Start < s.w.End {
			merged.Start, merged.End = min(merged.Start, s.w.Start), max(merged.End, s.w.End)
		}
	}
	// Absorbing may widen it to overlap more sessions: repeat until stable.
	for changed := true; changed; {
		changed = false
		for _, s := range ss {
			if s.w.Start < merged.End && merged.Start < s.w.End && (s.w.Start < merged.Start || s.w.End > merged.End) {
				merged.Start, merged.End = min(merged.Start, s.w.Start), max(merged.End, s.w.End)
				changed = true
			}
		}
	}
	if !wo.w.procTime && wo.cleanup(merged) <= now {
		wo.late(ctx, r, out)
		return
	}
	var content []byte
	var flags byte
	have := false
	kept := ss[:0]
	var absorbed []session
	for _, s := range ss {
		if s.w.Start < merged.End && merged.Start < s.w.End {
			absorbed = append(absorbed, s)
			continue
		}
		kept = append(kept, s)
	}
	for _, s := range absorbed {
		if s.w != merged {
			wo.unregisterSession(ctx, s.w, now)
		}
		if !have {
			content, flags, have = s.content, s.flags, true
		} else {
			content = wo.mergeContent(content, s.content)
			flags |= s.flags
		}
	}
	if wo.process != nil {
		content = appendWindowRecord(append([]byte(nil), content...), r)
	} else {
		var acc []byte
		if have {
			acc = content
		}
		content = append([]byte{}, wo.add(acc, r)...)
	}
	existed := false
	for _, s := range absorbed {
		existed = existed || s.w == merged
	}
	if !existed {
		if merged.MaxTimestamp() > now {
			wo.register(ctx, merged.MaxTimestamp())
		}
		if wo.w.lateness > 0 && !wo.w.procTime {
			wo.register(ctx, wo.cleanup(merged))
		}
	}
	s := session{w: merged, flags: flags, content: content}
	if !wo.w.procTime && merged.MaxTimestamp() <= now {
		s.flags |= windowFired
		wo.emit(ctx, merged, content, out)
	} else if merged.MaxTimestamp() > now {
		// A fired session that grew past the watermark fires again at
		// its new end.
		s.flags &^= windowFired
	}
	wo.storeSessions(ctx, append(kept, s))
}

func (wo *windowOp) unregisterSession(ctx *KeyedContext, w Window, now int64) {
	if w.MaxTimestamp() > now {
		wo.unregister(ctx, w.MaxTimestamp())
	}
	if wo.w.lateness > 0 && !wo.w.procTime {
		wo.unregister(ctx, wo.cleanup(w))
	}
}

// sessionTimer fires the sessions that end at t+1 and drops those whose
// lateness ended.
func (wo *windowOp) sessionTimer(ctx *KeyedContext, t int64, out *Collector) {
	ss := wo.loadSessions(ctx)
	kept := ss[:0]
	for _, s := range ss {
		if s.flags&windowFired == 0 && s.w.MaxTimestamp() <= t {
			wo.emit(ctx, s.w, s.content, out)
			s.flags |= windowFired
		}
		if s.flags&windowFired != 0 && (wo.w.procTime || wo.cleanup(s.w) <= t) {
			continue
		}
		kept = append(kept, s)
	}
	wo.storeSessions(ctx, kept)
}
