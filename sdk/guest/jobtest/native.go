//go:build !wasip1

package jobtest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/sdk/guest/internal/native"
	"github.com/sluicehq/sluice/wasmhost"
)

// The host of a native run: what wasmhost's host functions do for a Wasm
// guest (docs/ABI.md section 4), for the Go SDK called as Go code. State,
// key groups, timers and snapshots are a wasmhost.State, the store a
// TaskManager uses; this file holds only the rules around it: which call
// may use which import, the bounds on names, keys and values, the scan
// cursor, the statuses, and what a failure is.

// Bounds on what a guest may hand the host in one call, as wasmhost's.
const (
	maxNameBytes    = 1 << 10
	maxKeyBytes     = 1 << 20
	maxValueBytes   = 1 << 30
	maxFailBytes    = 64 << 10
	maxCounterNames = 1 << 10
	maxPlanBytes    = 4 << 20
)

// nativeDigest stands for the module digest in a native run's errors.
const nativeDigest = "native"

// trapError is what a host method panics with when the guest misuses the
// ABI, where a Wasm guest would trap.
type trapError struct {
	msg   string
	cause error // wasmhost.ErrTrap or wasmhost.ErrMemoryLimit
}

func (e *trapError) Error() string { return e.msg }

// hostAbort is what a host method panics with when the host side (Emit)
// fails.
type hostAbort struct{ err error }

// nativeInstance runs one task's chain in the Go SDK, in this process.
type nativeInstance struct {
	cfg   wasmhost.TaskConfig
	lim   wasmhost.Limits
	mod   native.Module
	state *wasmhost.State
	kinds map[int]jobgraph.Kind

	keyGroupStart, keyGroupEnd int

	planning bool
	plan     []byte
	calling  string // the export running now
	failMsg  string
	trap     *trapError // the first trap of the current call
	abort    error      // Emit's error in the current call
	failed   error
	opened   bool
	closed   bool

	counts    map[string]int64
	now       int64
	watermark int64 // the latest AdvanceWatermark; math.MinInt64 before any
	scan      *scanCursor
	in        []byte // input batches, reused as the Wasm host reuses its region
	recs      []abi.Record
}

type scanCursor struct {
	vertex int32
	name   string
	keys   [][]byte
	pos    int
}

// nativePlan runs the registered job's plan with args and returns the graph
// it declares, as wasmhost.Module.Plan.
func nativePlan(args []string, bind func(native.Host) (native.Module, error)) (*jobgraph.Graph, error) {
	n := &nativeInstance{planning: true, counts: map[string]int64{}, watermark: math.MinInt64}
	mod, err := bind(n)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer mod.Release()
	n.mod = mod
	recs := make([]abi.Record, len(args))
	for i, a := range args {
		recs[i].Value = []byte(a)
	}
	b := abi.AppendBatch(nil, recs)
	if _, err := n.call(abi.ExportPlan, func() int32 { return mod.Plan(b) }); err != nil {
		return nil, err
	}
	if n.plan == nil {
		return nil, fmt.Errorf("plan: %s returned without calling %s.%s", abi.ExportPlan, abi.HostModule, abi.ImportSetPlan)
	}
	var g jobgraph.Graph
	if err := json.Unmarshal(n.plan, &g); err != nil {
		return nil, fmt.Errorf("plan: the graph the guest declared is not valid JSON: %w", err)
	}
	return &g, nil
}

// newNativeInstance checks cfg as wasmhost.Module.Instantiate does and
// makes the instance over the module bind returns for it (the Go SDK's,
// guest.NativeModule); Close releases the module.
func newNativeInstance(cfg wasmhost.TaskConfig, bind func(native.Host) (native.Module, error)) (*nativeInstance, error) {
	if len(cfg.Chain) == 0 {
		return nil, errors.New("instantiate: empty chain")
	}
	if cfg.Parallelism < 1 || cfg.Subtask < 0 || cfg.Subtask >= cfg.Parallelism {
		return nil, fmt.Errorf("instantiate: subtask %d of parallelism %d", cfg.Subtask, cfg.Parallelism)
	}
	if cfg.MaxParallelism == 0 {
		cfg.MaxParallelism = jobgraph.DefaultMaxParallelism
	}
	if cfg.MaxParallelism < cfg.Parallelism {
		return nil, fmt.Errorf("instantiate: parallelism %d above max parallelism %d", cfg.Parallelism, cfg.MaxParallelism)
	}
	kinds := make(map[int]jobgraph.Kind, len(cfg.Chain))
	for _, v := range cfg.Chain {
		if v.Connector != "" {
			return nil, fmt.Errorf("instantiate: vertex %d %q is host connector %q; the chain holds guest operators only", v.ID, v.Name, v.Connector)
		}
		kinds[v.ID] = v.Kind
	}
	start, end := keygroup.Range(cfg.Subtask, cfg.Parallelism, cfg.MaxParallelism)
	st := cfg.State
	if st == nil {
		st = wasmhost.NewState(cfg.MaxParallelism, start, end)
	} else if mp, s, e := st.KeyGroups(); mp != cfg.MaxParallelism || s != start || e != end {
		return nil, fmt.Errorf("instantiate: state holds key groups %d..%d of %d, subtask %d of %d needs %d..%d of %d",
			s, e, mp, cfg.Subtask, cfg.Parallelism, start, end, cfg.MaxParallelism)
	}
	lim := cfg.Limits
	if lim.MaxStateBytes == 0 {
		lim.MaxStateBytes = wasmhost.DefaultMaxStateBytes
	}
	n := &nativeInstance{cfg: cfg, lim: lim, state: st, kinds: kinds,
		keyGroupStart: start, keyGroupEnd: end, counts: map[string]int64{}, watermark: math.MinInt64}
	mod, err := bind(n)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	n.mod = mod
	return n, nil
}

func (n *nativeInstance) usable() error {
	if n.failed != nil {
		return n.failed
	}
	if n.closed {
		return wasmhost.ErrClosed
	}
	return nil
}

// call runs one export and turns every way it can fail into an error, as
// wasmhost.Instance's call and status do.
func (n *nativeInstance) call(name string, fn func() int32) (st int32, err error) {
	if err := n.usable(); err != nil {
		return 0, err
	}
	n.failMsg, n.trap, n.abort = "", nil, nil
	n.calling = name
	defer func() {
		n.calling = ""
		// The SDK recovers every panic of an export, ours included; one
		// that escapes it is a trap of the call all the same.
		if r := recover(); r != nil && n.trap == nil && n.abort == nil {
			n.trap = &trapError{msg: fmt.Sprint(r), cause: wasmhost.ErrTrap}
		}
		switch {
		case n.abort != nil:
			n.failed = fmt.Errorf("guest %s: %w", name, n.abort)
		case n.trap != nil:
			// A trap ends the call whatever the guest returned.
			n.failed = &wasmhost.GuestError{Digest: nativeDigest, Function: name, Cause: n.trap.cause, Message: n.trap.msg}
		default:
			st, err = n.status(name, st)
			return
		}
		st, err = 0, n.failed
	}()
	return fn(), nil
}

func (n *nativeInstance) status(name string, st int32) (int32, error) {
	switch {
	case st == abi.StatusOK, st == abi.StatusDone && name == abi.ExportSourcePoll:
		return st, nil
	case st == abi.StatusError:
		msg := n.failMsg
		if msg == "" {
			msg = "(the guest gave no reason: call sluice.fail before returning 1)"
		}
		n.failed = &wasmhost.GuestError{Digest: nativeDigest, Function: name, Cause: wasmhost.ErrGuestFailed, Message: msg}
	case st == abi.StatusDone:
		n.failed = &wasmhost.GuestError{Digest: nativeDigest, Function: name, Cause: wasmhost.ErrTrap, Message: fmt.Sprintf(
			"%s returned status 2 (DONE), which only %s may return: return 0 (OK), or call sluice.fail and return 1 (ERROR)",
			name, abi.ExportSourcePoll)}
	default:
		n.failed = &wasmhost.GuestError{Digest: nativeDigest, Function: name, Cause: wasmhost.ErrTrap, Message: fmt.Sprintf(
			"%s returned unknown status %d: the statuses are 0 (OK), 1 (ERROR) and, from %s only, 2 (DONE)",
			name, st, abi.ExportSourcePoll)}
	}
	return st, n.failed
}

// The instance methods, as wasmhost.Instance's.

func (n *nativeInstance) State() *wasmhost.State { return n.state }

func (n *nativeInstance) Open(ctx context.Context) error {
	if n.opened {
		return errors.New("open: already open")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ids := make([]int, len(n.cfg.Chain))
	for i, v := range n.cfg.Chain {
		ids[i] = v.ID
	}
	info, err := json.Marshal(abi.TaskInfo{
		JobID: n.cfg.JobID, Task: n.cfg.TaskName, Chain: ids,
		Subtask: n.cfg.Subtask, Parallelism: n.cfg.Parallelism, MaxParallelism: n.cfg.MaxParallelism,
		KeyGroupStart: n.keyGroupStart, KeyGroupEnd: n.keyGroupEnd, Args: n.cfg.Args,
	})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if _, err := n.call(abi.ExportOpen, func() int32 { return n.mod.Open(info) }); err != nil {
		return err
	}
	n.opened = true
	return nil
}

func (n *nativeInstance) Process(ctx context.Context, recs []abi.Record) error {
	if len(recs) == 0 {
		return nil
	}
	return n.callBatch(ctx, abi.ExportProcess, n.mod.Process, recs)
}

func (n *nativeInstance) callBatch(ctx context.Context, name string, fn func([]byte) int32, recs []abi.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("guest %s: %w", name, err)
	}
	n.in = abi.AppendBatch(n.in[:0], recs)
	_, err := n.call(name, func() int32 { return fn(n.in) })
	return err
}

func (n *nativeInstance) SourcePoll(ctx context.Context, max int) (bool, error) {
	if max < 1 || max > math.MaxInt32 {
		return false, fmt.Errorf("source poll: max %d out of range", max)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("guest %s: %w", abi.ExportSourcePoll, err)
	}
	st, err := n.call(abi.ExportSourcePoll, func() int32 { return n.mod.SourcePoll(int32(max)) })
	return st == abi.StatusDone, err
}

func (n *nativeInstance) EndInput(ctx context.Context) error {
	_, err := n.call(abi.ExportEndInput, n.mod.EndInput)
	return err
}

func (n *nativeInstance) Barrier(ctx context.Context, checkpointID int64) error {
	_, err := n.call(abi.ExportBarrier, func() int32 { return n.mod.Barrier(checkpointID) })
	return err
}

func (n *nativeInstance) NextTimer() (int64, bool) { return n.state.NextTimer() }

func (n *nativeInstance) FireTimers(ctx context.Context, nowMs int64) error {
	if err := n.usable(); err != nil {
		return err
	}
	if nowMs > n.now {
		n.now = nowMs
	}
	if at, ok := n.state.NextTimer(); !ok || at > nowMs {
		return nil
	}
	due := n.state.PopDueTimers(nowMs)
	recs := make([]abi.Record, len(due))
	for i, tm := range due {
		recs[i] = abi.Record{Key: tm.Key, HasKey: true, Time: tm.TimeMs, HasTime: true,
			Value: binary.LittleEndian.AppendUint32(nil, uint32(tm.Vertex))}
	}
	return n.callBatch(ctx, abi.ExportTimers, n.mod.Timers, recs)
}

// Watermark is wasmhost.Instance.Watermark.
func (n *nativeInstance) Watermark() int64 { return n.watermark }

// NextEventTimer is wasmhost.Instance.NextEventTimer.
func (n *nativeInstance) NextEventTimer() (int64, bool) { return n.state.NextEventTimer() }

// AdvanceWatermark is wasmhost.Instance.AdvanceWatermark: the event timers
// at or below wm fire, earliest first, then sluice_watermark runs.
func (n *nativeInstance) AdvanceWatermark(ctx context.Context, wm int64) error {
	if err := n.usable(); err != nil {
		return err
	}
	if wm <= n.watermark {
		return nil
	}
	n.watermark = wm
	if at, ok := n.state.NextEventTimer(); ok && at <= wm {
		due := n.state.PopDueEventTimers(wm)
		recs := make([]abi.Record, len(due))
		for i, tm := range due {
			recs[i] = abi.Record{Key: tm.Key, HasKey: true, Time: tm.TimeMs, HasTime: true,
				Value: binary.LittleEndian.AppendUint32(nil, uint32(tm.Vertex))}
		}
		if err := n.callBatch(ctx, abi.ExportEventTimers, n.mod.EventTimers, recs); err != nil {
			return err
		}
	}
	if !n.mod.HasWatermark() {
		return nil
	}
	_, err := n.call(abi.ExportWatermark, func() int32 { return n.mod.Watermark(wm) })
	return err
}

func (n *nativeInstance) Counters() map[string]int64 {
	out := make(map[string]int64, len(n.counts))
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

func (n *nativeInstance) Close(ctx context.Context) error {
	if n.closed {
		return nil
	}
	var err error
	if n.opened && n.failed == nil {
		_, err = n.call(abi.ExportClose, n.mod.Close)
	}
	n.closed = true
	n.mod.Release()
	return err
}

// The host methods (native.Host).

var _ native.Host = (*nativeInstance)(nil)

// trapf records a trap of the current call and panics to end it.
func (n *nativeInstance) trapf(cause error, format string, args ...any) {
	te := &trapError{msg: fmt.Sprintf(format, args...), cause: cause}
	if n.trap == nil {
		n.trap = te
	}
	panic(te)
}

func (n *nativeInstance) trapErr(fn string, err error) {
	cause := wasmhost.ErrTrap
	if errors.Is(err, wasmhost.ErrMemoryLimit) {
		cause = wasmhost.ErrMemoryLimit
	}
	n.trapf(cause, "%s.%s: %v", abi.HostModule, fn, err)
}

func (n *nativeInstance) bound(fn, what string, b []byte, max int) {
	if len(b) > max {
		n.trapf(wasmhost.ErrTrap, "%s.%s: %s of %d bytes, above the limit of %d", abi.HostModule, fn, what, len(b), max)
	}
}

// emitAllowed is wasmhost's rule: records may be emitted only by the calls
// that carry the task's records, timers, end of input and barriers.
func emitAllowed(export string) bool {
	switch export {
	case abi.ExportProcess, abi.ExportSourcePoll, abi.ExportTimers, abi.ExportEndInput, abi.ExportBarrier,
		abi.ExportEventTimers, abi.ExportWatermark:
		return true
	}
	return false
}

func (n *nativeInstance) Emit(b []byte) {
	if !emitAllowed(n.calling) {
		n.trapf(wasmhost.ErrTrap, "%s.%s: called during %s; records may be emitted only during %s, %s, %s, %s, %s, %s and %s",
			abi.HostModule, abi.ImportEmit, n.calling,
			abi.ExportProcess, abi.ExportSourcePoll, abi.ExportTimers, abi.ExportEventTimers, abi.ExportWatermark, abi.ExportEndInput, abi.ExportBarrier)
	}
	recs, err := abi.DecodeBatch(n.recs[:0], b)
	if err != nil {
		n.trapf(wasmhost.ErrTrap, "%s.%s: %v", abi.HostModule, abi.ImportEmit, err)
	}
	defer func() { clear(recs); n.recs = recs[:0] }()
	if n.cfg.Emit == nil {
		n.trapf(wasmhost.ErrTrap, "%s.%s: the task's last operator %q has no output", abi.HostModule, abi.ImportEmit, n.cfg.Chain[len(n.cfg.Chain)-1].Name)
	}
	if err := n.cfg.Emit(recs); err != nil {
		n.abort = err
		panic(&hostAbort{err: err})
	}
}

func (n *nativeInstance) SetPlan(b []byte) {
	n.bound(abi.ImportSetPlan, "plan", b, maxPlanBytes)
	if !n.planning || n.calling != abi.ExportPlan {
		n.trapf(wasmhost.ErrTrap, "%s.%s: called outside %s", abi.HostModule, abi.ImportSetPlan, abi.ExportPlan)
	}
	if n.plan != nil {
		n.trapf(wasmhost.ErrTrap, "%s.%s: called a second time; declare the job graph exactly once per %s", abi.HostModule, abi.ImportSetPlan, abi.ExportPlan)
	}
	n.plan = append([]byte{}, b...)
}

func (n *nativeInstance) Fail(msg string) {
	if len(msg) > maxFailBytes {
		msg = msg[:maxFailBytes]
	}
	n.failMsg = msg
}

func (n *nativeInstance) Log(level int32, msg string) {
	if n.cfg.Logger != nil {
		// Clamped to the ABI's four levels, as wasmhost does.
		l := slog.Level(min(max(level, int32(slog.LevelDebug)), int32(slog.LevelError)))
		n.cfg.Logger.Log(context.Background(), l, msg, "stream", "log")
	}
}

func (n *nativeInstance) CounterAdd(name string, delta int64) {
	if len(name) > maxNameBytes {
		n.trapf(wasmhost.ErrTrap, "%s.%s: name of %d bytes, above the limit of %d", abi.HostModule, abi.ImportCounterAdd, len(name), maxNameBytes)
	}
	if _, ok := n.counts[name]; !ok && len(n.counts) >= maxCounterNames {
		n.trapf(wasmhost.ErrTrap, "%s.%s: more than %d counters", abi.HostModule, abi.ImportCounterAdd, maxCounterNames)
	}
	n.counts[name] += delta
}

func (n *nativeInstance) Now() int64 {
	if n.lim.GrantClock {
		return time.Now().UnixMilli()
	}
	return n.now
}

// operator checks that vertex is an operator of the chain, and a keyed one
// when keyed is set.
func (n *nativeInstance) operator(fn string, vertex int32, keyed bool) {
	if n.state == nil {
		n.trapf(wasmhost.ErrTrap, "%s.%s: state is not available during %s", abi.HostModule, fn, n.calling)
	}
	kind, ok := n.kinds[int(vertex)]
	if !ok {
		n.trapf(wasmhost.ErrTrap, "%s.%s: vertex %d is not an operator of this task", abi.HostModule, fn, vertex)
	}
	if keyed && !jobgraph.Keyed(kind) {
		n.trapf(wasmhost.ErrTrap, "%s.%s: vertex %d is a %s; keyed state and timers belong to reduce and process operators", abi.HostModule, fn, vertex, kind)
	}
}

func (n *nativeInstance) keyed(fn string, vertex int32, name string, key []byte) {
	n.operator(fn, vertex, true)
	n.bound(fn, "name", []byte(name), maxNameBytes)
	n.bound(fn, "key", key, maxKeyBytes)
}

// copyOut is the get convention: Absent, or the value's length, with the
// value copied only when it fits buf.
func copyOut(buf, v []byte, ok bool) int32 {
	if !ok {
		return abi.Absent
	}
	if len(v) <= len(buf) {
		copy(buf, v)
	}
	return int32(len(v))
}

func (n *nativeInstance) StateGet(vertex int32, name string, key, buf []byte) int32 {
	n.keyed(abi.ImportStateGet, vertex, name, key)
	v, ok, err := n.state.Get(int(vertex), name, key)
	if err != nil {
		n.trapErr(abi.ImportStateGet, err)
	}
	return copyOut(buf, v, ok)
}

func (n *nativeInstance) StatePut(vertex int32, name string, key, val []byte) {
	n.keyed(abi.ImportStatePut, vertex, name, key)
	n.bound(abi.ImportStatePut, "value", val, maxValueBytes)
	if err := n.state.Put(int(vertex), name, key, val, n.lim.MaxStateBytes); err != nil {
		n.trapErr(abi.ImportStatePut, err)
	}
}

func (n *nativeInstance) StatePutBatch(vertex int32, name string, batch []byte) {
	const fn = abi.ImportStatePutBatch
	n.operator(fn, vertex, true)
	n.bound(fn, "name", []byte(name), maxNameBytes)
	recs, err := abi.DecodeBatch(nil, batch)
	if err != nil {
		n.trapf(wasmhost.ErrTrap, "%s.%s: %v", abi.HostModule, fn, err)
	}
	for i := range recs {
		r := &recs[i]
		switch {
		case !r.HasKey || r.HasTime:
			n.trapf(wasmhost.ErrTrap, "%s.%s: record %d: want a key and no time", abi.HostModule, fn, i)
		case len(r.Key) > maxKeyBytes:
			n.trapf(wasmhost.ErrTrap, "%s.%s: record %d: key of %d bytes, above the limit of %d", abi.HostModule, fn, i, len(r.Key), maxKeyBytes)
		case len(r.Value) > maxValueBytes:
			n.trapf(wasmhost.ErrTrap, "%s.%s: record %d: value of %d bytes, above the limit of %d", abi.HostModule, fn, i, len(r.Value), maxValueBytes)
		}
		if err := n.state.Put(int(vertex), name, r.Key, r.Value, n.lim.MaxStateBytes); err != nil {
			n.trapErr(fn, err)
		}
	}
}

func (n *nativeInstance) StateDelete(vertex int32, name string, key []byte) {
	n.keyed(abi.ImportStateDelete, vertex, name, key)
	if err := n.state.Delete(int(vertex), name, key); err != nil {
		n.trapErr(abi.ImportStateDelete, err)
	}
}

// StateScan hands out the entries of (vertex, name) across calls, with
// the host's cursor, as wasmhost's state_scan.
func (n *nativeInstance) StateScan(vertex int32, name string, buf []byte) int32 {
	n.operator(abi.ImportStateScan, vertex, true)
	n.bound(abi.ImportStateScan, "name", []byte(name), maxNameBytes)
	if len(buf) > math.MaxInt32 {
		buf = buf[:math.MaxInt32]
	}
	sc := n.scan
	if sc == nil || sc.vertex != vertex || sc.name != name {
		sc = &scanCursor{vertex: vertex, name: name, keys: n.state.Keys(int(vertex), name)}
		n.scan = sc
	}
	out := buf[:0]
	count := uint32(0)
	for sc.pos < len(sc.keys) {
		key := sc.keys[sc.pos]
		v, ok, _ := n.state.Get(int(vertex), name, key)
		if !ok {
			sc.pos++ // deleted since the scan started
			continue
		}
		r := abi.Record{Key: key, HasKey: true, Value: v}
		need := abi.RecordSize(&r)
		if count == 0 && 4+need > len(buf) {
			return int32(-(4 + need))
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
		n.scan = nil
		return 0
	}
	binary.LittleEndian.PutUint32(buf, count)
	return int32(len(out))
}

func (n *nativeInstance) opName(fn string, vertex int32, name string) {
	n.operator(fn, vertex, false)
	n.bound(fn, "name", []byte(name), maxNameBytes)
}

func (n *nativeInstance) OpStateGet(vertex int32, name string, buf []byte) int32 {
	n.opName(abi.ImportOpStateGet, vertex, name)
	v, ok := n.state.OperatorState(int(vertex), name)
	return copyOut(buf, v, ok)
}

func (n *nativeInstance) OpStatePut(vertex int32, name string, val []byte) {
	n.opName(abi.ImportOpStatePut, vertex, name)
	n.bound(abi.ImportOpStatePut, "value", val, maxValueBytes)
	if err := n.state.PutOperatorState(int(vertex), name, val, n.lim.MaxStateBytes); err != nil {
		n.trapErr(abi.ImportOpStatePut, err)
	}
}

func (n *nativeInstance) OpStateDelete(vertex int32, name string) {
	n.opName(abi.ImportOpStateDelete, vertex, name)
	n.state.DeleteOperatorState(int(vertex), name)
}

func (n *nativeInstance) TimerRegister(vertex int32, key []byte, t int64) {
	n.operator(abi.ImportTimerRegister, vertex, true)
	n.bound(abi.ImportTimerRegister, "key", key, maxKeyBytes)
	if err := n.state.RegisterTimer(int(vertex), key, t, n.lim.MaxStateBytes); err != nil {
		n.trapErr(abi.ImportTimerRegister, err)
	}
}

func (n *nativeInstance) TimerDelete(vertex int32, key []byte, t int64) {
	n.operator(abi.ImportTimerDelete, vertex, true)
	n.bound(abi.ImportTimerDelete, "key", key, maxKeyBytes)
	if err := n.state.DeleteTimer(int(vertex), key, t); err != nil {
		n.trapErr(abi.ImportTimerDelete, err)
	}
}

// WatermarkEmit is watermark_emit: a guest source's watermark, during
// sluice_source_poll, for a source with the "guest" strategy.
func (n *nativeInstance) WatermarkEmit(ts int64) {
	if n.calling != abi.ExportSourcePoll {
		n.trapf(wasmhost.ErrTrap, "%s.%s: called during %s; a source emits watermarks during %s only", abi.HostModule, abi.ImportWatermarkEmit, n.calling, abi.ExportSourcePoll)
	}
	if n.cfg.EmitWatermark == nil {
		n.trapf(wasmhost.ErrTrap, "%s.%s: the source does not declare the %q watermark strategy: declare it (guest.GuestWatermarks()) or let the host generate them", abi.HostModule, abi.ImportWatermarkEmit, jobgraph.WatermarkGuest)
	}
	if err := n.cfg.EmitWatermark(ts); err != nil {
		n.abort = err
		panic(&hostAbort{err: err})
	}
}

func (n *nativeInstance) EventTimerRegister(vertex int32, key []byte, t int64) {
	n.operator(abi.ImportEventTimerRegister, vertex, true)
	n.bound(abi.ImportEventTimerRegister, "key", key, maxKeyBytes)
	if err := n.state.RegisterEventTimer(int(vertex), key, t, n.lim.MaxStateBytes); err != nil {
		n.trapErr(abi.ImportEventTimerRegister, err)
	}
}

func (n *nativeInstance) EventTimerDelete(vertex int32, key []byte, t int64) {
	n.operator(abi.ImportEventTimerDelete, vertex, true)
	n.bound(abi.ImportEventTimerDelete, "key", key, maxKeyBytes)
	if err := n.state.DeleteEventTimer(int(vertex), key, t); err != nil {
		n.trapErr(abi.ImportEventTimerDelete, err)
	}
}
