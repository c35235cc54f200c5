//go:build wasip1

package guest

import (
	"runtime/debug"
	"unsafe"
)

// The host functions of docs/ABI.md. Pointers cross as i32 offsets into
// linear memory; Go passes unsafe.Pointer parameters as such and keeps what
// they point to alive for the call.

//go:wasmimport sluice emit
func sluiceEmit(ptr unsafe.Pointer, n uint32)

//go:wasmimport sluice set_plan
func sluiceSetPlan(ptr unsafe.Pointer, n uint32)

//go:wasmimport sluice fail
func sluiceFail(ptr unsafe.Pointer, n uint32)

//go:wasmimport sluice log
func sluiceLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport sluice counter_add
func sluiceCounterAdd(ptr unsafe.Pointer, n uint32, delta int64)

//go:wasmimport sluice now_ms
func sluiceNow() int64

//go:wasmimport sluice state_get
func sluiceStateGet(vertex int32, name unsafe.Pointer, nameLen uint32, key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, bufCap uint32) int32

//go:wasmimport sluice state_put
func sluiceStatePut(vertex int32, name unsafe.Pointer, nameLen uint32, key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32)

//go:wasmimport sluice state_put_batch
func sluiceStatePutBatch(vertex int32, name unsafe.Pointer, nameLen uint32, batch unsafe.Pointer, batchLen uint32)

//go:wasmimport sluice state_delete
func sluiceStateDelete(vertex int32, name unsafe.Pointer, nameLen uint32, key unsafe.Pointer, keyLen uint32)

//go:wasmimport sluice state_scan
func sluiceStateScan(vertex int32, name unsafe.Pointer, nameLen uint32, buf unsafe.Pointer, bufCap uint32) int32

//go:wasmimport sluice op_state_get
func sluiceOpStateGet(vertex int32, name unsafe.Pointer, nameLen uint32, buf unsafe.Pointer, bufCap uint32) int32

//go:wasmimport sluice op_state_put
func sluiceOpStatePut(vertex int32, name unsafe.Pointer, nameLen uint32, val unsafe.Pointer, valLen uint32)

//go:wasmimport sluice op_state_delete
func sluiceOpStateDelete(vertex int32, name unsafe.Pointer, nameLen uint32)

//go:wasmimport sluice timer_register
func sluiceTimerRegister(vertex int32, key unsafe.Pointer, keyLen uint32, timeMs int64)

//go:wasmimport sluice timer_delete
func sluiceTimerDelete(vertex int32, key unsafe.Pointer, keyLen uint32, timeMs int64)

//go:wasmimport sluice watermark_ms
func sluiceWatermark() int64

//go:wasmimport sluice watermark_emit
func sluiceWatermarkEmit(ts int64)

//go:wasmimport sluice event_timer_register
func sluiceEventTimerRegister(vertex int32, key unsafe.Pointer, keyLen uint32, timeMs int64)

//go:wasmimport sluice event_timer_delete
func sluiceEventTimerDelete(vertex int32, key unsafe.Pointer, keyLen uint32, timeMs int64)

func bp(b []byte) (unsafe.Pointer, uint32) {
	return unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))
}
func sp(s string) (unsafe.Pointer, uint32) {
	return unsafe.Pointer(unsafe.StringData(s)), uint32(len(s))
}

func hostEmit(b []byte)    { p, n := bp(b); sluiceEmit(p, n) }
func hostSetPlan(b []byte) { p, n := bp(b); sluiceSetPlan(p, n) }
func hostFail(msg string)  { p, n := sp(msg); sluiceFail(p, n) }
func hostLog(level int32, msg string) {
	p, n := sp(msg)
	sluiceLog(level, p, n)
}
func hostCounterAdd(name string, delta int64) { p, n := sp(name); sluiceCounterAdd(p, n, delta) }
func hostNow() int64                          { return sluiceNow() }

func hostStateGet(vertex int32, name string, key, buf []byte) int32 {
	np, nn := sp(name)
	kp, kn := bp(key)
	b, c := bp(buf)
	return sluiceStateGet(vertex, np, nn, kp, kn, b, c)
}

func hostStatePut(vertex int32, name string, key, val []byte) {
	np, nn := sp(name)
	kp, kn := bp(key)
	vp, vn := bp(val)
	sluiceStatePut(vertex, np, nn, kp, kn, vp, vn)
}

func hostStatePutBatch(vertex int32, name string, batch []byte) {
	np, nn := sp(name)
	b, n := bp(batch)
	sluiceStatePutBatch(vertex, np, nn, b, n)
}

func hostStateDelete(vertex int32, name string, key []byte) {
	np, nn := sp(name)
	kp, kn := bp(key)
	sluiceStateDelete(vertex, np, nn, kp, kn)
}

func hostStateScan(vertex int32, name string, buf []byte) int32 {
	np, nn := sp(name)
	b, c := bp(buf)
	return sluiceStateScan(vertex, np, nn, b, c)
}

func hostOpStateGet(vertex int32, name string, buf []byte) int32 {
	np, nn := sp(name)
	b, c := bp(buf)
	return sluiceOpStateGet(vertex, np, nn, b, c)
}

func hostOpStatePut(vertex int32, name string, val []byte) {
	np, nn := sp(name)
	vp, vn := bp(val)
	sluiceOpStatePut(vertex, np, nn, vp, vn)
}

func hostOpStateDelete(vertex int32, name string) {
	np, nn := sp(name)
	sluiceOpStateDelete(vertex, np, nn)
}

func hostTimerRegister(vertex int32, key []byte, t int64) {
	kp, kn := bp(key)
	sluiceTimerRegister(vertex, kp, kn, t)
}

func hostTimerDelete(vertex int32, key []byte, t int64) {
	kp, kn := bp(key)
	sluiceTimerDelete(vertex, kp, kn, t)
}

func hostWatermark() int64       { return sluiceWatermark() }
func hostWatermarkEmit(ts int64) { sluiceWatermarkEmit(ts) }

func hostEventTimerRegister(vertex int32, key []byte, t int64) {
	kp, kn := bp(key)
	sluiceEventTimerRegister(vertex, kp, kn, t)
}

func hostEventTimerDelete(vertex int32, key []byte, t int64) {
	kp, kn := bp(key)
	sluiceEventTimerDelete(vertex, kp, kn, t)
}

// The guest exports of docs/ABI.md.

//go:wasmexport sluice_abi_v1
func sluiceABIv1() {}

//go:wasmexport sluice_alloc
func sluiceAlloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	b := make([]byte, size)
	ptr := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	allocs[ptr] = b
	return ptr
}

//go:wasmexport sluice_free
func sluiceFree(ptr uint32) { delete(allocs, ptr) }

//go:wasmexport sluice_plan
func sluicePlan(ptr, n uint32) int32 { return doPlan(region(ptr, n)) }

//go:wasmexport sluice_open
func sluiceOpen(ptr, n uint32) int32 { return doOpen(region(ptr, n)) }

//go:wasmexport sluice_process
func sluiceProcess(ptr, n uint32) int32 { return doProcess(region(ptr, n)) }

//go:wasmexport sluice_source_poll
func sluiceSourcePoll(max int32) int32 { return doSourcePoll(max) }

//go:wasmexport sluice_end_input
func sluiceEndInput() int32 { return doEndInput() }

//go:wasmexport sluice_barrier
func sluiceBarrier(checkpointID int64) int32 { return doBarrier(checkpointID) }

//go:wasmexport sluice_timers
func sluiceTimers(ptr, n uint32) int32 { return doTimers(region(ptr, n)) }

//go:wasmexport sluice_event_timers
func sluiceEventTimers(ptr, n uint32) int32 { return doEventTimers(region(ptr, n)) }

//go:wasmexport sluice_close
func sluiceClose() int32 { return doClose() }

func init() {
	// A Go guest's stacks live in linear memory. A lower ceiling than Go's
	// 1 GB makes runaway recursion fail fast with "stack overflow" instead
	// of exhausting the memory cap first.
	debug.SetMaxStack(maxStackBytes)
}
