// Package cpwire converts the checkpoint vocabulary (internal/checkpoint)
// to and from its Thrift form. Both RPC adapters use it — jm/rpc serves
// acknowledgements and calls triggers, tm/rpc does the reverse — so the
// conversions live once. Like the adapters, it may import idl/kitex_gen;
// nothing but the adapters may import it.
package cpwire

import (
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/checkpoint"
)

// StateToWire converts a state handle; nil stays nil.
func StateToWire(h *checkpoint.StateHandle) *common.StateHandle {
	if h == nil {
		return nil
	}
	return &common.StateHandle{Key: h.Key, Size: h.Size, KeyGroupStart: int32(h.KeyGroupStart), KeyGroupEnd: int32(h.KeyGroupEnd)}
}

// StateFromWire converts a state handle; nil stays nil.
func StateFromWire(h *common.StateHandle) *checkpoint.StateHandle {
	if h == nil {
		return nil
	}
	return &checkpoint.StateHandle{Key: h.Key, Size: h.Size, KeyGroupStart: int(h.KeyGroupStart), KeyGroupEnd: int(h.KeyGroupEnd)}
}

// PartsToWire converts file-sink parts.
func PartsToWire(ps []checkpoint.SinkPart) []*common.SinkPart {
	var out []*common.SinkPart
	for _, p := range ps {
		out = append(out, &common.SinkPart{Pending: p.Pending, FinalKey: p.Final, Size: p.Size})
	}
	return out
}

// PartsFromWire converts file-sink parts, dropping nil entries.
func PartsFromWire(ps []*common.SinkPart) []checkpoint.SinkPart {
	var out []checkpoint.SinkPart
	for _, p := range ps {
		if p != nil {
			out = append(out, checkpoint.SinkPart{Pending: p.Pending, Final: p.FinalKey, Size: p.Size})
		}
	}
	return out
}

// RestoreToWire converts a task's restore; nil stays nil.
func RestoreToWire(r *checkpoint.TaskRestore) *taskexecutor.TaskRestore {
	if r == nil {
		return nil
	}
	w := &taskexecutor.TaskRestore{CheckpointId: r.CheckpointID, States: []*common.StateHandle{}}
	for i := range r.States {
		w.States = append(w.States, StateToWire(&r.States[i]))
	}
	return w
}

// RestoreFromWire converts a task's restore; nil stays nil.
func RestoreFromWire(w *taskexecutor.TaskRestore) *checkpoint.TaskRestore {
	if w == nil {
		return nil
	}
	r := &checkpoint.TaskRestore{CheckpointID: w.CheckpointId}
	for _, h := range w.States {
		if h != nil {
			r.States = append(r.States, *StateFromWire(h))
		}
	}
	return r
}

// AckToWire converts an acknowledgement.
func AckToWire(f *common.FencingToken, a checkpoint.Ack) *jobmaster.AcknowledgeCheckpointRequest {
	w := &jobmaster.AcknowledgeCheckpointRequest{
		Fencing:      f,
		ExecutionId:  a.ExecutionID,
		CheckpointId: a.CheckpointID,
		State:        StateToWire(a.State),
		SinkParts:    PartsToWire(a.SinkParts),
	}
	if p := a.Source; p != nil {
		w.Source = &jobmaster.SourcePosition{Finished: p.Finished}
		if c := p.Current; c != nil {
			w.Source.Current = &jobmaster.InputSplit{Key: c.Key, Offset: c.Offset, Length: c.Length}
		}
	}
	return w
}

// AckFromWire converts an acknowledgement.
func AckFromWire(w *jobmaster.AcknowledgeCheckpointRequest) checkpoint.Ack {
	a := checkpoint.Ack{
		ExecutionID:  w.GetExecutionId(),
		CheckpointID: w.GetCheckpointId(),
		State:        StateFromWire(w.State),
		SinkParts:    PartsFromWire(w.GetSinkParts()),
	}
	if p := w.Source; p != nil {
		a.Source = &checkpoint.SourcePosition{Finished: p.Finished}
		if c := p.Current; c != nil {
			a.Source.Current = &checkpoint.Split{Key: c.Key, Offset: c.Offset, Length: c.Length}
		}
	}
	return a
}

// TriggerToWire converts a trigger for one execution.
func TriggerToWire(f *common.FencingToken, executionID string, t checkpoint.Trigger) *taskexecutor.TriggerCheckpointRequest {
	return &taskexecutor.TriggerCheckpointRequest{
		Fencing: f, ExecutionId: executionID, CheckpointId: t.ID, TimestampMs: t.TimestampMs, Savepoint: t.Savepoint, Stop: t.Stop,
	}
}

// TriggerFromWire converts a trigger.
func TriggerFromWire(w *taskexecutor.TriggerCheckpointRequest) checkpoint.Trigger {
	return checkpoint.Trigger{ID: w.GetCheckpointId(), TimestampMs: w.GetTimestampMs(), Savepoint: w.GetSavepoint(), Stop: w.GetStop()}
}
