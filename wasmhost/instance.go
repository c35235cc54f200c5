package wasmhost

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bytedance/sonic"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/wasmhost/internal/rewrite"
)

// Instance is one module instance running one task's chain of operators.
//
// # Notes
//
// One goroutine drives an instance (Open, Process, ..., Close); Counters
// and NextTimer may be called from others. After any error the
// instance is unusable: every later call returns the first error.
type Instance struct {
	m      *Module
	cfg    TaskConfig
	lim    Limits
	logger *slog.Logger
	state  *State
	kinds  map[uint32]jobgraph.Kind

	keyGroupStart, keyGroupEnd int

	mod      api.Module
	mem      api.Memory
	deadline deadline
	alloc    *cappedAllocator
	logs     *logSink
	stdout   *streamWriter
	stderr   *streamWriter
	fns      struct {
		alloc, free, plan, open, process, sourcePoll, endInput, barrier, timers, close api.Function
		eventTimers, watermark                                                         api.Function
	}

	stack        [2]uint64
	inPtr, inCap uint32 // the region from sluice_alloc that input batches go into
	emitRecs     []abi.Record
	putRecs      []abi.Record
	keyBuf       []byte
	timerRecs    []abi.Record
	scan         *scanState
	now          int64 // virtual processing time: the latest FireTimers time
	watermark    int64 // the task's event time: the latest AdvanceWatermark

	planning bool
	calling  string // the export running now, for the imports that only some allow
	plan     []byte
	failMsg  string
	opened   bool
	closed   bool
	failed   error

	countsMu sync.Mutex
	counts   map[string]int64

	stats struct{ calls, allocs, emits, hostCalls atomic.Int64 }

	// sampler, while set, records the guest's stack at its ticks (stacks.go).
	sampler atomic.Pointer[stackSampler]

	// The guest's fuel globals (see internal/rewrite); meter counts the
	// fuel at every trip and call end (fuel.go) into fuel, for other
	// goroutines, as pages holds the memory size after each call.
	fuelLeft, fuelTrips api.Global
	meter               fuelMeter
	fuel, pages         atomic.Int64
}

// instKey is the context key under which calls into the guest carry their
// Instance, so the shared host functions know whose call they serve.
type instKey struct{}

// callStats counts crossings of the sandbox boundary.
type callStats struct {
	Calls     int64 // calls into the guest (exports), including Allocs
	Allocs    int64 // of which sluice_alloc and sluice_free
	Emits     int64 // emit calls from the guest
	HostCalls int64 // all host function calls from the guest, including Emits
}

// callStats returns how often the instance crossed the boundary so far.
func (in *Instance) callStats() callStats {
	return callStats{
		Calls: in.stats.calls.Load(), Allocs: in.stats.allocs.Load(),
		Emits: in.stats.emits.Load(), HostCalls: in.stats.hostCalls.Load(),
	}
}

// State returns the instance's host-managed state.
func (in *Instance) State() *State { return in.state }

// Open tells the guest which task it runs (abi.TaskInfo) and runs the
// operators' open hooks.
func (in *Instance) Open(ctx context.Context) error {
	if in.opened {
		return errors.New("open: already open")
	}
	info, err := in.taskInfo()
	if err != nil {
		return err
	}
	ptr, err := in.region(ctx, len(info))
	if err != nil {
		return err
	}
	buf, _ := in.mem.Read(ptr, uint32(len(info)))
	copy(buf, info)
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(info))
	if _, err := in.call(ctx, abi.ExportOpen, in.fns.open, in.stack[:2]); err != nil {
		return err
	}
	in.opened = true
	return nil
}

// taskInfo is the abi.TaskInfo JSON sluice_open gets. Strings are escaped
// only where JSON requires it (quote, backslash, control characters), not
// HTML-safe as Go's encoders do by default: a guest's hand-written reader
// sees "<" as "<", not "\u003c".
func (in *Instance) taskInfo() ([]byte, error) {
	ids := make([]int, len(in.cfg.Chain))
	for i, v := range in.cfg.Chain {
		ids[i] = v.ID
	}
	return sonic.Config{ValidateString: true}.Froze().Marshal(abi.TaskInfo{
		JobID: in.cfg.JobID, Task: in.cfg.TaskName, Chain: ids,
		Subtask: in.cfg.Subtask, Parallelism: in.cfg.Parallelism, MaxParallelism: in.cfg.MaxParallelism,
		KeyGroupStart: in.keyGroupStart, KeyGroupEnd: in.keyGroupEnd, Args: in.cfg.Args,
	})
}

// Process hands one batch to the chain's head: exactly one call into the
// guest (plus an allocation call when the batch outgrows the input region).
// The chain's output reaches TaskConfig.Emit before Process returns.
func (in *Instance) Process(ctx context.Context, recs []abi.Record) error {
	if len(recs) == 0 {
		return nil
	}
	return in.callBatch(ctx, abi.ExportProcess, in.fns.process, recs)
}

// ProcessEncoded is Process for a batch already in the ABI's encoding
// (docs/ABI.md section 2, as abi.AppendBatch writes it: a text source's
// lines, or a buffer from the exchange): it is checked and copied into the
// input region as it is, without decoding and re-encoding each record.
//
// # Errors
//
// As Process's; a batch that is not well-formed is refused, wrapping
// abi.ErrMalformedBatch, before the guest is called, and leaves the
// instance usable.
func (in *Instance) ProcessEncoded(ctx context.Context, batch []byte) error {
	n, err := abi.CheckBatch(batch)
	if err != nil {
		return fmt.Errorf("%s: %w", abi.ExportProcess, err)
	}
	if n == 0 {
		return nil
	}
	if len(batch) > math.MaxInt32 {
		return fmt.Errorf("%s: batch of %d bytes is too large", abi.ExportProcess, len(batch))
	}
	ptr, err := in.region(ctx, len(batch))
	if err != nil {
		return err
	}
	view, _ := in.mem.Read(ptr, uint32(len(batch)))
	copy(view, batch)
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(batch))
	_, err = in.call(ctx, abi.ExportProcess, in.fns.process, in.stack[:2])
	return err
}

// callBatch encodes recs straight into the guest's input region and calls fn
// with it.
func (in *Instance) callBatch(ctx context.Context, name string, fn api.Function, recs []abi.Record) error {
	size := 4
	for i := range recs {
		size += abi.RecordSize(&recs[i])
	}
	if size > math.MaxInt32 {
		return fmt.Errorf("%s: batch of %d bytes is too large", name, size)
	}
	ptr, err := in.region(ctx, size)
	if err != nil {
		return err
	}
	view, _ := in.mem.Read(ptr, uint32(size))
	if b := abi.AppendBatch(view[:0], recs); len(b) != size || &b[0] != &view[0] {
		return fmt.Errorf("%s: batch encoding is %d bytes, expected %d", name, len(b), size)
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(size)
	_, err = in.call(ctx, name, fn, in.stack[:2])
	return err
}

// SourcePoll asks a guest source at the chain's head for up to max records,
// which reach Emit before it returns. done reports that the source ended.
func (in *Instance) SourcePoll(ctx context.Context, max int) (done bool, err error) {
	if in.fns.sourcePoll == nil {
		return false, fmt.Errorf("source poll: module %s has no %s export", shortDigest(in.m.digest), abi.ExportSourcePoll)
	}
	if max < 1 || max > math.MaxInt32 {
		return false, fmt.Errorf("source poll: max %d out of range", max)
	}
	in.stack[0] = uint64(max)
	st, err := in.call(ctx, abi.ExportSourcePoll, in.fns.sourcePoll, in.stack[:1])
	return st == abi.StatusDone, err
}

// EndInput tells the guest its bounded input ended; final results (for
// example of a Reduce with EmitFinal) reach Emit before it returns.
func (in *Instance) EndInput(ctx context.Context) error {
	if in.fns.endInput == nil {
		return in.usable()
	}
	_, err := in.call(ctx, abi.ExportEndInput, in.fns.endInput, in.stack[:0])
	return err
}

// Barrier runs the operators' barrier hooks for checkpointID. Freeze the
// State after it returns and before the next call.
func (in *Instance) Barrier(ctx context.Context, checkpointID int64) error {
	if in.fns.barrier == nil {
		return in.usable()
	}
	in.stack[0] = uint64(checkpointID)
	_, err := in.call(ctx, abi.ExportBarrier, in.fns.barrier, in.stack[:1])
	return err
}

// NextTimer returns the time of the earliest registered timer.
func (in *Instance) NextTimer() (atMs int64, ok bool) { return in.state.nextTimer() }

// FireTimers advances the task's processing time to nowMs and fires every
// timer due by then, in one call into the guest.
func (in *Instance) FireTimers(ctx context.Context, nowMs int64) error {
	if err := in.usable(); err != nil {
		return err
	}
	if nowMs > in.now {
		in.now = nowMs
	}
	if at, ok := in.state.nextTimer(); !ok || at > nowMs {
		return nil
	}
	if in.fns.timers == nil {
		return fmt.Errorf("fire timers: module %s registered timers but has no %s export", shortDigest(in.m.digest), abi.ExportTimers)
	}
	due := in.state.popDue(nowMs)
	recs := in.timerRecs[:0]
	for _, tk := range due {
		recs = append(recs, abi.Record{
			Key: []byte(tk[12:]), HasKey: true,
			Time: int64(binary.LittleEndian.Uint64([]byte(tk[4:12]))), HasTime: true,
			Value: []byte(tk[:4]),
		})
	}
	in.timerRecs = recs[:0]
	return in.callBatch(ctx, abi.ExportTimers, in.fns.timers, recs)
}

// Watermark returns the task's event time: the latest AdvanceWatermark,
// math.MinInt64 before any.
func (in *Instance) Watermark() int64 { return in.watermark }

// NextEventTimer returns the time of the earliest registered event-time
// timer.
func (in *Instance) NextEventTimer() (atMs int64, ok bool) { return in.state.nextEventTimer() }

// AdvanceWatermark moves the task's event time to wm (a lower wm does
// nothing): it fires every event-time timer at or below wm, earliest first,
// in one sluice_event_timers call, then calls sluice_watermark(wm) when the
// module exports it. Output of both reaches Emit before it returns, so it
// precedes the watermark the task forwards next. A fired timer is gone from
// the State: a checkpoint taken after it does not hold it.
//
// # Errors
//
// The guest's failure, or an error when timers are due and the module has
// no sluice_event_timers (a module that imports event_timer_register
// without it is refused at load).
func (in *Instance) AdvanceWatermark(ctx context.Context, wm int64) error {
	if err := in.usable(); err != nil {
		return err
	}
	if wm <= in.watermark {
		return nil
	}
	in.watermark = wm
	if at, ok := in.state.nextEventTimer(); ok && at <= wm {
		if in.fns.eventTimers == nil {
			return fmt.Errorf("advance watermark: module %s registered event timers but has no %s export", shortDigest(in.m.digest), abi.ExportEventTimers)
		}
		recs := in.timerRecs[:0]
		for _, tk := range in.state.popDueEvent(wm) {
			recs = append(recs, abi.Record{
				Key: []byte(tk[12:]), HasKey: true,
				Time: int64(binary.LittleEndian.Uint64([]byte(tk[4:12]))), HasTime: true,
				Value: binary.LittleEndian.AppendUint32(nil, binary.LittleEndian.Uint32([]byte(tk[:4]))&^eventTimerBit),
			})
		}
		in.timerRecs = recs[:0]
		if err := in.callBatch(ctx, abi.ExportEventTimers, in.fns.eventTimers, recs); err != nil {
			return err
		}
	}
	if in.fns.watermark == nil {
		return nil
	}
	in.stack[0] = uint64(wm)
	_, err := in.call(ctx, abi.ExportWatermark, in.fns.watermark, in.stack[:1])
	return err
}

// measure records the guest's memory size after a call, and its fuel when
// no trip listener counts it (a benchmark's runtime without one).
func (in *Instance) measure() {
	if in.meter.global == nil && in.fuelLeft != nil && in.fuelTrips != nil {
		left := int64(uint32(in.fuelLeft.Get()))
		in.fuel.Store(int64(in.fuelTrips.Get())*rewrite.FuelInterval + rewrite.FuelInterval - left)
	}
	if in.mem != nil {
		in.pages.Store(int64(in.mem.Size() / 65536))
	}
}

// Fuel returns the guest's fuel consumed so far: the checks it ran at
// function entries and loop headers (see docs/SECURITY.md), counted
// exactly at the end of every call and at every fuel trip inside one (so it
// grows during a long call too). The same calls with the same input give
// the same count. It may be called from any goroutine.
func (in *Instance) Fuel() int64 { return in.fuel.Load() }

// MemoryPages returns the guest's linear memory size in 64 KiB pages after
// the last call that returned. It may be called from any goroutine.
func (in *Instance) MemoryPages() int64 { return in.pages.Load() }

// Counters returns the counters the guest added to so far.
func (in *Instance) Counters() map[string]int64 {
	in.countsMu.Lock()
	defer in.countsMu.Unlock()
	out := make(map[string]int64, len(in.counts))
	for k, v := range in.counts {
		out[k] = v
	}
	return out
}

// Close runs the guest's close hooks (when the instance is healthy) and
// frees the instance. It is safe to call more than once.
func (in *Instance) Close(ctx context.Context) error {
	if in.closed {
		return nil
	}
	var err error
	if in.opened && in.failed == nil && in.fns.close != nil {
		_, err = in.call(ctx, abi.ExportClose, in.fns.close, in.stack[:0])
	}
	in.closed = true
	if in.mod != nil {
		in.mod.Close(context.WithoutCancel(ctx))
	}
	in.alloc.release()
	in.stdout.flush()
	in.stderr.flush()
	in.logs.close()
	return err
}

// callOutput is what the guest wrote to stderr during the current call
// (and, while planning, everything it logged), for a GuestError.
func (in *Instance) callOutput() string {
	in.stderr.flush()
	if in.planning {
		in.stdout.flush()
	}
	return in.logs.stderrOfCall()
}

func (in *Instance) usable() error {
	if in.failed != nil {
		return in.failed
	}
	if in.closed {
		return ErrClosed
	}
	return nil
}

// region returns the input region, growing it through sluice_free and
// sluice_alloc when size does not fit.
func (in *Instance) region(ctx context.Context, size int) (uint32, error) {
	if uint32(size) <= in.inCap && in.inPtr != 0 {
		return in.inPtr, nil
	}
	if in.inPtr != 0 {
		in.stack[0] = uint64(in.inPtr)
		in.stats.allocs.Add(1)
		if _, err := in.call(ctx, abi.ExportFree, in.fns.free, in.stack[:1]); err != nil {
			return 0, err
		}
		in.inPtr, in.inCap = 0, 0
	}
	c := uint64(size)
	if c < 64<<10 {
		c = 64 << 10
	}
	if d := 2 * uint64(in.inCap); c < d {
		c = d
	}
	if c > math.MaxInt32 {
		c = uint64(size)
	}
	in.stack[0] = c
	in.stats.allocs.Add(1)
	if _, err := in.call(ctx, abi.ExportAlloc, in.fns.alloc, in.stack[:1]); err != nil {
		return 0, err
	}
	ptr := uint32(in.stack[0])
	if _, ok := in.mem.Read(ptr, uint32(c)); !ok || ptr == 0 {
		err := &GuestError{Digest: in.m.digest, Function: abi.ExportAlloc, Cause: ErrTrap,
			Message: fmt.Sprintf("returned [%#x, +%d), which is not inside its %d bytes of memory", ptr, c, in.mem.Size())}
		if in.alloc.denied {
			err.Cause = ErrMemoryLimit
		}
		in.failed = err
		return 0, err
	}
	in.inPtr, in.inCap = ptr, uint32(c)
	return ptr, nil
}

// call runs one guest export under the call deadline and turns every way it
// can fail into an error; it returns the export's status.
func (in *Instance) call(ctx context.Context, name string, fn api.Function, stack []uint64) (int32, error) {
	if err := in.usable(); err != nil {
		return 0, err
	}
	if fn == nil {
		return 0, fmt.Errorf("module %s has no export %s", shortDigest(in.m.digest), name)
	}
	if n := len(fn.Definition().ResultTypes()); len(stack) < n {
		stack = in.stack[:n] // CallWithStack needs room for the results
	}
	in.failMsg = ""
	in.logs.resetCall(in.planning)
	in.stats.calls.Add(1)
	thread := lockThread()
	in.deadline.begin(in.lim.CallTimeout, thread.cpuTime)
	stopWatching := context.AfterFunc(ctx, in.deadline.cancel)
	outer := in.calling
	in.calling = name
	in.fuelBegin()
	err := fn.CallWithStack(context.WithValue(ctx, instKey{}, in), stack)
	in.fuelEnd()
	in.calling = outer
	thread.unlock()
	stopWatching()
	in.measure()
	hit, cancelled := in.deadline.end()
	if err != nil {
		in.failed = in.classify(ctx, name, err, hit, cancelled)
		return 0, in.failed
	}
	if len(fn.Definition().ResultTypes()) == 0 || name == abi.ExportAlloc {
		return abi.StatusOK, nil
	}
	return in.status(name, int32(uint32(stack[0])))
}

// status checks what export name returned against docs/ABI.md section 3:
// OK anywhere, DONE only from sluice_source_poll, ERROR with the reason the
// guest gave to fail; anything else fails the instance.
func (in *Instance) status(name string, st int32) (int32, error) {
	switch {
	case st == abi.StatusOK, st == abi.StatusDone && name == abi.ExportSourcePoll:
		return st, nil
	case st == abi.StatusError:
		msg := in.failMsg
		if msg == "" {
			msg = "(the guest gave no reason: call sluice.fail before returning 1)"
		}
		in.failed = &GuestError{Digest: in.m.digest, Function: name, Cause: ErrGuestFailed, Message: msg, Output: in.callOutput()}
	case st == abi.StatusDone:
		// A guest that means "nothing more to do" here would otherwise
		// drop the rest of its input silently.
		in.failed = &GuestError{Digest: in.m.digest, Function: name, Cause: ErrTrap, Message: fmt.Sprintf(
			"%s returned status 2 (DONE), which only %s may return: return 0 (OK), or call sluice.fail and return 1 (ERROR)",
			name, abi.ExportSourcePoll)}
	default:
		in.failed = &GuestError{Digest: in.m.digest, Function: name, Cause: ErrTrap, Message: fmt.Sprintf(
			"%s returned unknown status %d: the statuses are 0 (OK), 1 (ERROR) and, from %s only, 2 (DONE)",
			name, st, abi.ExportSourcePoll)}
	}
	return st, in.failed
}

// classify turns an error from wazero into a *GuestError, the caller's
// context error, or the host error that aborted the call.
func (in *Instance) classify(ctx context.Context, name string, err error, hit, cancelled bool) error {
	var ha *hostAbort
	if errors.As(err, &ha) {
		return fmt.Errorf("guest %s: %w", name, ha.err)
	}
	if ctxErr := ctx.Err(); ctxErr != nil || cancelled {
		if ctxErr == nil {
			ctxErr = context.Canceled
		}
		return fmt.Errorf("guest %s: %w", name, ctxErr)
	}
	ge := &GuestError{Digest: in.m.digest, Function: name, Cause: ErrTrap, Err: err, Output: in.callOutput()}
	ge.Message, ge.Stack = splitStack(err.Error())
	var te *trapError
	var exit *sys.ExitError
	switch {
	case in.meter.hit:
		ge.Cause = ErrFuelLimit
		ge.Message = fmt.Sprintf("the call used its fuel limit of %d and was stopped", in.meter.callLimit)
	case hit:
		ge.Cause = ErrDeadline
		ge.Message = fmt.Sprintf("the call ran longer than its deadline of %v and was stopped", in.lim.CallTimeout)
	case errors.As(err, &te):
		ge.Cause, ge.Message = te.cause, te.msg
	case errors.As(err, &exit):
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			ge.Cause = ErrDeadline
			ge.Message = fmt.Sprintf("the call ran longer than its deadline of %v; the instance was stopped", in.lim.CallTimeout)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("guest %s: %w", name, context.Canceled)
		default:
			ge.Cause = ErrExit
			ge.Message = fmt.Sprintf("exit code %d", exit.ExitCode())
		}
	case isWasmStackOverflow(err):
		ge.Cause = ErrStackOverflow
	}
	// A Go guest's runtime reports its own stack overflow on stderr, then
	// aborts with a trap; its goroutine stacks are in linear memory, out of
	// wazero's sight.
	if (ge.Cause == ErrTrap || ge.Cause == ErrExit) && strings.Contains(ge.Output, "fatal error: stack overflow") {
		ge.Cause = ErrStackOverflow
	}
	if in.alloc.denied && ge.Cause != ErrDeadline && ge.Cause != ErrFuelLimit {
		// The guest failed after a memory.grow was refused.
		ge.Cause = ErrMemoryLimit
		ge.Message = fmt.Sprintf("the guest reached its memory cap of %d bytes, then failed: %s", in.lim.MemoryLimitBytes, ge.Message)
	}
	return ge
}

// isWasmStackOverflow recognises wazero's stack overflow, which it returns
// as an unexported error type without a stack trace.
func isWasmStackOverflow(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "stack overflow" {
			return true
		}
	}
	return false
}

// splitStack separates wazero's message from the "wasm stack trace:" that
// follows it.
func splitStack(s string) (msg, stack string) {
	const marker = "\nwasm stack trace:\n"
	i := strings.Index(s, marker)
	if i < 0 {
		return s, ""
	}
	msg = strings.TrimSuffix(s[:i], " (recovered by wazero)")
	stack = s[i+len(marker):]
	if j := strings.Index(stack, "\n\nGo runtime stack trace:"); j >= 0 {
		stack = stack[:j]
	}
	lines := strings.Split(stack, "\n")
	for i := range lines {
		// Frames read "<module>.<function>(...)"; guest instances are
		// anonymous, which leaves a leading dot.
		lines[i] = strings.TrimPrefix(strings.TrimPrefix(lines[i], "\t"), ".")
	}
	return msg, strings.Join(lines, "\n")
}

type scanState struct {
	prefix string
	keys   []string
	pos    int
}
