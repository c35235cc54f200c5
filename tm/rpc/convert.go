package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/cpwire"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/tm/executor"
	"github.com/sluicehq/sluice/wasmhost"
)

// Wire partitioner numbers of ChannelSpec.partitioner.
var partitioners = [...]jobgraph.Partitioner{
	0: jobgraph.Forward,
	1: jobgraph.Hash,
	2: jobgraph.Rebalance,
	3: jobgraph.Broadcast,
}

// PartitionerToWire is the ChannelSpec.partitioner number of p, or -1.
func PartitionerToWire(p jobgraph.Partitioner) int32 {
	for i, q := range partitioners {
		if q == p {
			return int32(i)
		}
	}
	return -1
}

func fencingFromWire(t *common.FencingToken) executor.FencingToken {
	return executor.FencingToken{
		LeaderSession: t.GetLeaderSession(),
		JobID:         t.GetJobId(),
		Attempt:       t.GetAttempt(),
	}
}

func fencingToWire(t executor.FencingToken) *common.FencingToken {
	return &common.FencingToken{LeaderSession: t.LeaderSession, JobId: t.JobID, Attempt: t.Attempt}
}

// DecodeChain decodes TaskDeployment.chain: the JSON of the task's vertices
// in chain order (a []jobgraph.Vertex), or an object {"vertices": [...]}.
func DecodeChain(b []byte) ([]jobgraph.Vertex, error) {
	b = bytes.TrimSpace(b)
	var vs []jobgraph.Vertex
	if len(b) > 0 && b[0] == '{' {
		var obj struct {
			Vertices []jobgraph.Vertex `json:"vertices"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, err
		}
		vs = obj.Vertices
	} else if err := json.Unmarshal(b, &vs); err != nil {
		return nil, err
	}
	return vs, nil
}

func deploymentFromWire(req *taskexecutor.TaskDeployment) (executor.Deployment, error) {
	if req == nil {
		return executor.Deployment{}, fmt.Errorf("%w: deploy task: no deployment", executor.ErrInvalidDeployment)
	}
	if req.Fencing == nil {
		return executor.Deployment{}, fmt.Errorf("%w: deploy task %s: no fencing token", executor.ErrInvalidDeployment, req.GetExecutionId())
	}
	chain, err := DecodeChain(req.GetChain())
	if err != nil {
		return executor.Deployment{}, fmt.Errorf("%w: deploy task %s: chain is not a JSON list of vertices: %v", executor.ErrInvalidDeployment, req.GetExecutionId(), err)
	}
	d := executor.Deployment{
		Fencing:          fencingFromWire(req.Fencing),
		ExecutionID:      req.GetExecutionId(),
		JobID:            req.GetJobId(),
		Tenant:           req.GetTenant(),
		ModuleDigest:     req.GetModuleDigest(),
		Args:             req.GetArgs_(),
		Chain:            chain,
		Subtask:          int(req.GetSubtask()),
		Parallelism:      int(req.GetParallelism()),
		MaxParallelism:   int(req.GetMaxParallelism()),
		AllocationID:     req.GetAllocationId(),
		JobMasterAddress: req.GetJobmasterAddress(),
		Config:           req.GetConfig(),
		Restore:          cpwire.RestoreFromWire(req.Restore),
		Limits: wasmhost.Limits{
			MemoryLimitBytes: uint64(max(req.GetMemoryLimitBytes(), 0)),
			CallTimeout:      time.Duration(max(req.GetCallTimeoutMs(), 0)) * time.Millisecond,
			MaxStateBytes:    max(req.GetMaxStateBytes(), 0),
		},
	}
	if r := d.Restore; r != nil {
		own := "tenants/" + d.Tenant + "/"
		for _, h := range r.States {
			if !strings.HasPrefix(h.Key, own) || h.KeyGroupStart > h.KeyGroupEnd {
				return executor.Deployment{}, fmt.Errorf("%w: deploy task %s: restore handle %q (key groups %d..%d) is not a state object of tenant %q",
					executor.ErrInvalidDeployment, d.ExecutionID, h.Key, h.KeyGroupStart, h.KeyGroupEnd, d.Tenant)
			}
		}
	}
	for _, in := range req.GetInputs() {
		if in == nil {
			continue
		}
		d.Inputs = append(d.Inputs, exchange.InputSpec{ResultID: in.GetResultId(), Producers: int(in.GetProducers())})
	}
	for _, out := range req.GetOutputs() {
		if out == nil {
			continue
		}
		p := out.GetPartitioner()
		if p < 0 || int(p) >= len(partitioners) {
			return executor.Deployment{}, fmt.Errorf("%w: deploy task %s: output %s has unknown partitioner %d (0 forward, 1 hash, 2 rebalance, 3 broadcast)",
				executor.ErrInvalidDeployment, d.ExecutionID, out.GetResultId(), p)
		}
		d.Outputs = append(d.Outputs, exchange.OutputSpec{
			ResultID:    out.GetResultId(),
			Partitioner: partitioners[p],
			Targets:     out.GetTargets(),
		})
	}
	return d, nil
}

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

func updateToWire(u executor.TaskStateUpdate) *jobmaster.TaskStateUpdate {
	return &jobmaster.TaskStateUpdate{
		Fencing:      fencingToWire(u.Fencing),
		ExecutionId:  u.ExecutionID,
		State:        u.State,
		Failure:      u.Failure,
		Accumulators: u.Accumulators,
		Collected:    u.Collected,
		SinkParts:    cpwire.PartsToWire(u.SinkParts),
	}
}
