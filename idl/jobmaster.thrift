// The JobMaster: tasks report to the JobMaster of their job.
namespace go sluice.jobmaster

include "common.thrift"

struct TaskStateUpdate {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: string state,          // DEPLOYING, RUNNING, FINISHED, CANCELED, FAILED
    4: string failure,
    5: map<string, i64> accumulators,
    6: list<binary> collected,  // collect-sink records, sent with FINISHED
}

struct NextSplitRequest {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: i32 vertex_id,
    4: i32 subtask,
}

struct InputSplit {
    1: string key,            // blob key of the object
    2: i64 offset,
    3: i64 length,
}

struct NextSplitResponse {
    1: bool done,             // no more splits: the source ends
    2: optional InputSplit split,
}

service JobMaster {
    void UpdateTaskState(1: TaskStateUpdate req) throws (1: common.SluiceError err),
    NextSplitResponse RequestNextSplit(1: NextSplitRequest req) throws (1: common.SluiceError err),
}
