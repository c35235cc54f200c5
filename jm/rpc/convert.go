package rpc

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/cpwire"
	"github.com/sluicehq/sluice/internal/jobgraph"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
	jmd "github.com/sluicehq/sluice/jm/jobmaster"
	rmd "github.com/sluicehq/sluice/jm/resourcemanager"
)

// partitioners are the wire numbers of ChannelSpec.partitioner, by index.
var partitioners = [...]jobgraph.Partitioner{jobgraph.Forward, jobgraph.Hash, jobgraph.Rebalance, jobgraph.Broadcast}

func partitionerToWire(p jobgraph.Partitioner) (int32, error) {
	for i, q := range partitioners {
		if q == p {
			return int32(i), nil
		}
	}
	return -1, fmt.Errorf("unknown partitioner %q", p)
}

func fencingToWire(f jmd.FencingToken) *common.FencingToken {
	return &common.FencingToken{LeaderSession: f.LeaderSession, JobId: f.JobID, Attempt: f.Attempt}
}

func fencingFromWire(f *common.FencingToken) jmd.FencingToken {
	return jmd.FencingToken{LeaderSession: f.GetLeaderSession(), JobID: f.GetJobId(), Attempt: f.GetAttempt()}
}

func deploymentToWire(d jmd.Deployment) (*taskexecutor.TaskDeployment, error) {
	chain, err := json.Marshal(d.Chain)
	if err != nil {
		return nil, fmt.Errorf("encode chain: %w", err)
	}
	w := &taskexecutor.TaskDeployment{
		Fencing:          fencingToWire(d.Fencing),
		ExecutionId:      d.ExecutionID,
		JobId:            d.JobID,
		Tenant:           d.Tenant,
		ModuleDigest:     d.ModuleDigest,
		Args_:            d.Args,
		Chain:            chain,
		Subtask:          int32(d.Subtask),
		Parallelism:      int32(d.Parallelism),
		MaxParallelism:   int32(d.MaxParallelism),
		AllocationId:     d.AllocationID,
		JobmasterAddress: d.JobMasterAddress,
		Config:           d.Config,
		Restore:          cpwire.RestoreToWire(d.Restore),
	}
	if l := d.Limits; l.MemoryBytes > 0 || l.CallTimeout > 0 || l.StateBytes > 0 {
		mem, call, state := l.MemoryBytes, l.CallTimeout.Milliseconds(), l.StateBytes
		w.MemoryLimitBytes, w.CallTimeoutMs, w.MaxStateBytes = &mem, &call, &state
	}
	for _, in := range d.Inputs {
		w.Inputs = append(w.Inputs, &taskexecutor.InputSpec{ResultId: in.ResultID, Producers: int32(in.Producers)})
	}
	for _, out := range d.Outputs {
		p, err := partitionerToWire(out.Partitioner)
		if err != nil {
			return nil, err
		}
		w.Outputs = append(w.Outputs, &taskexecutor.ChannelSpec{Partitioner: p, Targets: out.Targets, ResultId: out.ResultID})
	}
	return w, nil
}

func slotsFromWire(ss []*resourcemanager.SlotStatus) []rmd.SlotStatus {
	var out []rmd.SlotStatus
	for _, s := range ss {
		if s != nil {
			out = append(out, rmd.SlotStatus{Index: int(s.Index), AllocationID: s.AllocationId, JobID: s.JobId})
		}
	}
	return out
}

func registrationFromWire(r *resourcemanager.RegisterTaskManagerRequest) rmd.Registration {
	return rmd.Registration{
		ResourceID:  r.GetResourceId(),
		RPCAddress:  r.GetRpcAddress(),
		DataAddress: r.GetDataAddress(),
		Slots:       int(r.GetSlots()),
		CPUCores:    int(r.GetCpuCores()),
		MemoryBytes: r.GetMemoryBytes(),
		SlotReport:  slotsFromWire(r.GetSlotReport()),
	}
}

func updateFromWire(u *jobmaster.TaskStateUpdate) jmd.TaskUpdate {
	return jmd.TaskUpdate{
		Fencing:      fencingFromWire(u.GetFencing()),
		ExecutionID:  u.GetExecutionId(),
		State:        u.GetState(),
		Failure:      u.GetFailure(),
		Accumulators: u.GetAccumulators(),
		Collected:    u.GetCollected(),
		SinkParts:    cpwire.PartsFromWire(u.GetSinkParts()),
	}
}

func checkpointToWire(s checkpoint.Stats) *dispatcher.CheckpointInfo {
	return &dispatcher.CheckpointInfo{
		Id:          s.ID,
		Savepoint:   s.Savepoint,
		SavepointId: s.SavepointID,
		Status:      s.Status,
		TriggeredMs: ms(s.Triggered),
		DurationMs:  s.Duration.Milliseconds(),
		Size:        s.Size,
		Reason:      s.Reason,
		Location:    s.Location,
	}
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func summaryToWire(d jmd.Details) *dispatcher.JobSummary {
	return &dispatcher.JobSummary{JobId: d.JobID, Name: d.Name, State: string(d.State), StartTimeMs: ms(d.Start), EndTimeMs: ms(d.End)}
}

func detailsToWire(d jmd.Details) *dispatcher.JobDetails {
	w := &dispatcher.JobDetails{
		Summary:      summaryToWire(d),
		Failure:      d.Failure,
		Restarts:     int32(d.Restarts),
		StateTimesMs: map[string]int64{},
	}
	if d.ModuleDigest != "" {
		digest := d.ModuleDigest
		w.ModuleDigest = &digest
	}
	for s, t := range d.StateTimes {
		w.StateTimesMs[string(s)] = ms(t)
	}
	for _, v := range d.Vertices {
		vs := &dispatcher.VertexStatus{Id: int32(v.ID), Name: v.Name, Parallelism: int32(v.Parallelism)}
		for _, s := range v.Subtasks {
			vs.Subtasks = append(vs.Subtasks, &dispatcher.SubtaskStatus{
				Index: int32(s.Index), State: s.State, TaskManager: s.TaskManager, Attempt: int32(s.Attempt), Failure: s.Failure,
			})
		}
		w.Vertices = append(w.Vertices, vs)
	}
	return w
}

func resultToWire(r jmd.Result) *dispatcher.JobResult_ {
	return &dispatcher.JobResult_{
		Details:      detailsToWire(r.Details),
		Records:      r.Records,
		Accumulators: maps.Clone(r.Accumulators),
		DurationMs:   r.Duration.Milliseconds(),
	}
}

func overviewToWire(o dsp.Overview) *dispatcher.ClusterOverview {
	w := &dispatcher.ClusterOverview{
		SlotsTotal:  int32(o.SlotsTotal),
		SlotsFree:   int32(o.SlotsFree),
		JobsByState: map[string]int32{},
	}
	for _, tm := range o.TaskManagers {
		data := tm.DataAddress
		w.TaskManagers = append(w.TaskManagers, &dispatcher.TaskManagerInfo{
			ResourceId: tm.ResourceID, Address: tm.RPCAddress, SlotsTotal: int32(tm.Slots), SlotsFree: int32(tm.FreeSlots), DataAddress: &data,
		})
	}
	for s, n := range o.JobsByState {
		w.JobsByState[string(s)] = int32(n)
	}
	return w
}
