// The Dispatcher: the JobManager's front door for clients (CLI, sdk/client).
namespace go sluice.dispatcher

include "common.thrift"

struct UploadModuleRequest {
    1: binary module,
}

struct UploadModuleResponse {
    1: string digest,     // "sha256-<hex>"
    2: i64 size,
}

struct SubmitJobRequest {
    1: string module_digest,
    2: list<string> args,
    3: i32 parallelism,           // default parallelism for vertices that set none
    4: map<string, string> config,
    5: optional string name,
    6: optional string from_savepoint,   // a savepoint id of the caller's tenant
    // a retained checkpoint of the caller's tenant: "<job>/<n>" (as
    // `sluice checkpoints` prints) or its blob directory; not with
    // from_savepoint
    7: optional string from_checkpoint,
}

struct SubmitJobResponse {
    1: string job_id,
}

struct JobSummary {
    1: string job_id,
    2: string name,
    3: string state,
    4: i64 start_time_ms,
    5: i64 end_time_ms,
}

struct ListJobsResponse {
    1: list<JobSummary> jobs,
}

// A subtask's live figures (internal/control.TaskMetrics): counters since
// the attempt started, Flink's per-second gauges.
struct SubtaskMetrics {
    1: i64 records_in,
    2: i64 records_out,
    3: i64 bytes_in,
    4: i64 bytes_out,
    5: i64 busy_ms_per_second,
    6: i64 idle_ms_per_second,
    7: i64 backpressured_ms_per_second,
    8: i64 reported_ms,       // when the TaskManager measured them; 0 before the first report
    9: optional i64 fuel,     // guest fuel consumed by the attempt (deterministic)
}

struct SubtaskStatus {
    1: i32 index,
    2: string state,
    3: string task_manager,
    4: i32 attempt,
    5: string failure,
    6: optional SubtaskMetrics metrics,
}

struct VertexStatus {
    1: i32 id,
    2: string name,
    3: i32 parallelism,
    4: list<SubtaskStatus> subtasks,
}

struct FailureRecord {
    1: i64 time_ms,
    2: string cause,
}

struct JobDetails {
    1: JobSummary summary,
    2: list<VertexStatus> vertices,
    3: string failure,        // the current failure's root cause (FAILING, RESTARTING, FAILED), with the guest's stack trace
    4: i32 restarts,
    5: map<string, i64> state_times_ms,
    6: optional string module_digest,
    7: optional map<string, i64> accumulators,   // summed over every task, once FINISHED
    8: optional list<FailureRecord> history,     // the failures that restarted or failed the job, oldest first
    9: optional i64 fuel,                        // guest fuel of the current attempts, each task once
}

struct JobResult {
    1: JobDetails details,
    2: list<binary> records,  // collect-sink records, in no particular order
    3: map<string, i64> accumulators,
    4: i64 duration_ms,
    5: optional i64 records_offset, // the index of records[0] in the job's released records
    6: optional i64 records_total,  // how many records the job has released so far
}

struct WaitJobRequest {
    1: string job_id,
    2: i64 timeout_ms,        // 0 = return the current state at once
    3: optional i64 records_from, // stream: return as soon as records from this index on are released (or the job ends), with those records
}

struct TaskManagerInfo {
    1: string resource_id,
    2: string address,
    3: i32 slots_total,
    4: i32 slots_free,
    5: optional string data_address,
}

struct ClusterOverview {
    1: list<TaskManagerInfo> task_managers,
    2: i32 slots_total,
    3: i32 slots_free,
    4: map<string, i32> jobs_by_state,
    5: optional string tenant,    // the caller's tenant (its jobs are the ones counted)
}

struct CheckpointInfo {
    1: i64 id,
    2: bool savepoint,
    3: string savepoint_id,
    4: string status,         // IN_PROGRESS, COMPLETED, ABORTED
    5: i64 triggered_ms,
    6: i64 duration_ms,
    7: i64 size,
    8: string reason,         // why it was aborted
    9: string location,       // blob directory of its metadata
    10: optional bool retained, // its metadata is in the blob store: it can be resumed from
}

struct ListCheckpointsResponse {
    1: list<CheckpointInfo> checkpoints,   // newest first
}

struct SavepointRequest {
    1: string job_id,
    2: bool stop,             // then stop the job (it ends FINISHED)
    3: i64 timeout_ms,
    // With stop: the sources first send the maximum watermark, so every
    // event-time timer fires before the savepoint (Flink's stop --drain).
    4: optional bool drain,
}

struct JobLogsRequest {
    1: string job_id,
    2: string task,
    3: map<string, i64> after,
    4: i32 limit,
}

struct TaskManagerLogsQuery {
    1: string task_manager_id,  // resource id
    2: i64 after,
    3: i32 limit,
}

struct JobStacksRequest {
    1: string job_id,
    2: string task,
    3: i64 duration_ms,
    4: i64 interval_ms,
}

service Dispatcher {
    UploadModuleResponse UploadModule(1: UploadModuleRequest req) throws (1: common.SluiceError err),
    SubmitJobResponse SubmitJob(1: SubmitJobRequest req) throws (1: common.SluiceError err),
    ListJobsResponse ListJobs() throws (1: common.SluiceError err),
    JobDetails GetJob(1: string job_id) throws (1: common.SluiceError err),
    void CancelJob(1: string job_id) throws (1: common.SluiceError err),
    JobResult WaitJob(1: WaitJobRequest req) throws (1: common.SluiceError err),
    ClusterOverview Overview() throws (1: common.SluiceError err),
    CheckpointInfo TriggerSavepoint(1: SavepointRequest req) throws (1: common.SluiceError err),
    ListCheckpointsResponse ListCheckpoints(1: string job_id) throws (1: common.SluiceError err),
    void DisposeSavepoint(1: string savepoint_id) throws (1: common.SluiceError err),
    // GetLogs returns the kept log lines of a job's tasks.
    common.LogLines GetLogs(1: JobLogsRequest req) throws (1: common.SluiceError err),
    // GetTaskManagerLogs returns a TaskManager's own log lines the caller may read.
    common.LogLines GetTaskManagerLogs(1: TaskManagerLogsQuery req) throws (1: common.SluiceError err),
    // GetStacks samples the Wasm call stacks of a job's running tasks.
    common.TaskStacks GetStacks(1: JobStacksRequest req) throws (1: common.SluiceError err),
}
