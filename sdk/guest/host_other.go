//go:build !wasip1

package guest

// Outside wasip1 the SDK compiles so that the host toolchain can vet it and
// test its planning logic; host calls go to testHost, which tests set.

// testHost receives the SDK's host calls when it is not built for wasip1.
var testHost interface {
	emit(b []byte)
	setPlan(b []byte)
	fail(msg string)
	log(level int32, msg string)
	counterAdd(name string, delta int64)
	now() int64
	stateGet(vertex int32, name string, key, buf []byte) int32
	statePut(vertex int32, name string, key, val []byte)
	statePutBatch(vertex int32, name string, batch []byte)
	stateDelete(vertex int32, name string, key []byte)
	stateScan(vertex int32, name string, buf []byte) int32
	opStateGet(vertex int32, name string, buf []byte) int32
	opStatePut(vertex int32, name string, val []byte)
	opStateDelete(vertex int32, name string)
	timerRegister(vertex int32, key []byte, t int64)
	timerDelete(vertex int32, key []byte, t int64)
}

func hostEmit(b []byte)                       { testHost.emit(b) }
func hostSetPlan(b []byte)                    { testHost.setPlan(b) }
func hostFail(msg string)                     { testHost.fail(msg) }
func hostLog(level int32, msg string)         { testHost.log(level, msg) }
func hostCounterAdd(name string, delta int64) { testHost.counterAdd(name, delta) }
func hostNow() int64                          { return testHost.now() }
func hostStateGet(vertex int32, name string, key, buf []byte) int32 {
	return testHost.stateGet(vertex, name, key, buf)
}
func hostStatePut(vertex int32, name string, key, val []byte) {
	testHost.statePut(vertex, name, key, val)
}
func hostStatePutBatch(vertex int32, name string, batch []byte) {
	testHost.statePutBatch(vertex, name, batch)
}
func hostStateDelete(vertex int32, name string, key []byte) { testHost.stateDelete(vertex, name, key) }
func hostStateScan(vertex int32, name string, buf []byte) int32 {
	return testHost.stateScan(vertex, name, buf)
}
func hostOpStateGet(vertex int32, name string, buf []byte) int32 {
	return testHost.opStateGet(vertex, name, buf)
}
func hostOpStatePut(vertex int32, name string, val []byte) { testHost.opStatePut(vertex, name, val) }
func hostOpStateDelete(vertex int32, name string)          { testHost.opStateDelete(vertex, name) }
func hostTimerRegister(vertex int32, key []byte, t int64)  { testHost.timerRegister(vertex, key, t) }
func hostTimerDelete(vertex int32, key []byte, t int64)    { testHost.timerDelete(vertex, key, t) }

// eventTimeHost is the part of testHost for event time; a test host
// without it gets a panic, as a module without the imports would.
type eventTimeHost interface {
	watermark() int64
	watermarkEmit(ts int64)
	eventTimerRegister(vertex int32, key []byte, t int64)
	eventTimerDelete(vertex int32, key []byte, t int64)
}

func eventHost() eventTimeHost {
	h, ok := testHost.(eventTimeHost)
	if !ok {
		panic("this test host has no event time")
	}
	return h
}

func hostWatermark() int64       { return eventHost().watermark() }
func hostWatermarkEmit(ts int64) { eventHost().watermarkEmit(ts) }
func hostEventTimerRegister(vertex int32, key []byte, t int64) {
	eventHost().eventTimerRegister(vertex, key, t)
}
func hostEventTimerDelete(vertex int32, key []byte, t int64) {
	eventHost().eventTimerDelete(vertex, key, t)
}
