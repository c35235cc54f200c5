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
    7: list<common.SinkPart> sink_parts,  // FINISHED: file-sink parts for the final commit
    8: string failure_kind,   // FAILED: CAUSE or CONSEQUENCE (empty: CAUSE)
    9: optional common.TaskMetrics metrics,  // with a final state: the task's last figures
    10: optional i64 collected_from, // FINISHED: the task's index of collected[0] (records the JobMaster already has are skipped)
}

// Where a text-source subtask stands at a barrier.
struct SourcePosition {
    1: list<string> finished,       // ids of the splits read to the end
    2: optional InputSplit current, // the unread rest of the split being read
}

struct AcknowledgeCheckpointRequest {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: i64 checkpoint_id,
    4: optional common.StateHandle state,
    5: optional SourcePosition source,
    6: list<common.SinkPart> sink_parts,
    7: optional i64 alignment_ns,
    8: optional list<binary> collected, // collect-sink records not yet acknowledged; released when a checkpoint completes
    9: optional i64 collected_from,     // the task's index of collected[0] (records the JobMaster already has are skipped)
}

struct DeclineCheckpointRequest {
    1: common.FencingToken fencing,
    2: string execution_id,
    3: i64 checkpoint_id,
    4: string reason,
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
    1: bool done,             // no more splits: the source ends (neither done nor split: no split yet, ask again)
    2: optional InputSplit split,
}

service JobMaster {
    void UpdateTaskState(1: TaskStateUpdate req) throws (1: common.SluiceError err),
    NextSplitResponse RequestNextSplit(1: NextSplitRequest req) throws (1: common.SluiceError err),
    void AcknowledgeCheckpoint(1: AcknowledgeCheckpointRequest req) throws (1: common.SluiceError err),
    void DeclineCheckpoint(1: DeclineCheckpointRequest req) throws (1: common.SluiceError err),
}
