package rpcwire

import (
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	"github.com/sluicehq/sluice/internal/control"
)

// RegistrationToWire converts a TaskManager's registration.
func RegistrationToWire(r control.Registration) *resourcemanager.RegisterTaskManagerRequest {
	return &resourcemanager.RegisterTaskManagerRequest{
		ResourceId:  r.ResourceID,
		RpcAddress:  r.RPCAddress,
		DataAddress: r.DataAddress,
		Slots:       int32(r.Slots),
		CpuCores:    int32(r.CPUCores),
		MemoryBytes: r.MemoryBytes,
		SlotReport:  slotsToWire(r.SlotReport),
	}
}

// RegistrationFromWire converts a TaskManager's registration.
func RegistrationFromWire(w *resourcemanager.RegisterTaskManagerRequest) control.Registration {
	return control.Registration{
		ResourceID:  w.GetResourceId(),
		RPCAddress:  w.GetRpcAddress(),
		DataAddress: w.GetDataAddress(),
		Slots:       int(w.GetSlots()),
		CPUCores:    int(w.GetCpuCores()),
		MemoryBytes: w.GetMemoryBytes(),
		SlotReport:  slotsFromWire(w.GetSlotReport()),
	}
}

// RegisteredToWire converts the ResourceManager's answer to a registration.
func RegisteredToWire(r control.Registered) *resourcemanager.RegisterTaskManagerResponse {
	return &resourcemanager.RegisterTaskManagerResponse{
		RegistrationId:      r.RegistrationID,
		HeartbeatIntervalMs: r.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMs:  r.HeartbeatTimeout.Milliseconds(),
		LeaderSession:       optString(r.LeaderSession),
	}
}

// RegisteredFromWire converts the ResourceManager's answer to a
// registration.
func RegisteredFromWire(w *resourcemanager.RegisterTaskManagerResponse) control.Registered {
	return control.Registered{
		RegistrationID:    w.GetRegistrationId(),
		HeartbeatInterval: time.Duration(w.GetHeartbeatIntervalMs()) * time.Millisecond,
		HeartbeatTimeout:  time.Duration(w.GetHeartbeatTimeoutMs()) * time.Millisecond,
		LeaderSession:     w.GetLeaderSession(),
	}
}

// HeartbeatToWire converts a heartbeat.
func HeartbeatToWire(h control.Heartbeat) *resourcemanager.HeartbeatRequest {
	return &resourcemanager.HeartbeatRequest{
		ResourceId:     h.ResourceID,
		RegistrationId: h.RegistrationID,
		SlotReport:     slotsToWire(h.SlotReport),
		Metrics:        h.Metrics,
		Tasks:          executionMetricsToWire(h.Tasks),
	}
}

// HeartbeatFromWire converts a heartbeat.
func HeartbeatFromWire(w *resourcemanager.HeartbeatRequest) control.Heartbeat {
	return control.Heartbeat{
		ResourceID:     w.GetResourceId(),
		RegistrationID: w.GetRegistrationId(),
		SlotReport:     slotsFromWire(w.GetSlotReport()),
		Metrics:        w.GetMetrics(),
		Tasks:          executionMetricsFromWire(w.GetTasks()),
	}
}

func slotsToWire(ss []control.SlotStatus) []*resourcemanager.SlotStatus {
	out := make([]*resourcemanager.SlotStatus, len(ss))
	for i, s := range ss {
		out[i] = &resourcemanager.SlotStatus{Index: int32(s.Index), AllocationId: s.AllocationID, JobId: s.JobID}
	}
	return out
}

// slotsFromWire drops nil entries.
func slotsFromWire(ss []*resourcemanager.SlotStatus) []control.SlotStatus {
	var out []control.SlotStatus
	for _, s := range ss {
		if s != nil {
			out = append(out, control.SlotStatus{Index: int(s.Index), AllocationID: s.AllocationId, JobID: s.JobId})
		}
	}
	return out
}

// optString is s as an optional Thrift string: nil when empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
