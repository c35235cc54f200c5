// The ResourceManager: TaskManagers register with it and heartbeat to it.
namespace go sluice.resourcemanager

include "common.thrift"

struct SlotStatus {
    1: i32 index,
    2: string allocation_id,  // empty when free
    3: string job_id,
}

struct RegisterTaskManagerRequest {
    1: string resource_id,
    2: string rpc_address,     // the TaskManager's Kitex address
    3: string data_address,    // the TaskManager's data-exchange address
    4: i32 slots,
    5: i32 cpu_cores,
    6: i64 memory_bytes,
    7: list<SlotStatus> slot_report,
}

struct RegisterTaskManagerResponse {
    1: string registration_id,
    2: i64 heartbeat_interval_ms,
    3: i64 heartbeat_timeout_ms,
    // The JobManager's leader session (its fencing token's part): with HA
    // a TaskManager refuses calls of older sessions once it has seen it.
    4: optional string leader_session,
}

struct HeartbeatRequest {
    1: string resource_id,
    2: string registration_id,
    3: list<SlotStatus> slot_report,
    4: map<string, i64> metrics,
    // The live figures of every task running on the TaskManager.
    5: optional list<common.TaskMetrics> tasks,
}

struct HeartbeatResponse {
    // false: the ResourceManager does not know this registration (it restarted,
    // or declared the TaskManager dead); the TaskManager registers again.
    1: bool known,
}

service ResourceManager {
    RegisterTaskManagerResponse RegisterTaskManager(1: RegisterTaskManagerRequest req) throws (1: common.SluiceError err),
    HeartbeatResponse Heartbeat(1: HeartbeatRequest req) throws (1: common.SluiceError err),
}
