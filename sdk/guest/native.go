//go:build !wasip1

package guest

import (
	"errors"
	"sync"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/sdk/guest/internal/native"
)

// NativeModule runs the job registered with [Job] natively, for the job
// test harness (sdk/guest/jobtest): it sends the SDK's host calls to h and
// returns the SDK's exports as Go methods, the same code a wasip1 build
// exports. It exists only outside wasip1.
//
// # Errors
//
// The SDK keeps one task per process (a module instance runs one task), so
// only one NativeModule may be live at a time: until the previous one is
// released, NativeModule returns an error.
func NativeModule(h native.Host) (native.Module, error) {
	nativeMu.Lock()
	defer nativeMu.Unlock()
	if nativeLive {
		return nil, errors.New("a native task is already open in this process: close it first (the Go SDK runs one task per process)")
	}
	nativeLive = true
	testHost, current, counters = nativeHost{h}, nil, nil
	return &nativeModule{}, nil
}

var (
	nativeMu   sync.Mutex
	nativeLive bool
)

type nativeModule struct{ released bool }

func (*nativeModule) Plan(args []byte) int32         { return doPlan(args) }
func (*nativeModule) Open(info []byte) int32         { return doOpen(info) }
func (*nativeModule) Process(batch []byte) int32     { return doProcess(batch) }
func (*nativeModule) SourcePoll(max int32) int32     { return doSourcePoll(max) }
func (*nativeModule) EndInput() int32                { return doEndInput() }
func (*nativeModule) Barrier(checkpoint int64) int32 { return doBarrier(checkpoint) }
func (*nativeModule) Timers(batch []byte) int32      { return doTimers(batch) }
func (*nativeModule) Close() int32                   { return doClose() }
func (*nativeModule) EventTimers(batch []byte) int32 { return doEventTimers(batch) }

// Watermark is sluice_watermark, which the Go SDK does not export: its
// operators read the watermark when they need it and fire on event timers.
func (*nativeModule) Watermark(int64) int32 { return abi.StatusOK }
func (*nativeModule) HasWatermark() bool    { return false }

func (m *nativeModule) Release() {
	nativeMu.Lock()
	defer nativeMu.Unlock()
	if m.released {
		return
	}
	m.released = true
	testHost, current, counters = nil, nil, nil
	nativeLive = false
}

// nativeHost adapts a native.Host to the SDK's host calls.
type nativeHost struct{ h native.Host }

func (n nativeHost) emit(b []byte)                       { n.h.Emit(b) }
func (n nativeHost) setPlan(b []byte)                    { n.h.SetPlan(b) }
func (n nativeHost) fail(msg string)                     { n.h.Fail(msg) }
func (n nativeHost) log(level int32, msg string)         { n.h.Log(level, msg) }
func (n nativeHost) counterAdd(name string, delta int64) { n.h.CounterAdd(name, delta) }
func (n nativeHost) now() int64                          { return n.h.Now() }
func (n nativeHost) stateGet(vertex int32, name string, key, buf []byte) int32 {
	return n.h.StateGet(vertex, name, key, buf)
}
func (n nativeHost) statePut(vertex int32, name string, key, val []byte) {
	n.h.StatePut(vertex, name, key, val)
}
func (n nativeHost) statePutBatch(vertex int32, name string, batch []byte) {
	n.h.StatePutBatch(vertex, name, batch)
}
func (n nativeHost) stateDelete(vertex int32, name string, key []byte) {
	n.h.StateDelete(vertex, name, key)
}
func (n nativeHost) stateScan(vertex int32, name string, buf []byte) int32 {
	return n.h.StateScan(vertex, name, buf)
}
func (n nativeHost) opStateGet(vertex int32, name string, buf []byte) int32 {
	return n.h.OpStateGet(vertex, name, buf)
}
func (n nativeHost) opStatePut(vertex int32, name string, val []byte) {
	n.h.OpStatePut(vertex, name, val)
}
func (n nativeHost) opStateDelete(vertex int32, name string) { n.h.OpStateDelete(vertex, name) }
func (n nativeHost) timerRegister(vertex int32, key []byte, t int64) {
	n.h.TimerRegister(vertex, key, t)
}
func (n nativeHost) timerDelete(vertex int32, key []byte, t int64) { n.h.TimerDelete(vertex, key, t) }
func (n nativeHost) watermark() int64                              { return n.h.Watermark() }
func (n nativeHost) watermarkEmit(ts int64)                        { n.h.WatermarkEmit(ts) }
func (n nativeHost) eventTimerRegister(vertex int32, key []byte, t int64) {
	n.h.EventTimerRegister(vertex, key, t)
}
func (n nativeHost) eventTimerDelete(vertex int32, key []byte, t int64) {
	n.h.EventTimerDelete(vertex, key, t)
}
