// The TaskExecutor: the JobManager deploys and cancels tasks on a TaskManager.
namespace go sluice.taskexecutor

include "common.thrift"

struct ChannelSpec {
    1: i32 partitioner,       // 0 forward, 1 hash, 2 rebalance, 3 broadcast
    2: list<string> targets,  // one data address per consumer subtask, in subtask order
    3: string result_id,      // the intermediate result this output writes
}

// One operator of a task's chain (internal/jobgraph.Vertex).
struct Vertex {
    1: i32 id,                // unique in the job graph; the guest dispatches on it
    2: string name,
    3: string kind,           // source, map, flat_map, filter, key_by, reduce, process, sink
    4: i32 parallelism,       // 0: the job's default
    5: string connector,      // a host connector; empty for guest code
    6: map<string, string> config,
}

struct InputSpec {
    1: string result_id,
    2: i32 producers,         // how many producer subtasks feed this input
}

struct TaskDeployment {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: string job_id,
    4: string tenant,
    5: string module_digest,
    6: list<string> args,
    // 7 was the chain as JSON; retired.
    8: i32 subtask,
    9: i32 parallelism,
    10: i32 max_parallelism,
    11: list<InputSpec> inputs,
    12: list<ChannelSpec> outputs,
    13: string allocation_id,
    14: string jobmaster_address,
    15: map<string, string> config,
    // The tenant's sandbox quotas; unset or 0 means the TaskManager's default.
    16: optional i64 memory_limit_bytes,
    17: optional i64 call_timeout_ms,
    18: optional i64 max_state_bytes,
    19: optional TaskRestore restore,  // the checkpoint the task restores its state from
    20: list<Vertex> chain,   // the task's operator chain, head first, host connectors included
    21: optional string job_name,  // for the TaskManager's metric labels
    // The tenant's CPU share (fuel scheduler) and the per-call fuel limit;
    // unset or 0 means weight 1, no rate cap, no fuel limit.
    22: optional i32 cpu_weight,
    23: optional i64 fuel_per_second,
    24: optional i64 call_fuel,
}

// The snapshots a subtask merges on restore (several after a rescale).
struct TaskRestore {
    1: i64 checkpoint_id,
    2: list<common.StateHandle> states,
}

// Starts a checkpoint at a source task.
struct TriggerCheckpointRequest {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: i64 checkpoint_id,
    4: i64 timestamp_ms,
    5: bool savepoint,
    6: bool stop,             // emit nothing after this barrier (stop-with-savepoint)
    7: optional bool drain,   // with stop: send the maximum watermark before the barrier
}

// Tells a task that a checkpoint completed (or was aborted).
struct NotifyCheckpointRequest {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: i64 checkpoint_id,
    4: bool completed,        // false: aborted
}

struct CancelTaskRequest {
    1: common.FencingToken fencing,
    2: string execution_id,
}

// A module a running job uses, for a TaskManager to compile ahead of a
// deployment (internal/control.ModuleRef).
struct ModuleRef {
    1: string tenant,
    2: string digest,         // "sha256-<hex>"
}

struct WarmModulesRequest {
    1: list<ModuleRef> modules,  // most wanted first; the TaskManager may take only some
}

struct TaskLogsRequest {
    1: string job_id,
    2: string tenant,
    3: string task,           // task or head operator name; "" for all
    4: map<string, i64> after, // source -> last seq seen
    5: i32 limit,
}

struct TaskManagerLogsRequest {
    1: string tenant,
    2: bool all,              // every line, not only the tenant's
    3: i64 after,
    4: i32 limit,
}

struct TaskStacksRequest {
    1: string job_id,
    2: string tenant,
    3: string task,
    4: i64 duration_ms,       // 0: one current stack per task
    5: i64 interval_ms,
}

service TaskExecutor {
    void DeployTask(1: TaskDeployment req) throws (1: common.SluiceError err),
    void CancelTask(1: CancelTaskRequest req) throws (1: common.SluiceError err),
    // FreeSlot returns a slot to the pool once the job no longer needs it.
    void FreeSlot(1: string allocation_id) throws (1: common.SluiceError err),
    void TriggerCheckpoint(1: TriggerCheckpointRequest req) throws (1: common.SluiceError err),
    void NotifyCheckpoint(1: NotifyCheckpointRequest req) throws (1: common.SluiceError err),
    // WarmModules asks the TaskManager to fetch and compile modules in the
    // background, so a later deployment of them starts without a compile.
    // It returns at once.
    void WarmModules(1: WarmModulesRequest req) throws (1: common.SluiceError err),
    // TaskLogs returns the kept log lines of one job's tasks (of its tenant).
    common.LogLines TaskLogs(1: TaskLogsRequest req) throws (1: common.SluiceError err),
    // TaskManagerLogs returns the TaskManager's own kept log lines.
    common.LogLines TaskManagerLogs(1: TaskManagerLogsRequest req) throws (1: common.SluiceError err),
    // SampleStacks samples the Wasm call stacks of one job's running tasks.
    common.TaskStacks SampleStacks(1: TaskStacksRequest req) throws (1: common.SluiceError err),
}
