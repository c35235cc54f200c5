package rpcwire

import (
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/control"
)

// Bounds on what a log or stack answer may carry from the wire: a peer's
// answer is not trusted to be small.
const (
	MaxWireLogLines  = 64 << 10
	MaxWireStacks    = 64 << 10
	MaxWireCursorLen = 4096
)

// LogLinesToWire converts kept lines.
func LogLinesToWire(ls []control.LogLine) *common.LogLines {
	out := make([]*common.LogLine, len(ls))
	for i, l := range ls {
		out[i] = &common.LogLine{
			Source: l.Source, Seq: int64(l.Seq), Dropped: int64(l.Dropped), TimeMs: l.Time.UnixMilli(),
			Level: l.Level, Message: l.Message, Attrs: l.Attrs, TaskManager: l.TaskManager, Tenant: l.Tenant,
			JobId: l.JobID, Task: l.Task, Subtask: int32(l.Subtask), Attempt: int32(l.Attempt),
		}
	}
	return &common.LogLines{Lines: out}
}

// LogLinesFromWire converts kept lines, at most MaxWireLogLines of them.
func LogLinesFromWire(w *common.LogLines) []control.LogLine {
	ls := w.GetLines()
	if len(ls) > MaxWireLogLines {
		ls = ls[:MaxWireLogLines]
	}
	out := make([]control.LogLine, 0, len(ls))
	for _, l := range ls {
		if l == nil {
			continue
		}
		out = append(out, control.LogLine{
			Source: l.Source, Seq: uint64(max(l.Seq, 0)), Dropped: uint64(max(l.Dropped, 0)), Time: time.UnixMilli(l.TimeMs),
			Level: l.Level, Message: l.Message, Attrs: l.Attrs, TaskManager: l.TaskManager, Tenant: l.Tenant,
			JobID: l.JobId, Task: l.Task, Subtask: int(l.Subtask), Attempt: int(l.Attempt),
		})
	}
	return out
}

// CursorToWire converts a LogQuery's After.
func CursorToWire(after map[string]uint64) map[string]int64 {
	if len(after) == 0 {
		return nil
	}
	out := make(map[string]int64, len(after))
	for k, v := range after {
		out[k] = int64(v)
	}
	return out
}

// CursorFromWire converts a LogQuery's After, keeping at most
// MaxWireCursorLen sources.
func CursorFromWire(after map[string]int64) map[string]uint64 {
	if len(after) == 0 {
		return nil
	}
	out := make(map[string]uint64, min(len(after), MaxWireCursorLen))
	for k, v := range after {
		if len(out) == MaxWireCursorLen {
			break
		}
		out[k] = uint64(max(v, 0))
	}
	return out
}

// TaskLogsToWire converts a request for a job's task logs.
func TaskLogsToWire(r control.TaskLogsRequest) *taskexecutor.TaskLogsRequest {
	return &taskexecutor.TaskLogsRequest{JobId: r.JobID, Tenant: r.Tenant, Task: r.Query.Task,
		After: CursorToWire(r.Query.After), Limit: int32(r.Query.Limit)}
}

// TaskLogsFromWire converts a request for a job's task logs.
func TaskLogsFromWire(w *taskexecutor.TaskLogsRequest) control.TaskLogsRequest {
	return control.TaskLogsRequest{JobID: w.GetJobId(), Tenant: w.GetTenant(), Query: control.LogQuery{
		Task: w.GetTask(), After: CursorFromWire(w.GetAfter()), Limit: int(w.GetLimit())}}
}

// TaskManagerLogsToWire converts a request for a TaskManager's own log.
func TaskManagerLogsToWire(r control.TaskManagerLogsRequest) *taskexecutor.TaskManagerLogsRequest {
	return &taskexecutor.TaskManagerLogsRequest{Tenant: r.Tenant, All: r.All, After: int64(r.After), Limit: int32(r.Limit)}
}

// TaskManagerLogsFromWire converts a request for a TaskManager's own log.
func TaskManagerLogsFromWire(w *taskexecutor.TaskManagerLogsRequest) control.TaskManagerLogsRequest {
	return control.TaskManagerLogsRequest{Tenant: w.GetTenant(), All: w.GetAll(), After: uint64(max(w.GetAfter(), 0)), Limit: int(w.GetLimit())}
}

// StacksRequestToWire converts a request to sample a job's stacks.
func StacksRequestToWire(r control.TaskStacksRequest) *taskexecutor.TaskStacksRequest {
	return &taskexecutor.TaskStacksRequest{JobId: r.JobID, Tenant: r.Tenant, Task: r.Query.Task,
		DurationMs: r.Query.Duration.Milliseconds(), IntervalMs: r.Query.Interval.Milliseconds()}
}

// StacksRequestFromWire converts a request to sample a job's stacks.
func StacksRequestFromWire(w *taskexecutor.TaskStacksRequest) control.TaskStacksRequest {
	return control.TaskStacksRequest{JobID: w.GetJobId(), Tenant: w.GetTenant(), Query: control.StackQuery{
		Task: w.GetTask(), Duration: time.Duration(max(w.GetDurationMs(), 0)) * time.Millisecond,
		Interval: time.Duration(max(w.GetIntervalMs(), 0)) * time.Millisecond}}
}

// StacksToWire converts sampled stacks.
func StacksToWire(ts []control.TaskStack) *common.TaskStacks {
	out := make([]*common.TaskStack, len(ts))
	for i, t := range ts {
		ss := make([]*common.StackCount, len(t.Samples))
		for j, s := range t.Samples {
			ss[j] = &common.StackCount{Frames: s.Frames, Count: s.Count}
		}
		out[i] = &common.TaskStack{ExecutionId: t.ExecutionID, TaskManager: t.TaskManager, Task: t.Task,
			Subtask: int32(t.Subtask), Attempt: int32(t.Attempt), Samples: ss, Total: t.Total}
	}
	return &common.TaskStacks{Tasks: out}
}

// StacksFromWire converts sampled stacks, at most MaxWireStacks stacks in
// all, each of at most control.MaxStackFrames frames.
func StacksFromWire(w *common.TaskStacks) []control.TaskStack {
	var out []control.TaskStack
	budget := MaxWireStacks
	for _, t := range w.GetTasks() {
		if t == nil {
			continue
		}
		ts := control.TaskStack{ExecutionID: t.ExecutionId, TaskManager: t.TaskManager, Task: t.Task,
			Subtask: int(t.Subtask), Attempt: int(t.Attempt), Total: t.Total}
		for _, s := range t.Samples {
			if s == nil || budget == 0 {
				continue
			}
			budget--
			fs := s.Frames
			if len(fs) > control.MaxStackFrames+1 {
				fs = fs[len(fs)-control.MaxStackFrames-1:]
			}
			ts.Samples = append(ts.Samples, control.StackCount{Frames: fs, Count: s.Count})
		}
		out = append(out, ts)
	}
	return out
}
