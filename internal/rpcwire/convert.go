package rpcwire

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// partitioners are the wire numbers of ChannelSpec.partitioner, by index.
var partitioners = [...]jobgraph.Partitioner{
	0: jobgraph.Forward,
	1: jobgraph.Hash,
	2: jobgraph.Rebalance,
	3: jobgraph.Broadcast,
}

// PartitionerToWire is the ChannelSpec.partitioner number of p, or -1 for a
// partitioner the wire does not know.
func PartitionerToWire(p jobgraph.Partitioner) int32 {
	for i, q := range partitioners {
		if q == p {
			return int32(i)
		}
	}
	return -1
}

// PartitionerFromWire is the partitioner of wire number n.
//
// # Errors
//
// A number no partitioner has.
func PartitionerFromWire(n int32) (jobgraph.Partitioner, error) {
	if n < 0 || int(n) >= len(partitioners) {
		return "", fmt.Errorf("unknown partitioner %d (0 forward, 1 hash, 2 rebalance, 3 broadcast)", n)
	}
	return partitioners[n], nil
}

// FencingToWire converts a fencing token.
func FencingToWire(f control.FencingToken) *common.FencingToken {
	return &common.FencingToken{LeaderSession: f.LeaderSession, JobId: f.JobID, Attempt: f.Attempt}
}

// FencingFromWire converts a fencing token; nil is the zero token.
func FencingFromWire(f *common.FencingToken) control.FencingToken {
	return control.FencingToken{LeaderSession: f.GetLeaderSession(), JobID: f.GetJobId(), Attempt: f.GetAttempt()}
}

// ChainToWire converts an operator chain.
func ChainToWire(chain []jobgraph.Vertex) []*taskexecutor.Vertex {
	out := make([]*taskexecutor.Vertex, len(chain))
	for i, v := range chain {
		out[i] = &taskexecutor.Vertex{
			Id: int32(v.ID), Name: v.Name, Kind: string(v.Kind), Parallelism: int32(v.Parallelism),
			Connector: v.Connector, Config: v.Config,
		}
	}
	return out
}

// ChainFromWire converts an operator chain.
//
// # Errors
//
// A missing (nil) vertex.
func ChainFromWire(chain []*taskexecutor.Vertex) ([]jobgraph.Vertex, error) {
	out := make([]jobgraph.Vertex, len(chain))
	for i, v := range chain {
		if v == nil {
			return nil, fmt.Errorf("chain vertex %d of %d is missing", i+1, len(chain))
		}
		out[i] = jobgraph.Vertex{
			ID: int(v.Id), Name: v.Name, Kind: jobgraph.Kind(v.Kind), Parallelism: int(v.Parallelism),
			Connector: v.Connector, Config: v.Config,
		}
	}
	return out, nil
}

// DeploymentToWire converts a deployment.
//
// # Errors
//
// An output with a partitioner the wire does not know.
func DeploymentToWire(d control.Deployment) (*taskexecutor.TaskDeployment, error) {
	w := &taskexecutor.TaskDeployment{
		Fencing:          FencingToWire(d.Fencing),
		ExecutionId:      d.ExecutionID,
		JobId:            d.JobID,
		Tenant:           d.Tenant,
		ModuleDigest:     d.ModuleDigest,
		Args_:            d.Args,
		Chain:            ChainToWire(d.Chain),
		Subtask:          int32(d.Subtask),
		Parallelism:      int32(d.Parallelism),
		MaxParallelism:   int32(d.MaxParallelism),
		AllocationId:     d.AllocationID,
		JobmasterAddress: d.JobMasterAddress,
		Config:           d.Config.Map(),
		Restore:          restoreToWire(d.Restore),
	}
	if d.JobName != "" {
		name := d.JobName
		w.JobName = &name
	}
	if l := d.Limits; l.MemoryBytes > 0 || l.CallTimeout > 0 || l.StateBytes > 0 {
		mem, call, state := l.MemoryBytes, l.CallTimeout.Milliseconds(), l.StateBytes
		w.MemoryLimitBytes, w.CallTimeoutMs, w.MaxStateBytes = &mem, &call, &state
	}
	if l := d.Limits; l.CPUWeight > 0 {
		weight := int32(min(l.CPUWeight, math.MaxInt32))
		w.CpuWeight = &weight
	}
	if l := d.Limits; l.FuelPerSecond > 0 {
		rate := l.FuelPerSecond
		w.FuelPerSecond = &rate
	}
	if l := d.Limits; l.CallFuel > 0 {
		fuel := l.CallFuel
		w.CallFuel = &fuel
	}
	for _, in := range d.Inputs {
		w.Inputs = append(w.Inputs, &taskexecutor.InputSpec{ResultId: in.ResultID, Producers: int32(in.Producers)})
	}
	for _, out := range d.Outputs {
		p := PartitionerToWire(out.Partitioner)
		if p < 0 {
			return nil, fmt.Errorf("output %s: unknown partitioner %q", out.ResultID, out.Partitioner)
		}
		w.Outputs = append(w.Outputs, &taskexecutor.ChannelSpec{Partitioner: p, Targets: out.Targets, ResultId: out.ResultID})
	}
	return w, nil
}

// DeploymentFromWire converts a deployment. Negative limits read as unset;
// nil inputs and outputs are skipped.
//
// # Errors
//
// No deployment, no fencing token, a missing chain vertex, a config
// jobconfig.Parse refuses, or an output with an unknown partitioner. The message names the execution.
func DeploymentFromWire(w *taskexecutor.TaskDeployment) (control.Deployment, error) {
	if w == nil {
		return control.Deployment{}, errors.New("deploy task: no deployment")
	}
	id := w.GetExecutionId()
	if w.Fencing == nil {
		return control.Deployment{}, fmt.Errorf("deploy task %s: no fencing token", id)
	}
	chain, err := ChainFromWire(w.GetChain())
	if err != nil {
		return control.Deployment{}, fmt.Errorf("deploy task %s: %w", id, err)
	}
	conf, err := jobconfig.Parse(w.GetConfig())
	if err != nil {
		return control.Deployment{}, fmt.Errorf("deploy task %s: %w", id, err)
	}
	d := control.Deployment{
		Fencing:          FencingFromWire(w.Fencing),
		ExecutionID:      id,
		JobID:            w.GetJobId(),
		JobName:          w.GetJobName(),
		Tenant:           w.GetTenant(),
		ModuleDigest:     w.GetModuleDigest(),
		Args:             w.GetArgs_(),
		Chain:            chain,
		Subtask:          int(w.GetSubtask()),
		Parallelism:      int(w.GetParallelism()),
		MaxParallelism:   int(w.GetMaxParallelism()),
		AllocationID:     w.GetAllocationId(),
		JobMasterAddress: w.GetJobmasterAddress(),
		Config:           conf,
		Restore:          restoreFromWire(w.Restore),
		Limits: control.TaskLimits{
			MemoryBytes:   max(w.GetMemoryLimitBytes(), 0),
			CallTimeout:   time.Duration(max(w.GetCallTimeoutMs(), 0)) * time.Millisecond,
			StateBytes:    max(w.GetMaxStateBytes(), 0),
			CPUWeight:     int(max(w.GetCpuWeight(), 0)),
			FuelPerSecond: max(w.GetFuelPerSecond(), 0),
			CallFuel:      max(w.GetCallFuel(), 0),
		},
	}
	for _, in := range w.GetInputs() {
		if in != nil {
			d.Inputs = append(d.Inputs, control.InputSpec{ResultID: in.GetResultId(), Producers: int(in.GetProducers())})
		}
	}
	for _, out := range w.GetOutputs() {
		if out == nil {
			continue
		}
		p, err := PartitionerFromWire(out.GetPartitioner())
		if err != nil {
			return control.Deployment{}, fmt.Errorf("deploy task %s: output %s: %w", id, out.GetResultId(), err)
		}
		d.Outputs = append(d.Outputs, control.OutputSpec{ResultID: out.GetResultId(), Partitioner: p, Targets: out.GetTargets()})
	}
	return d, nil
}

// TaskUpdateToWire converts a task state report.
func TaskUpdateToWire(u control.TaskUpdate) *jobmaster.TaskStateUpdate {
	return &jobmaster.TaskStateUpdate{
		Fencing:       FencingToWire(u.Fencing),
		ExecutionId:   u.ExecutionID,
		State:         u.State,
		Failure:       u.Failure,
		FailureKind:   string(u.FailureKind),
		Accumulators:  u.Accumulators,
		Collected:     u.Collected,
		CollectedFrom: optInt64(u.CollectedFrom),
		SinkParts:     partsToWire(u.SinkParts),
		Metrics:       taskMetricsToWire("", "", u.Metrics),
	}
}

// TaskUpdateFromWire converts a task state report.
func TaskUpdateFromWire(w *jobmaster.TaskStateUpdate) control.TaskUpdate {
	return control.TaskUpdate{
		Fencing:       FencingFromWire(w.GetFencing()),
		ExecutionID:   w.GetExecutionId(),
		State:         w.GetState(),
		Failure:       w.GetFailure(),
		FailureKind:   control.FailureKind(w.GetFailureKind()),
		Accumulators:  w.GetAccumulators(),
		Collected:     w.GetCollected(),
		CollectedFrom: w.GetCollectedFrom(),
		SinkParts:     partsFromWire(w.GetSinkParts()),
		Metrics:       taskMetricsFromWire(w.GetMetrics()),
	}
}

// SplitRequestToWire converts a request for the next input split.
func SplitRequestToWire(r control.SplitRequest) *jobmaster.NextSplitRequest {
	return &jobmaster.NextSplitRequest{
		Fencing:     FencingToWire(r.Fencing),
		ExecutionId: r.ExecutionID,
		VertexId:    int32(r.VertexID),
		Subtask:     int32(r.Subtask),
	}
}

// SplitRequestFromWire converts a request for the next input split.
func SplitRequestFromWire(w *jobmaster.NextSplitRequest) control.SplitRequest {
	return control.SplitRequest{
		Fencing:     FencingFromWire(w.GetFencing()),
		ExecutionID: w.GetExecutionId(),
		VertexID:    int(w.GetVertexId()),
		Subtask:     int(w.GetSubtask()),
	}
}

// NextSplitToWire converts the answer to a split request: the split, or
// done when the source has no more, or neither (a zero s and not done)
// when a source that follows its paths has no split yet.
func NextSplitToWire(s checkpoint.Split, done bool) *jobmaster.NextSplitResponse {
	switch {
	case done:
		return &jobmaster.NextSplitResponse{Done: true}
	case s == checkpoint.Split{}:
		return &jobmaster.NextSplitResponse{}
	}
	return &jobmaster.NextSplitResponse{Split: splitToWire(s)}
}

// NextSplitFromWire converts the answer to a split request; neither a
// split nor done is "no split yet" (a zero s, done false).
//
// # Errors
//
// A split without an object key.
func NextSplitFromWire(w *jobmaster.NextSplitResponse) (s checkpoint.Split, done bool, err error) {
	if w.GetDone() {
		return checkpoint.Split{}, true, nil
	}
	sp := w.GetSplit()
	if sp == nil {
		return checkpoint.Split{}, false, nil
	}
	if sp.GetKey() == "" {
		return checkpoint.Split{}, false, errors.New("job master answered a split without an object key")
	}
	return splitFromWire(sp), false, nil
}

func splitToWire(s checkpoint.Split) *jobmaster.InputSplit {
	return &jobmaster.InputSplit{Key: s.Key, Offset: s.Offset, Length: s.Length}
}

func splitFromWire(w *jobmaster.InputSplit) checkpoint.Split {
	return checkpoint.Split{Key: w.GetKey(), Offset: w.GetOffset(), Length: w.GetLength()}
}

// TriggerToWire converts a checkpoint trigger for one execution.
func TriggerToWire(f control.FencingToken, executionID string, t checkpoint.Trigger) *taskexecutor.TriggerCheckpointRequest {
	w := &taskexecutor.TriggerCheckpointRequest{
		Fencing: FencingToWire(f), ExecutionId: executionID,
		CheckpointId: t.ID, TimestampMs: t.TimestampMs, Savepoint: t.Savepoint, Stop: t.Stop,
	}
	if t.Drain {
		w.Drain = &t.Drain
	}
	return w
}

// TriggerFromWire converts a checkpoint trigger.
func TriggerFromWire(w *taskexecutor.TriggerCheckpointRequest) checkpoint.Trigger {
	return checkpoint.Trigger{ID: w.GetCheckpointId(), TimestampMs: w.GetTimestampMs(), Savepoint: w.GetSavepoint(), Stop: w.GetStop(),
		Drain: w.GetDrain()}
}

// AckToWire converts a checkpoint acknowledgement.
func AckToWire(f control.FencingToken, a checkpoint.Ack) *jobmaster.AcknowledgeCheckpointRequest {
	w := &jobmaster.AcknowledgeCheckpointRequest{
		Fencing:       FencingToWire(f),
		ExecutionId:   a.ExecutionID,
		CheckpointId:  a.CheckpointID,
		State:         stateToWire(a.State),
		SinkParts:     partsToWire(a.SinkParts),
		Collected:     a.Collected,
		CollectedFrom: optInt64(a.CollectedFrom),
	}
	if a.Alignment > 0 {
		ns := a.Alignment.Nanoseconds()
		w.AlignmentNs = &ns
	}
	if p := a.Source; p != nil {
		w.Source = &jobmaster.SourcePosition{Finished: p.Finished}
		if c := p.Current; c != nil {
			w.Source.Current = splitToWire(*c)
		}
	}
	return w
}

// AckFromWire converts a checkpoint acknowledgement.
func AckFromWire(w *jobmaster.AcknowledgeCheckpointRequest) checkpoint.Ack {
	a := checkpoint.Ack{
		ExecutionID:   w.GetExecutionId(),
		CheckpointID:  w.GetCheckpointId(),
		State:         stateFromWire(w.State),
		SinkParts:     partsFromWire(w.GetSinkParts()),
		Alignment:     time.Duration(w.GetAlignmentNs()),
		Collected:     w.GetCollected(),
		CollectedFrom: w.GetCollectedFrom(),
	}
	if p := w.Source; p != nil {
		a.Source = &checkpoint.SourcePosition{Finished: p.Finished}
		if c := p.Current; c != nil {
			sp := splitFromWire(c)
			a.Source.Current = &sp
		}
	}
	return a
}

// DeclineToWire converts a checkpoint refusal.
func DeclineToWire(f control.FencingToken, d checkpoint.Decline) *jobmaster.DeclineCheckpointRequest {
	return &jobmaster.DeclineCheckpointRequest{Fencing: FencingToWire(f), ExecutionId: d.ExecutionID, CheckpointId: d.CheckpointID, Reason: d.Reason}
}

// DeclineFromWire converts a checkpoint refusal.
func DeclineFromWire(w *jobmaster.DeclineCheckpointRequest) checkpoint.Decline {
	return checkpoint.Decline{ExecutionID: w.GetExecutionId(), CheckpointID: w.GetCheckpointId(), Reason: w.GetReason()}
}

func stateToWire(h *checkpoint.StateHandle) *common.StateHandle {
	if h == nil {
		return nil
	}
	return &common.StateHandle{Key: h.Key, Size: h.Size, KeyGroupStart: int32(h.KeyGroupStart), KeyGroupEnd: int32(h.KeyGroupEnd)}
}

func stateFromWire(h *common.StateHandle) *checkpoint.StateHandle {
	if h == nil {
		return nil
	}
	return &checkpoint.StateHandle{Key: h.Key, Size: h.Size, KeyGroupStart: int(h.KeyGroupStart), KeyGroupEnd: int(h.KeyGroupEnd)}
}

func partsToWire(ps []checkpoint.SinkPart) []*common.SinkPart {
	var out []*common.SinkPart
	for _, p := range ps {
		out = append(out, &common.SinkPart{Pending: p.Pending, FinalKey: p.Final, Size: p.Size})
	}
	return out
}

// partsFromWire drops nil entries.
func partsFromWire(ps []*common.SinkPart) []checkpoint.SinkPart {
	var out []checkpoint.SinkPart
	for _, p := range ps {
		if p != nil {
			out = append(out, checkpoint.SinkPart{Pending: p.Pending, Final: p.FinalKey, Size: p.Size})
		}
	}
	return out
}

func restoreToWire(r *checkpoint.TaskRestore) *taskexecutor.TaskRestore {
	if r == nil {
		return nil
	}
	w := &taskexecutor.TaskRestore{CheckpointId: r.CheckpointID, States: []*common.StateHandle{}}
	for i := range r.States {
		w.States = append(w.States, stateToWire(&r.States[i]))
	}
	return w
}

// restoreFromWire drops nil handles.
func restoreFromWire(w *taskexecutor.TaskRestore) *checkpoint.TaskRestore {
	if w == nil {
		return nil
	}
	r := &checkpoint.TaskRestore{CheckpointID: w.CheckpointId}
	for _, h := range w.States {
		if h != nil {
			r.States = append(r.States, *stateFromWire(h))
		}
	}
	return r
}

// MaxWarmModules bounds the modules one WarmModules request may name.
const MaxWarmModules = 64

// ModuleRefsToWire converts the modules of a WarmModules request.
func ModuleRefsToWire(refs []control.ModuleRef) *taskexecutor.WarmModulesRequest {
	out := make([]*taskexecutor.ModuleRef, len(refs))
	for i, r := range refs {
		out[i] = &taskexecutor.ModuleRef{Tenant: r.Tenant, Digest: r.Digest}
	}
	return &taskexecutor.WarmModulesRequest{Modules: out}
}

// ModuleRefsFromWire converts a WarmModules request back.
//
// # Errors
//
// More than MaxWarmModules modules, or a module without a tenant or digest.
func ModuleRefsFromWire(req *taskexecutor.WarmModulesRequest) ([]control.ModuleRef, error) {
	mods := req.GetModules()
	if len(mods) > MaxWarmModules {
		return nil, fmt.Errorf("%d modules to warm, at most %d", len(mods), MaxWarmModules)
	}
	out := make([]control.ModuleRef, 0, len(mods))
	for i, m := range mods {
		if m == nil || m.Tenant == "" || m.Digest == "" {
			return nil, fmt.Errorf("module %d to warm: need a tenant and a digest", i)
		}
		out = append(out, control.ModuleRef{Tenant: m.GetTenant(), Digest: m.GetDigest()})
	}
	return out, nil
}

// optInt64 is n as an optional field: unset when zero.
func optInt64(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
