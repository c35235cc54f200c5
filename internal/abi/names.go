package abi

// Version is the ABI a module implements. A module declares it by exporting a
// function of this name with no parameters and no results; the host refuses a
// module that does not. See docs/ABI.md.
const Version = "sluice_abi_v1"

// HostModule is the import module name of every host function of the ABI.
const HostModule = "sluice"

// WASIModule is the import module name of the WASI preview 1 functions a
// guest may use (a capability-free subset, docs/ABI.md).
const WASIModule = "wasi_snapshot_preview1"

// Guest exports. Every pointer and length is an i32 into the guest's exported
// memory "memory"; every status is an i32 (Status*).
const (
	ExportMemory     = "memory"             // the guest's linear memory
	ExportInitialize = "_initialize"        // optional reactor initializer, run once at instantiation
	ExportAlloc      = "sluice_alloc"       // (size i32) -> ptr i32: a region the host owns until sluice_free
	ExportFree       = "sluice_free"        // (ptr i32): give a region from sluice_alloc back
	ExportPlan       = "sluice_plan"        // (args_ptr, args_len i32) -> status: declare the job graph via set_plan
	ExportOpen       = "sluice_open"        // (info_ptr, info_len i32) -> status: TaskInfo JSON
	ExportProcess    = "sluice_process"     // (batch_ptr, batch_len i32) -> status: one input batch into the chain head
	ExportSourcePoll = "sluice_source_poll" // (max i32) -> status: a guest source produces up to max records; StatusDone at its end
	ExportEndInput   = "sluice_end_input"   // () -> status: bounded input ended
	ExportBarrier    = "sluice_barrier"     // (checkpoint_id i64) -> status: run the operators' barrier hooks
	ExportTimers     = "sluice_timers"      // (batch_ptr, batch_len i32) -> status: fired timers as a batch
	ExportClose      = "sluice_close"       // () -> status: the task ends
	// Event time (optional; a module without them runs as before).
	ExportEventTimers = "sluice_event_timers" // (batch_ptr, batch_len i32) -> status: fired event-time timers as a batch
	ExportWatermark   = "sluice_watermark"    // (ts i64) -> status: the task's watermark advanced to ts (after its event timers fired)
)

// Host imports, all in HostModule.
const (
	ImportEmit          = "emit"            // (batch_ptr, batch_len i32): the chain tail's output batch
	ImportSetPlan       = "set_plan"        // (json_ptr, json_len i32): the job graph, during sluice_plan only
	ImportFail          = "fail"            // (msg_ptr, msg_len i32): why the current export returns StatusError
	ImportLog           = "log"             // (level i32, msg_ptr, msg_len i32)
	ImportCounterAdd    = "counter_add"     // (name_ptr, name_len i32, delta i64)
	ImportNow           = "now_ms"          // () -> i64: the task's processing time
	ImportStateGet      = "state_get"       // (vertex, name_ptr, name_len, key_ptr, key_len, buf_ptr, buf_cap i32) -> i32 length or Absent
	ImportStatePut      = "state_put"       // (vertex, name_ptr, name_len, key_ptr, key_len, val_ptr, val_len i32)
	ImportStateDelete   = "state_delete"    // (vertex, name_ptr, name_len, key_ptr, key_len i32)
	ImportStatePutBatch = "state_put_batch" // (vertex, name_ptr, name_len, batch_ptr, batch_len i32): state_put for each {key, value} record of a batch
	ImportStateScan     = "state_scan"      // (vertex, name_ptr, name_len, buf_ptr, buf_cap i32) -> i32: bytes of a batch, 0 at the end, -n if n bytes are needed
	ImportOpStateGet    = "op_state_get"    // (vertex, name_ptr, name_len, buf_ptr, buf_cap i32) -> i32 length or Absent
	ImportOpStatePut    = "op_state_put"    // (vertex, name_ptr, name_len, val_ptr, val_len i32)
	ImportOpStateDelete = "op_state_delete" // (vertex, name_ptr, name_len i32)
	ImportTimerRegister = "timer_register"  // (vertex, key_ptr, key_len i32, time_ms i64)
	ImportTimerDelete   = "timer_delete"    // (vertex, key_ptr, key_len i32, time_ms i64)
	// Event time (optional imports; see docs/ABI.md section "Event time").
	ImportWatermark          = "watermark_ms"         // () -> i64: the task's current watermark; math.MinInt64 before any
	ImportWatermarkEmit      = "watermark_emit"       // (ts i64): a guest source's watermark (strategy "guest")
	ImportEventTimerRegister = "event_timer_register" // (vertex, key_ptr, key_len i32, time_ms i64)
	ImportEventTimerDelete   = "event_timer_delete"   // (vertex, key_ptr, key_len i32, time_ms i64)
)

// Status is what a guest export returns.
const (
	StatusOK    = 0 // done; for sluice_source_poll: more records may follow
	StatusError = 1 // failed; the guest called fail with the reason first
	StatusDone  = 2 // sluice_source_poll only: the source has ended
)

// Absent is what state_get and op_state_get return for a missing value.
const Absent = -1

// Log levels for the log import; they are log/slog's levels.
const (
	LevelDebug = -4
	LevelInfo  = 0
	LevelWarn  = 4
	LevelError = 8
)

// TaskInfo is the JSON document sluice_open receives: which of the module's
// operators this task runs and where it sits in the job.
type TaskInfo struct {
	JobID          string   `json:"job_id"`
	Task           string   `json:"task"`
	Chain          []int    `json:"chain"` // vertex ids, head first: records go into Chain[0], Chain[len-1]'s output is emitted
	Subtask        int      `json:"subtask"`
	Parallelism    int      `json:"parallelism"`
	MaxParallelism int      `json:"max_parallelism"`
	KeyGroupStart  int      `json:"key_group_start"` // inclusive range of key groups whose state this subtask holds
	KeyGroupEnd    int      `json:"key_group_end"`
	Args           []string `json:"args"`
}
