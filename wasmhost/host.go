package wasmhost

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Bounds on what a guest may hand the host in one call.
const (
	maxNameBytes    = 1 << 10 // state, operator state and counter names
	maxKeyBytes     = 1 << 20
	maxValueBytes   = 1 << 30
	maxFailBytes    = 64 << 10
	maxCounterNames = 1 << 10
)

// hostModule defines the host functions of ABI v1 (docs/ABI.md). They are
// shared by every instance of the runtime; each finds its Instance in the
// call's context. A host function that is handed a bad pointer, length,
// vertex or key panics with a *trapError, which wazero turns into a trap of
// the guest call: the host keeps running and the call fails with ErrTrap.
func hostModule(r wazero.Runtime) wazero.HostModuleBuilder {
	b := r.NewHostModuleBuilder(abi.HostModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType, names ...string) {
		b.NewFunctionBuilder().WithGoModuleFunction(counted(f), params, results).WithParameterNames(names...).Export(name)
	}
	I, L := api.ValueTypeI32, api.ValueTypeI64
	fn(abi.ImportEmit, hostEmit, []api.ValueType{I, I}, nil, "batch_ptr", "batch_len")
	fn(abi.ImportSetPlan, hostSetPlan, []api.ValueType{I, I}, nil, "json_ptr", "json_len")
	fn(abi.ImportFail, hostFail, []api.ValueType{I, I}, nil, "msg_ptr", "msg_len")
	fn(abi.ImportLog, hostLog, []api.ValueType{I, I, I}, nil, "level", "msg_ptr", "msg_len")
	fn(abi.ImportCounterAdd, hostCounterAdd, []api.ValueType{I, I, L}, nil, "name_ptr", "name_len", "delta")
	fn(abi.ImportNow, hostNow, nil, []api.ValueType{L})
	fn(abi.ImportStateGet, hostStateGet, []api.ValueType{I, I, I, I, I, I, I}, []api.ValueType{I},
		"vertex", "name_ptr", "name_len", "key_ptr", "key_len", "buf_ptr", "buf_cap")
	fn(abi.ImportStatePut, hostStatePut, []api.ValueType{I, I, I, I, I, I, I}, nil,
		"vertex", "name_ptr", "name_len", "key_ptr", "key_len", "val_ptr", "val_len")
	fn(abi.ImportStatePutBatch, hostStatePutBatch, []api.ValueType{I, I, I, I, I}, nil,
		"vertex", "name_ptr", "name_len", "batch_ptr", "batch_len")
	fn(abi.ImportStateDelete, hostStateDelete, []api.ValueType{I, I, I, I, I}, nil,
		"vertex", "name_ptr", "name_len", "key_ptr", "key_len")
	fn(abi.ImportStateScan, hostStateScan, []api.ValueType{I, I, I, I, I}, []api.ValueType{I},
		"vertex", "name_ptr", "name_len", "buf_ptr", "buf_cap")
	fn(abi.ImportOpStateGet, hostOpStateGet, []api.ValueType{I, I, I, I, I}, []api.ValueType{I},
		"vertex", "name_ptr", "name_len", "buf_ptr", "buf_cap")
	fn(abi.ImportOpStatePut, hostOpStatePut, []api.ValueType{I, I, I, I, I}, nil,
		"vertex", "name_ptr", "name_len", "val_ptr", "val_len")
	fn(abi.ImportOpStateDelete, hostOpStateDelete, []api.ValueType{I, I, I}, nil, "vertex", "name_ptr", "name_len")
	fn(abi.ImportTimerRegister, hostTimerRegister, []api.ValueType{I, I, I, L}, nil, "vertex", "key_ptr", "key_len", "time_ms")
	fn(abi.ImportTimerDelete, hostTimerDelete, []api.ValueType{I, I, I, L}, nil, "vertex", "key_ptr", "key_len", "time_ms")
	fn(abi.ImportWatermark, hostWatermark, nil, []api.ValueType{L})
	fn(abi.ImportWatermarkEmit, hostWatermarkEmit, []api.ValueType{L}, nil, "ts")
	fn(abi.ImportEventTimerRegister, hostEventTimerRegister, []api.ValueType{I, I, I, L}, nil, "vertex", "key_ptr", "key_len", "time_ms")
	fn(abi.ImportEventTimerDelete, hostEventTimerDelete, []api.ValueType{I, I, I, L}, nil, "vertex", "key_ptr", "key_len", "time_ms")
	return b
}

func counted(f api.GoModuleFunc) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		instOf(ctx).stats.hostCalls.Add(1)
		f(ctx, mod, stack)
	}
}

func instOf(ctx context.Context) *Instance {
	in, _ := ctx.Value(instKey{}).(*Instance)
	if in == nil {
		panic(trapf("a Sluice host function was called outside a call from the host"))
	}
	return in
}

// read returns guest memory [ptr, ptr+n), trapping when any of it is outside
// memory (the check is done in 64 bits, so ptr+n cannot wrap).
func read(mod api.Module, fn string, what string, ptr, n uint32, max uint32) []byte {
	if n > max {
		panic(trapf("%s.%s: %s of %d bytes, above the limit of %d", abi.HostModule, fn, what, n, max))
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(trapf("%s.%s: %s [%#x, +%d) is outside guest memory (%d bytes)", abi.HostModule, fn, what, ptr, n, mod.Memory().Size()))
	}
	return b
}

func u32(v uint64) uint32 { return uint32(v) }

func hostEmit(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	in.stats.emits.Add(1)
	b := read(mod, abi.ImportEmit, "batch", u32(stack[0]), u32(stack[1]), math.MaxUint32)
	if !emitAllowed(in.calling) {
		panic(trapf("%s.%s: called during %s; records may be emitted only during %s, %s, %s, %s, %s, %s and %s",
			abi.HostModule, abi.ImportEmit, in.calling,
			abi.ExportProcess, abi.ExportSourcePoll, abi.ExportTimers, abi.ExportEventTimers, abi.ExportWatermark, abi.ExportEndInput, abi.ExportBarrier))
	}
	// Size the records slice once for the whole batch rather than growing
	// it record by record; the count is bounded by the batch's length (a
	// record takes at least 5 bytes).
	if len(b) >= 4 {
		if n := int(binary.LittleEndian.Uint32(b)); n > cap(in.emitRecs) && n <= len(b)/5 {
			in.emitRecs = make([]abi.Record, 0, n)
		}
	}
	recs, err := abi.DecodeBatch(in.emitRecs[:0], b)
	if err != nil {
		panic(trapf("%s.%s: %v", abi.HostModule, abi.ImportEmit, err))
	}
	if in.cfg.Emit == nil {
		panic(trapf("%s.%s: the task's last operator %q has no output", abi.HostModule, abi.ImportEmit, in.cfg.Chain[len(in.cfg.Chain)-1].Name))
	}
	// Time spent downstream (back-pressure) is not the guest's.
	in.deadline.pause()
	in.fuelStop()
	err = in.cfg.Emit(recs)
	in.fuelStart()
	in.deadline.resume()
	// The records point into guest memory; do not keep them reachable.
	clear(recs)
	in.emitRecs = recs[:0]
	if err != nil {
		panic(&hostAbort{err: err})
	}
}

// emitAllowed reports whether export may emit: the calls that carry the
// task's records, timers, end of input and barriers. Output from the others
// would have nowhere to go (plan, close: the outputs are finished) or come
// before the task's first record (open, alloc, free, _initialize).
func emitAllowed(export string) bool {
	switch export {
	case abi.ExportProcess, abi.ExportSourcePoll, abi.ExportTimers, abi.ExportEndInput, abi.ExportBarrier,
		abi.ExportEventTimers, abi.ExportWatermark:
		return true
	}
	return false
}

func hostSetPlan(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	b := read(mod, abi.ImportSetPlan, "plan", u32(stack[0]), u32(stack[1]), maxPlanBytes)
	if !in.planning || in.calling != abi.ExportPlan {
		panic(trapf("%s.%s: called outside %s", abi.HostModule, abi.ImportSetPlan, abi.ExportPlan))
	}
	if in.plan != nil {
		panic(trapf("%s.%s: called a second time; declare the job graph exactly once per %s", abi.HostModule, abi.ImportSetPlan, abi.ExportPlan))
	}
	in.plan = append([]byte{}, b...)
}

func hostFail(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	n := u32(stack[1])
	if n > maxFailBytes {
		n = maxFailBytes
	}
	in.failMsg = string(read(mod, abi.ImportFail, "message", u32(stack[0]), n, maxFailBytes))
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	level := clampLevel(int32(u32(stack[0])))
	msg := read(mod, abi.ImportLog, "message", u32(stack[1]), u32(stack[2]), math.MaxUint32)
	in.logs.log(level, "log", msg)
}

func hostCounterAdd(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	name := read(mod, abi.ImportCounterAdd, "name", u32(stack[0]), u32(stack[1]), maxNameBytes)
	in.countsMu.Lock()
	defer in.countsMu.Unlock()
	if _, ok := in.counts[string(name)]; !ok && len(in.counts) >= maxCounterNames {
		panic(trapf("%s.%s: more than %d counters", abi.HostModule, abi.ImportCounterAdd, maxCounterNames))
	}
	in.counts[string(name)] += int64(stack[2])
}

func hostNow(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	if in.lim.GrantClock {
		stack[0] = uint64(time.Now().UnixMilli())
		return
	}
	stack[0] = uint64(in.now)
}

// operator checks that vertex is an operator of the instance's chain, and
// a keyed one when keyed is set.
func (in *Instance) operator(fn string, vertex uint32, keyed bool) {
	if in.state == nil {
		panic(trapf("%s.%s: state is not available during %s", abi.HostModule, fn, in.calling))
	}
	kind, ok := in.kinds[vertex]
	if !ok {
		panic(trapf("%s.%s: vertex %d is not an operator of this task", abi.HostModule, fn, vertex))
	}
	if keyed && !jobgraph.Keyed(kind) {
		panic(trapf("%s.%s: vertex %d is a %s; keyed state and timers belong to reduce and process operators", abi.HostModule, fn, vertex, kind))
	}
}

func (in *Instance) stateKey(mod api.Module, fn string, stack []uint64) (key, ck []byte) {
	vertex := u32(stack[0])
	in.operator(fn, vertex, true)
	name := read(mod, fn, "name", u32(stack[1]), u32(stack[2]), maxNameBytes)
	key = read(mod, fn, "key", u32(stack[3]), u32(stack[4]), maxKeyBytes)
	in.keyBuf = appendStateKey(in.keyBuf[:0], vertex, name, key)
	return key, in.keyBuf
}

func hostStateGet(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	key, ck := in.stateKey(mod, abi.ImportStateGet, stack)
	buf := read(mod, abi.ImportStateGet, "buffer", u32(stack[5]), u32(stack[6]), math.MaxUint32)
	v, ok, err := in.state.get(key, ck)
	if err != nil {
		panic(trapf("%s.%s: %v", abi.HostModule, abi.ImportStateGet, err))
	}
	stack[0] = copyOut(buf, v, ok)
}

// copyOut implements the get convention: Absent, or the value's length,
// with the value copied only when it fits buf.
func copyOut(buf, v []byte, ok bool) uint64 {
	if !ok {
		absent := int32(abi.Absent)
		return uint64(uint32(absent))
	}
	if len(v) <= len(buf) {
		copy(buf, v)
	}
	return uint64(len(v))
}

func hostStatePut(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	key, ck := in.stateKey(mod, abi.ImportStatePut, stack)
	val := read(mod, abi.ImportStatePut, "value", u32(stack[5]), u32(stack[6]), maxValueBytes)
	if err := in.state.put(key, ck, val, in.lim.MaxStateBytes); err != nil {
		in.stateTrap(abi.ImportStatePut, err)
	}
}

// hostStatePutBatch is state_put for every record of a batch of {key,
// value} records: one crossing for many keys, which is how the Go SDK's
// Reduce writes back the accumulators it keeps between barriers.
func hostStatePutBatch(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	const fn = abi.ImportStatePutBatch
	vertex := u32(stack[0])
	in.operator(fn, vertex, true)
	name := read(mod, fn, "name", u32(stack[1]), u32(stack[2]), maxNameBytes)
	b := read(mod, fn, "batch", u32(stack[3]), u32(stack[4]), math.MaxUint32)
	recs, err := abi.DecodeBatch(in.putRecs[:0], b)
	// The records point into guest memory; do not keep them reachable.
	defer func() { clear(recs); in.putRecs = recs[:0] }()
	if err != nil {
		panic(trapf("%s.%s: %v", abi.HostModule, fn, err))
	}
	for i := range recs {
		r := &recs[i]
		switch {
		case !r.HasKey || r.HasTime:
			panic(trapf("%s.%s: record %d: want a key and no time", abi.HostModule, fn, i))
		case len(r.Key) > maxKeyBytes:
			panic(trapf("%s.%s: record %d: key of %d bytes, above the limit of %d", abi.HostModule, fn, i, len(r.Key), maxKeyBytes))
		case len(r.Value) > maxValueBytes:
			panic(trapf("%s.%s: record %d: value of %d bytes, above the limit of %d", abi.HostModule, fn, i, len(r.Value), maxValueBytes))
		}
		in.keyBuf = appendStateKey(in.keyBuf[:0], vertex, name, r.Key)
		if err := in.state.put(r.Key, in.keyBuf, r.Value, in.lim.MaxStateBytes); err != nil {
			in.stateTrap(fn, err)
		}
	}
}

func (in *Instance) stateTrap(fn string, err error) {
	te := trapf("%s.%s: %v", abi.HostModule, fn, err)
	if errors.Is(err, errStateLimit) {
		te.cause = ErrMemoryLimit
	}
	panic(te)
}

func hostStateDelete(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	key, ck := in.stateKey(mod, abi.ImportStateDelete, stack)
	if err := in.state.del(key, ck); err != nil {
		panic(trapf("%s.%s: %v", abi.HostModule, abi.ImportStateDelete, err))
	}
}

// hostStateScan hands the guest the entries of one keyed state of one
// operator, as batches of {key, value} records, across calls: it returns a
// batch's length, 0 once all were handed out (and the scan starts over), or
// -n when the next entry needs an n-byte buffer. The host keeps the cursor.
func hostStateScan(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	vertex := u32(stack[0])
	in.operator(abi.ImportStateScan, vertex, true)
	name := read(mod, abi.ImportStateScan, "name", u32(stack[1]), u32(stack[2]), maxNameBytes)
	buf := read(mod, abi.ImportStateScan, "buffer", u32(stack[3]), u32(stack[4]), math.MaxUint32)
	if len(buf) > math.MaxInt32 {
		buf = buf[:math.MaxInt32]
	}
	prefix := appendStateKey(nil, vertex, name, nil)
	sc := in.scan
	if sc == nil || sc.prefix != string(prefix) {
		sc = &scanState{prefix: string(prefix), keys: in.state.scanKeys(prefix)}
		in.scan = sc
	}
	out := buf[:0]
	count := uint32(0)
	for sc.pos < len(sc.keys) {
		ck := sc.keys[sc.pos]
		key := []byte(ck[len(prefix):])
		v, ok := in.state.lookup(ck, key)
		if !ok {
			sc.pos++ // deleted since the scan started
			continue
		}
		r := abi.Record{Key: key, HasKey: true, Value: v}
		need := abi.RecordSize(&r)
		if count == 0 && 4+need > len(buf) {
			stack[0] = uint64(uint32(int32(-(4 + need))))
			return
		}
		if 4+len(out)+need > len(buf) {
			break
		}
		if count == 0 {
			out = buf[:4]
		}
		out = abi.AppendRecord(out, &r)
		count++
		sc.pos++
	}
	if count == 0 {
		in.scan = nil
		stack[0] = 0
		return
	}
	binary.LittleEndian.PutUint32(buf, count)
	stack[0] = uint64(len(out))
}

func (in *Instance) opKey(mod api.Module, fn string, stack []uint64) []byte {
	vertex := u32(stack[0])
	in.operator(fn, vertex, false)
	name := read(mod, fn, "name", u32(stack[1]), u32(stack[2]), maxNameBytes)
	in.keyBuf = appendStateKey(in.keyBuf[:0], vertex, name, nil)
	return in.keyBuf
}

func hostOpStateGet(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	ck := in.opKey(mod, abi.ImportOpStateGet, stack)
	buf := read(mod, abi.ImportOpStateGet, "buffer", u32(stack[3]), u32(stack[4]), math.MaxUint32)
	v, ok := in.state.opGet(ck)
	stack[0] = copyOut(buf, v, ok)
}

func hostOpStatePut(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	ck := in.opKey(mod, abi.ImportOpStatePut, stack)
	val := read(mod, abi.ImportOpStatePut, "value", u32(stack[3]), u32(stack[4]), maxValueBytes)
	if err := in.state.opPut(ck, val, in.lim.MaxStateBytes); err != nil {
		in.stateTrap(abi.ImportOpStatePut, err)
	}
}

func hostOpStateDelete(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	in.state.opDelete(in.opKey(mod, abi.ImportOpStateDelete, stack))
}

func (in *Instance) timerArgs(mod api.Module, fn string, stack []uint64) (uint32, []byte, int64) {
	vertex := u32(stack[0])
	in.operator(fn, vertex, true)
	key := read(mod, fn, "key", u32(stack[1]), u32(stack[2]), maxKeyBytes)
	return vertex, key, int64(stack[3])
}

func hostTimerRegister(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	vertex, key, t := in.timerArgs(mod, abi.ImportTimerRegister, stack)
	if err := in.state.registerTimer(vertex, key, t, in.lim.MaxStateBytes); err != nil {
		in.stateTrap(abi.ImportTimerRegister, err)
	}
}

func hostTimerDelete(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	vertex, key, t := in.timerArgs(mod, abi.ImportTimerDelete, stack)
	if err := in.state.deleteTimer(vertex, key, t); err != nil {
		panic(trapf("%s.%s: %v", abi.HostModule, abi.ImportTimerDelete, err))
	}
}

func hostWatermark(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = uint64(instOf(ctx).watermark)
}

// hostWatermarkEmit takes a guest source's watermark: only a source that
// declared the "guest" strategy, during sluice_source_poll, so it stays in
// order with the records of that poll.
func hostWatermarkEmit(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	ts := int64(stack[0])
	if in.calling != abi.ExportSourcePoll {
		panic(trapf("%s.%s: called during %s; a source emits watermarks during %s only", abi.HostModule, abi.ImportWatermarkEmit, in.calling, abi.ExportSourcePoll))
	}
	if in.cfg.EmitWatermark == nil {
		panic(trapf("%s.%s: the source does not declare the %q watermark strategy: declare it (guest.GuestWatermarks()) or let the host generate them", abi.HostModule, abi.ImportWatermarkEmit, jobgraph.WatermarkGuest))
	}
	in.deadline.pause()
	err := in.cfg.EmitWatermark(ts)
	in.deadline.resume()
	if err != nil {
		panic(&hostAbort{err: err})
	}
}

func hostEventTimerRegister(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	vertex, key, t := in.timerArgs(mod, abi.ImportEventTimerRegister, stack)
	if err := in.state.registerTimer(vertex|eventTimerBit, key, t, in.lim.MaxStateBytes); err != nil {
		in.stateTrap(abi.ImportEventTimerRegister, err)
	}
}

func hostEventTimerDelete(ctx context.Context, mod api.Module, stack []uint64) {
	in := instOf(ctx)
	vertex, key, t := in.timerArgs(mod, abi.ImportEventTimerDelete, stack)
	if err := in.state.deleteTimer(vertex|eventTimerBit, key, t); err != nil {
		panic(trapf("%s.%s: %v", abi.HostModule, abi.ImportEventTimerDelete, err))
	}
}
