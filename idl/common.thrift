// Shared types for every Sluice service. Field ids are never reused; new fields
// are optional so old peers keep working.
namespace go sluice.common

// ErrorCode is the wire form of a domain error. One table in each RPC adapter
// maps it to and from the project's own error values (see internal/rpcerr).
enum ErrorCode {
    UNKNOWN = 0,
    INVALID_ARGUMENT = 1,
    NOT_FOUND = 2,
    ALREADY_EXISTS = 3,
    PERMISSION_DENIED = 4,
    UNAUTHENTICATED = 5,
    RESOURCE_EXHAUSTED = 6,
    FAILED_PRECONDITION = 7,
    UNAVAILABLE = 8,
    DEADLINE_EXCEEDED = 9,
    STALE_FENCING_TOKEN = 10,
    INTERNAL = 11,
}

exception SluiceError {
    1: ErrorCode code,
    2: string message,
    // A stable identifier for errors more specific than their code, e.g.
    // NOT_ENOUGH_SLOTS; internal/rpcerr maps it back to the same sentinel.
    3: optional string reason,
}

// FencingToken identifies the JobMaster attempt allowed to command a task.
struct FencingToken {
    1: string leader_session,
    2: string job_id,
    3: i64 attempt,
}

// A subtask's snapshot of its guest state in the blob store.
struct StateHandle {
    1: string key,
    2: i64 size,
    3: i32 key_group_start,   // inclusive
    4: i32 key_group_end,     // inclusive
}

// One part file of the transactional file sink: written under pending,
// visible under final once a checkpoint that covers it completes.
struct SinkPart {
    1: string pending,
    2: string final_key,
    3: i64 size,
}

// One kept log line (internal/control.LogLine); the log and stack types
// below are shared by the TaskExecutor and Dispatcher services.
struct LogLine {
    1: string source,         // execution id; "" for the TaskManager's own log
    2: i64 seq,
    3: i64 dropped,           // lines of the source lost just before this one
    4: i64 time_ms,
    5: string level,
    6: string message,
    7: string attrs,
    8: string task_manager,
    9: string tenant,
    10: string job_id,
    11: string task,
    12: i32 subtask,
    13: i32 attempt,
}

struct LogLines {
    1: list<LogLine> lines,
}

struct StackCount {
    1: list<string> frames,   // outermost first
    2: i64 count,
}

struct TaskStack {
    1: string execution_id,
    2: string task_manager,
    3: string task,
    4: i32 subtask,
    5: i32 attempt,
    6: list<StackCount> samples,
    7: i64 total,
}

struct TaskStacks {
    1: list<TaskStack> tasks,
}

// What one running task (a subtask of a chain) measured, as its TaskManager
// reports it: internal/control.TaskMetrics. Counters are cumulative since
// the task attempt started; the per-second figures cover the TaskManager's
// last heartbeat interval.
struct TaskMetrics {
    1: string execution_id,
    2: string job_id,
    3: i64 records_in,
    4: i64 records_out,
    5: i64 bytes_in,
    6: i64 bytes_out,
    7: i64 busy_ms_per_second,
    8: i64 idle_ms_per_second,
    9: i64 back_pressured_ms_per_second,
    10: double output_buffer_usage,   // 0 to 1
    11: i64 memory_pages,             // guest linear memory, 64 KiB pages
    12: i64 fuel,                     // guest fuel consumed
    13: i64 reported_ms,              // when measured, Unix ms
    14: i64 accumulated_busy_ms,
    15: i64 accumulated_idle_ms,
    16: i64 accumulated_back_pressured_ms,
    17: i64 last_alignment_ms,        // the last checkpoint's barrier alignment
}
