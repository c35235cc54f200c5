package guest

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// flushBytes is how much output the SDK buffers before it emits a batch in
// the middle of an export call. Output is always emitted before an export
// returns, so a call usually makes exactly one emit.
const flushBytes = 1 << 20

// Context gives an operator's functions access to the task they run in.
type Context struct {
	t   *task
	op  *op
	buf []byte // scratch for state reads
}

// Name returns the operator's name.
func (c *Context) Name() string { return c.op.name }

// Vertex returns the operator's vertex id in the job graph.
func (c *Context) Vertex() int { return c.op.id }

// Subtask returns which of the operator's parallel subtasks this is, from 0.
func (c *Context) Subtask() int { return c.t.info.Subtask }

// Parallelism returns how many subtasks run the operator.
func (c *Context) Parallelism() int { return c.t.info.Parallelism }

// JobID returns the job's id.
func (c *Context) JobID() string { return c.t.info.JobID }

// Args returns the job's arguments.
func (c *Context) Args() []string { return c.t.info.Args }

// Now returns the task's processing time in milliseconds since the Unix
// epoch, as the host grants it (docs/ABI.md, now_ms).
func (c *Context) Now() int64 { return hostNow() }

// Count adds delta to the job-wide counter name (an accumulator in Flink's
// terms). Counters are sent to the host once per call, not per Count.
func (c *Context) Count(name string, delta int64) { Count(name, delta) }

// OperatorState returns this subtask's operator state name and whether it
// exists. The slice is valid until the next state call on c.
func (c *Context) OperatorState(name string) ([]byte, bool) {
	for {
		n := hostOpStateGet(int32(c.op.id), name, c.buf[:cap(c.buf)])
		if n == abi.Absent {
			return nil, false
		}
		if int(n) <= cap(c.buf) {
			return c.buf[:n], true
		}
		c.buf = make([]byte, 0, n)
	}
}

// SetOperatorState stores v as operator state name; it is part of every
// checkpoint from now on.
func (c *Context) SetOperatorState(name string, v []byte) { hostOpStatePut(int32(c.op.id), name, v) }

// DeleteOperatorState removes operator state name.
func (c *Context) DeleteOperatorState(name string) { hostOpStateDelete(int32(c.op.id), name) }

// KeyedContext is a Context inside a keyed operator, scoped to the key of the
// record (or timer) being handled. State is kept by the host, per key, and is
// part of every checkpoint.
type KeyedContext struct {
	Context
	key []byte
}

// Key returns the current key. Valid during the call only.
func (k *KeyedContext) Key() []byte { return k.key }

// Get returns the current key's state name and whether it exists. The slice
// is valid until the next state call on k.
func (k *KeyedContext) Get(name string) ([]byte, bool) {
	for {
		n := hostStateGet(int32(k.op.id), name, k.key, k.buf[:cap(k.buf)])
		if n == abi.Absent {
			return nil, false
		}
		if int(n) <= cap(k.buf) {
			return k.buf[:n], true
		}
		k.buf = make([]byte, 0, n)
	}
}

// Put stores v as the current key's state name.
func (k *KeyedContext) Put(name string, v []byte) { hostStatePut(int32(k.op.id), name, k.key, v) }

// Delete removes the current key's state name.
func (k *KeyedContext) Delete(name string) { hostStateDelete(int32(k.op.id), name, k.key) }

// GetInt64 returns the current key's state name as an int64 (0 if absent).
func (k *KeyedContext) GetInt64(name string) (int64, bool) {
	b, ok := k.Get(name)
	return AsInt64(b), ok
}

// PutInt64 stores n as the current key's state name.
func (k *KeyedContext) PutInt64(name string, n int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	k.Put(name, b[:])
}

// RegisterTimer asks for the operator's OnTimer callback to run for the
// current key once processing time reaches timeMs. Registering the same
// time twice for a key gives one call.
func (k *KeyedContext) RegisterTimer(timeMs int64) {
	if k.op.timer == nil {
		panic(fmt.Sprintf("RegisterTimer in %q: give the operator an OnTimer callback first", k.op.name))
	}
	hostTimerRegister(int32(k.op.id), k.key, timeMs)
}

// DeleteTimer cancels a timer registered for the current key.
func (k *KeyedContext) DeleteTimer(timeMs int64) { hostTimerDelete(int32(k.op.id), k.key, timeMs) }

// Count adds delta to the job-wide counter name. Counters are buffered in the
// guest and handed to the host once per call. Count(name, 0) declares the
// counter: the job's accumulators list it, at 0 if nothing is ever added.
func Count(name string, delta int64) {
	if counters == nil {
		counters = make(map[string]int64)
	}
	counters[name] += delta
}

// counters holds counter deltas not yet sent to the host.
var counters map[string]int64

func flushCounters() {
	for name, d := range counters {
		hostCounterAdd(name, d) // 0 too: it declares the counter
		delete(counters, name)
	}
}

// stage is one operator of a task's chain, or the emitter after the last.
type stage interface {
	push(r Record)
	endInput()
}

// task is the chain of operators one instance runs. A module instance runs
// one task, so the current task is a package-level variable.
type task struct {
	info   abi.TaskInfo
	ops    []*op
	ctxs   []*Context
	stages []stage // stages[i] runs ops[i]
	head   stage
	source *sourceStage
	out    *emitter
	recs   []Record // decode scratch
}

var current *task

type emitter struct {
	buf []byte
	n   uint32
}

func newEmitter() *emitter { return &emitter{buf: make([]byte, 4, 64<<10)} }

func (e *emitter) push(r Record) {
	// The batch encoding (internal/abi), written in place: this runs once
	// per output record, and Go's wasm code pays for every call.
	need := 5 + len(r.Value)
	if r.HasKey {
		need += 4 + len(r.Key)
	}
	if r.HasTime {
		need += 8
	}
	if len(r.Headers) > 0 {
		need += abi.HeadersSize(r.Headers)
	}
	b := e.grow(need)
	var flags byte
	i := 1
	if r.HasKey {
		flags |= 1
		binary.LittleEndian.PutUint32(b[i:], uint32(len(r.Key)))
		i += 4 + copy(b[i+4:], r.Key)
	}
	if r.HasTime {
		flags |= 2
		binary.LittleEndian.PutUint64(b[i:], uint64(r.Time))
		i += 8
	}
	if len(r.Headers) > 0 {
		flags |= 4
		i += len(abi.AppendHeaders(b[i:i], r.Headers))
	}
	b[0] = flags
	binary.LittleEndian.PutUint32(b[i:], uint32(len(r.Value)))
	copy(b[i+4:], r.Value)
	e.added()
}

// pushKeyValue is push of {Key: key, Value: value}, without a Record.
func (e *emitter) pushKeyValue(key, value []byte) {
	b := e.grow(9 + len(key) + len(value))
	b[0] = 1
	binary.LittleEndian.PutUint32(b[1:], uint32(len(key)))
	i := 5 + copy(b[5:], key)
	binary.LittleEndian.PutUint32(b[i:], uint32(len(value)))
	copy(b[i+4:], value)
	e.added()
}

// pushValue is push of {Value: value}, without a Record.
func (e *emitter) pushValue(value []byte) {
	b := e.grow(5 + len(value))
	b[0] = 0
	binary.LittleEndian.PutUint32(b[1:], uint32(len(value)))
	copy(b[5:], value)
	e.added()
}

// grow appends need bytes to the batch and returns them.
func (e *emitter) grow(need int) []byte {
	n := len(e.buf)
	if cap(e.buf)-n < need {
		nb := make([]byte, n, 2*cap(e.buf)+need)
		copy(nb, e.buf)
		e.buf = nb
	}
	e.buf = e.buf[:n+need]
	return e.buf[n:]
}

// added counts the record grow made room for, and emits a full batch.
func (e *emitter) added() {
	e.n++
	if len(e.buf) >= flushBytes {
		e.flush()
	}
}

func (e *emitter) endInput() {}

func (e *emitter) flush() {
	if e.n == 0 {
		return
	}
	binary.LittleEndian.PutUint32(e.buf, e.n)
	hostEmit(e.buf)
	e.buf = e.buf[:4]
	e.n = 0
}

type mapStage struct {
	fn   MapFunc
	next stage
	emit *emitter // next, when it is the emitter: a direct call is cheaper in wasm
}

func (s *mapStage) push(r Record) {
	if s.emit != nil {
		s.emit.push(s.fn(r))
		return
	}
	s.next.push(s.fn(r))
}
func (s *mapStage) endInput() { s.next.endInput() }

type filterStage struct {
	fn   FilterFunc
	next stage
}

func (s *filterStage) push(r Record) {
	if s.fn(r) {
		s.next.push(r)
	}
}
func (s *filterStage) endInput() { s.next.endInput() }

type flatMapStage struct {
	fn   FlatMapFunc
	out  Collector
	next stage
}

func (s *flatMapStage) push(r Record) { s.fn(r, &s.out) }
func (s *flatMapStage) endInput()     { s.next.endInput() }

type keyByStage struct {
	fn   KeyFunc
	next stage
	emit *emitter // next, when it is the emitter
	// A join side's KeyBy tags the values (join.go): tag is 1 + the side.
	tag    int16
	tagged []byte
}

func (s *keyByStage) push(r Record) {
	r.Key = s.fn(r)
	r.HasKey = true
	if s.tag != 0 {
		s.tagged = append(append(s.tagged[:0], byte(s.tag-1)), r.Value...)
		r.Value = s.tagged
	}
	if s.emit != nil {
		s.emit.push(r)
		return
	}
	s.next.push(r)
}
func (s *keyByStage) endInput() { s.next.endInput() }

// A Reduce keeps its accumulators in guest memory (accTable), so a record
// costs no host call: a key's accumulator is read from keyed state once,
// when the key is first seen (it may be there after a restore), and the
// changed ones are written back in batches with state_put_batch at every
// barrier, before the operators' barrier hooks, so the host's snapshot
// holds everything processed before the barrier; and when the cache
// outgrows these bounds (then it is emptied). Keyed state lags the cache
// only between barriers, where nothing reads it but the reduce itself: not
// at the end of input (a final reduce emits from the cache and a scan of
// the keys only keyed state has) nor at close. They are variables so that
// tests can lower them.
var (
	reduceCacheEntries = 256 << 10
	reduceCacheBytes   = 16 << 20
	putBatchBytes      = 1 << 20
)

type reduceStage struct {
	ctx   KeyedContext
	fn    ReduceFunc
	op    *op
	next  stage
	scan  []byte
	recs  []Record
	cache accTable
	batch []byte // state_put_batch scratch
	res   []byte // EmitResult scratch
	state byte   // what keyed state may hold: stateUnknown, stateEmpty, stateMayHold
}

// emit passes on key's accumulator acc, or its result with EmitResult.
func (s *reduceStage) emit(key, acc []byte) {
	if s.op.result != nil {
		s.res = s.op.result(s.res[:0], acc)
		acc = s.res
	}
	s.next.push(Record{Key: key, HasKey: true, Value: acc})
}

const (
	stateUnknown = iota
	stateEmpty
	stateMayHold
)

func (s *reduceStage) push(r Record) {
	if !r.HasKey {
		panic(fmt.Sprintf("reduce %q got a record without a key: put KeyBy before it", s.op.name))
	}
	i, slot, h := s.cache.find(r.Key)
	if i < 0 {
		i = s.cache.insert(r.Key, slot, h)
		if s.stateMayHold() {
			s.ctx.key = r.Key
			if v, ok := s.ctx.Get(""); ok {
				s.cache.load(i, v)
			}
		}
	}
	// fn may return the accumulator changed in place, a new slice, or part
	// of r (valid only during this call): set copies it into the table.
	s.cache.set(i, s.fn(s.cache.acc(i), r))
	if !s.op.final {
		s.emit(r.Key, s.cache.acc(i))
	}
	if s.cache.len() >= reduceCacheEntries || s.cache.size() >= reduceCacheBytes {
		s.flush(true)
	}
}

// flush writes the accumulators changed since the last flush to keyed
// state, and empties the cache when evict is set.
func (s *reduceStage) flush(evict bool) {
	c := &s.cache
	if len(c.dirty) > 0 {
		s.batch = append(s.batch[:0], 0, 0, 0, 0)
		n := 0
		for _, i := range c.dirty {
			c.ents[i].dirty = false
			s.batch = appendKeyValue(s.batch, c.key(int(i)), c.acc(int(i)))
			n++
			if len(s.batch) >= putBatchBytes {
				s.putBatch(n)
				n = 0
			}
		}
		if n > 0 {
			s.putBatch(n)
		}
		c.dirty = c.dirty[:0]
	}
	if evict {
		c.reset()
		s.state = stateMayHold
	}
}

// stateMayHold reports whether keyed state may hold an accumulator for a
// key the cache does not have. Keyed state starts empty unless it was
// restored, and then only the reduce writes it: while it was found empty
// and the cache was never emptied, every accumulator is in the cache, and a
// new key needs no state_get (one host call per distinct key otherwise:
// most of a word count's keys are new). A scan, once, tells empty from not.
func (s *reduceStage) stateMayHold() bool {
	if s.state == stateUnknown {
		s.state = stateMayHold
		if keyedStateEmpty(int32(s.op.id), "", &s.scan) {
			s.state = stateEmpty
		}
	}
	return s.state == stateMayHold
}

// keyedStateEmpty reports whether vertex's keyed state name has no entry in
// this subtask. It runs the scan to its end (the host keeps one cursor
// per instance, so the next scan starts over), in *scan, which it grows
// as it needs.
func keyedStateEmpty(vertex int32, name string, scan *[]byte) bool {
	if *scan == nil {
		*scan = make([]byte, 64<<10)
	}
	empty := true
	for {
		n := hostStateScan(vertex, name, *scan)
		if n == 0 {
			return empty
		}
		empty = false
		if n < 0 {
			*scan = make([]byte, -n)
		}
	}
}

func (s *reduceStage) putBatch(n int) {
	binary.LittleEndian.PutUint32(s.batch, uint32(n))
	hostStatePutBatch(int32(s.op.id), "", s.batch)
	s.batch = s.batch[:4]
}

// appendKeyValue appends the batch encoding of a record {key, value}.
func appendKeyValue(b, key, value []byte) []byte {
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

func (s *reduceStage) endInput() {
	if s.op.final {
		s.emitFinal()
	}
	s.next.endInput()
}

// emitFinal emits every key's accumulator once: the cache has the newest of
// every key it holds; a scan of keyed state finds the others (restored from
// a checkpoint, or written back when the cache was emptied).
func (s *reduceStage) emitFinal() {
	if s.scan == nil {
		s.scan = make([]byte, 64<<10)
	}
	for {
		n := hostStateScan(int32(s.op.id), "", s.scan)
		if n == 0 {
			break
		}
		if n < 0 {
			s.scan = make([]byte, -n)
			continue
		}
		var err error
		if s.recs, err = abi.DecodeBatch(s.recs[:0], s.scan[:n]); err != nil {
			panic(fmt.Sprintf("reduce %q: state scan: %v", s.op.name, err))
		}
		for _, r := range s.recs {
			if i, _, _ := s.cache.find(r.Key); i < 0 {
				s.emit(r.Key, r.Value)
			}
		}
	}
	c := &s.cache
	for i := range c.ents {
		if c.ents[i].present {
			s.emit(c.key(i), c.acc(i))
		}
	}
}

type processStage struct {
	ctx  KeyedContext
	op   *op
	out  Collector
	next stage
}

func (s *processStage) push(r Record) {
	if !r.HasKey {
		panic(fmt.Sprintf("process %q got a record without a key: put KeyBy before it", s.op.name))
	}
	s.ctx.key = r.Key
	s.op.process(&s.ctx, r, &s.out)
}
func (s *processStage) endInput() { s.next.endInput() }

type sinkStage struct {
	ctx *Context
	fn  SinkFunc
}

func (s *sinkStage) push(r Record) { s.fn(s.ctx, r) }
func (s *sinkStage) endInput()     {}

type sourceStage struct {
	ctx *Context
	fn  SourceFunc
	out Collector
}

// newTask builds the chain info.Chain names out of the job's declared
// operators.
func newTask(info abi.TaskInfo) (*task, error) {
	env, err := declare(info.Args)
	if err != nil {
		return nil, err
	}
	if len(info.Chain) == 0 {
		return nil, fmt.Errorf("open: empty chain")
	}
	t := &task{info: info, out: newEmitter()}
	for i, id := range info.Chain {
		if id < 1 || id > len(env.ops) {
			return nil, fmt.Errorf("open: chain names vertex %d, the job declares 1..%d (is the plan deterministic?)", id, len(env.ops))
		}
		o := env.ops[id-1]
		if o.connector != "" {
			return nil, fmt.Errorf("open: vertex %d %q is the host connector %q, not guest code", id, o.name, o.connector)
		}
		if o.kind == jobgraph.KindSource && i != 0 {
			return nil, fmt.Errorf("open: source %q inside a chain", o.name)
		}
		if o.kind == jobgraph.KindSink && i != len(info.Chain)-1 {
			return nil, fmt.Errorf("open: sink %q is not the chain's tail", o.name)
		}
		t.ops = append(t.ops, o)
		t.ctxs = append(t.ctxs, &Context{t: t, op: o})
	}
	t.stages = make([]stage, len(t.ops))
	var next stage = t.out
	for i := len(t.ops) - 1; i >= 0; i-- {
		o, ctx := t.ops[i], t.ctxs[i]
		var s stage
		switch o.kind {
		case jobgraph.KindMap:
			em, _ := next.(*emitter)
			s = &mapStage{fn: o.mapFn, next: next, emit: em}
		case jobgraph.KindFilter:
			s = &filterStage{fn: o.filter, next: next}
		case jobgraph.KindFlatMap:
			s = &flatMapStage{fn: o.flatMap, out: newCollector(next), next: next}
		case jobgraph.KindKeyBy:
			em, _ := next.(*emitter)
			s = &keyByStage{fn: o.keyFn, next: next, emit: em, tag: o.joinSide}
		case jobgraph.KindReduce:
			s = &reduceStage{ctx: KeyedContext{Context: *ctx}, fn: o.reduce, op: o, next: next}
		case jobgraph.KindProcess:
			s = &processStage{ctx: KeyedContext{Context: *ctx}, op: o, out: newCollector(next), next: next}
		case jobgraph.KindSink:
			s = &sinkStage{ctx: ctx, fn: o.sink}
		case jobgraph.KindSource:
			t.source = &sourceStage{ctx: ctx, fn: o.source, out: newCollector(next)}
			s = next // records never enter a source
		default:
			return nil, fmt.Errorf("open: vertex %d %q has unknown kind %q", o.id, o.name, o.kind)
		}
		t.stages[i] = s
		next = s
	}
	t.head = t.stages[0]
	return t, nil
}

// guard runs fn as the body of an export: a panic becomes StatusError with
// the panic and its Go stack handed to the host through fail, and whatever
// the call produced is flushed to the host.
func guard(fn func() int32) (status int32) {
	defer func() {
		if r := recover(); r != nil {
			hostFail(fmt.Sprintf("panic: %v\n\n%s", r, debug.Stack()))
			status = abi.StatusError
		}
	}()
	status = fn()
	if current != nil {
		current.out.flush()
	}
	flushCounters()
	// Go's runtime in Wasm has one thread and runs other goroutines only
	// when this one yields; a call from the host never does, so a garbage
	// collection, once started, stayed in its mark phase (every pointer
	// write through the write barrier's slow path) until allocations
	// finished it by assists: a quarter of a window aggregate's time.
	// Yielding at the end of each call lets the background mark worker
	// finish it.
	runtime.Gosched()
	return status
}

func failf(format string, args ...any) int32 {
	hostFail(fmt.Sprintf(format, args...))
	return abi.StatusError
}

func doPlan(argsBatch []byte) int32 {
	return guard(func() int32 {
		recs, err := abi.DecodeBatch(nil, argsBatch)
		if err != nil {
			return failf("plan: arguments: %v", err)
		}
		args := make([]string, len(recs))
		for i, r := range recs {
			args[i] = string(r.Value)
		}
		env, err := declare(args)
		if err != nil {
			return failf("%v", err)
		}
		b, err := json.Marshal(env.graph())
		if err != nil {
			return failf("plan: %v", err)
		}
		hostSetPlan(b)
		return abi.StatusOK
	})
}

func doOpen(infoJSON []byte) int32 {
	return guard(func() int32 {
		if current != nil {
			return failf("open: the instance already runs task %q", current.info.Task)
		}
		var info abi.TaskInfo
		if err := json.Unmarshal(infoJSON, &info); err != nil {
			return failf("open: task info: %v", err)
		}
		t, err := newTask(info)
		if err != nil {
			return failf("%v", err)
		}
		current = t
		for i, o := range t.ops {
			if o.onOpen != nil {
				o.onOpen(t.ctxs[i])
			}
		}
		return abi.StatusOK
	})
}

func doProcess(batch []byte) int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return failf("process before open")
		}
		if t.source != nil {
			return failf("process: the chain's head %q is a source", t.ops[0].name)
		}
		if err := eachRecord(batch, t.head); err != nil {
			return failf("process: %v", err)
		}
		return abi.StatusOK
	})
}

func doSourcePoll(max int32) int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return failf("source poll before open")
		}
		if t.source == nil {
			return failf("source poll: the chain's head %q is not a source", t.ops[0].name)
		}
		if t.source.fn(t.source.ctx, int(max), &t.source.out) {
			return abi.StatusDone
		}
		return abi.StatusOK
	})
}

func doEndInput() int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return failf("end of input before open")
		}
		t.head.endInput()
		return abi.StatusOK
	})
}

func doBarrier(checkpointID int64) int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return failf("barrier before open")
		}
		for i, o := range t.ops {
			// Keyed state the stage holds in guest memory goes to the host
			// first: the host snapshots when this call returns.
			if rs, ok := t.stages[i].(*reduceStage); ok {
				rs.flush(false)
			}
			if o.window != nil && o.window.cached() {
				o.window.flush(false)
			}
			if o.onBarrier != nil {
				o.onBarrier(t.ctxs[i], checkpointID)
			}
		}
		return abi.StatusOK
	})
}

func doTimers(batch []byte) int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return failf("timers before open")
		}
		var err error
		if t.recs, err = abi.DecodeBatch(t.recs[:0], batch); err != nil {
			return failf("timers: %v", err)
		}
		for _, r := range t.recs {
			if len(r.Value) != 4 {
				return failf("timers: a timer's value must be its 4-byte vertex id")
			}
			id := int(binary.LittleEndian.Uint32(r.Value))
			var ps *processStage
			for i, o := range t.ops {
				if o.id == id {
					ps, _ = t.stages[i].(*processStage)
				}
			}
			if ps == nil || ps.op.timer == nil {
				return failf("timers: vertex %d is not a process operator with OnTimer in this task", id)
			}
			ps.ctx.key = r.Key
			ps.op.timer(&ps.ctx, r.Time, &ps.out)
		}
		return abi.StatusOK
	})
}

func doClose() int32 {
	return guard(func() int32 {
		t := current
		if t == nil {
			return abi.StatusOK
		}
		for i, o := range t.ops {
			if o.onClose != nil {
				o.onClose(t.ctxs[i])
			}
		}
		return abi.StatusOK
	})
}

// eachRecord decodes batch (internal/abi's encoding) and pushes each record
// to s as it goes, without a slice of records in between.
func eachRecord(b []byte, s stage) error {
	if len(b) < 4 {
		return fmt.Errorf("%w: %d bytes", abi.ErrMalformedBatch, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	p := uint64(4)
	end := uint64(len(b))
	for i := uint32(0); i < n; i++ {
		var r Record
		if p+5 > end {
			return fmt.Errorf("%w: record %d truncated", abi.ErrMalformedBatch, i)
		}
		flags := b[p]
		p++
		if flags&^7 != 0 {
			return fmt.Errorf("%w: record %d: unknown flags %#x", abi.ErrMalformedBatch, i, flags)
		}
		if flags&1 != 0 {
			k := uint64(binary.LittleEndian.Uint32(b[p:]))
			p += 4
			if p+k+4 > end {
				return fmt.Errorf("%w: record %d: key overruns the batch", abi.ErrMalformedBatch, i)
			}
			r.Key, r.HasKey = b[p:p+k:p+k], true
			p += k
		}
		if flags&2 != 0 {
			if p+12 > end {
				return fmt.Errorf("%w: record %d: time overruns the batch", abi.ErrMalformedBatch, i)
			}
			r.Time, r.HasTime = int64(binary.LittleEndian.Uint64(b[p:])), true
			p += 8
		}
		if flags&4 != 0 {
			hs, rest, err := abi.DecodeHeaders(nil, b[p:])
			if err != nil || len(rest) < 4 {
				return fmt.Errorf("%w: record %d: %v", abi.ErrMalformedBatch, i, cmp.Or(err, errors.New("value: truncated length")))
			}
			r.Headers = hs
			p = end - uint64(len(rest))
		}
		v := uint64(binary.LittleEndian.Uint32(b[p:]))
		p += 4
		if p+v > end {
			return fmt.Errorf("%w: record %d: value overruns the batch", abi.ErrMalformedBatch, i)
		}
		r.Value = b[p : p+v : p+v]
		p += v
		s.push(r)
	}
	if p != end {
		return fmt.Errorf("%w: %d trailing bytes", abi.ErrMalformedBatch, end-p)
	}
	return nil
}

// allocs keeps the regions handed to the host alive and lets exports find
// them: the host passes back only pointers it got from sluice_alloc.
var allocs = map[uint32][]byte{}

func region(ptr, n uint32) []byte {
	b, ok := allocs[ptr]
	if !ok || uint64(n) > uint64(len(b)) {
		panic(fmt.Sprintf("the host passed [%#x, +%d), which is not inside a region from sluice_alloc", ptr, n))
	}
	return b[:n]
}
