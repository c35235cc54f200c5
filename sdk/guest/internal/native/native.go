package native

// Host is the host side of the ABI: one method per import of module
// "sluice", with Go slices for the (ptr, len) pairs. Slices passed to a
// method are valid during the call only; get and scan methods write into
// buf and return what the import returns (a length, abi.Absent, or -n for
// a buffer too small). A method that would trap a Wasm guest panics.
type Host interface {
	Emit(batch []byte)
	SetPlan(graphJSON []byte)
	Fail(msg string)
	Log(level int32, msg string)
	CounterAdd(name string, delta int64)
	Now() int64
	StateGet(vertex int32, name string, key, buf []byte) int32
	StatePut(vertex int32, name string, key, val []byte)
	StatePutBatch(vertex int32, name string, batch []byte)
	StateDelete(vertex int32, name string, key []byte)
	StateScan(vertex int32, name string, buf []byte) int32
	OpStateGet(vertex int32, name string, buf []byte) int32
	OpStatePut(vertex int32, name string, val []byte)
	OpStateDelete(vertex int32, name string)
	TimerRegister(vertex int32, key []byte, timeMs int64)
	TimerDelete(vertex int32, key []byte, timeMs int64)
	// Event time (docs/ABI.md, "Event time").
	Watermark() int64
	WatermarkEmit(ts int64)
	EventTimerRegister(vertex int32, key []byte, timeMs int64)
	EventTimerDelete(vertex int32, key []byte, timeMs int64)
}

// Module is the guest side: one method per export, returning the export's
// status. Bytes passed in (plan arguments, task info, batches) are valid
// during the call only, as the region from sluice_alloc is for a Wasm
// guest.
type Module interface {
	Plan(argsBatch []byte) int32
	Open(taskInfoJSON []byte) int32
	Process(batch []byte) int32
	SourcePoll(max int32) int32
	EndInput() int32
	Barrier(checkpointID int64) int32
	Timers(batch []byte) int32
	Close() int32
	// EventTimers is sluice_event_timers.
	EventTimers(batch []byte) int32
	// Watermark is sluice_watermark, called only when HasWatermark, as
	// the host calls the optional export only when a module has it.
	Watermark(ts int64) int32
	HasWatermark() bool
	// Release ends the module: the SDK forgets its task and its host, and
	// another Module may be made. It is idempotent.
	Release()
}
