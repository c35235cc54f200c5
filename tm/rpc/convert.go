package rpc

import (
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	"github.com/sluicehq/sluice/tm/executor"
)

func slotsToWire(ss []executor.SlotStatus) []*resourcemanager.SlotStatus {
	out := make([]*resourcemanager.SlotStatus, len(ss))
	for i, s := range ss {
		out[i] = &resourcemanager.SlotStatus{Index: int32(s.Index), AllocationId: s.AllocationID, JobId: s.JobID}
	}
	return out
}

func registrationToWire(r executor.Registration) *resourcemanager.RegisterTaskManagerRequest {
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
