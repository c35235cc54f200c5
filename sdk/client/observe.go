package client

import (
	"context"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/internal/control"
)

// Logs returns the kept log lines of a job's tasks (its guests' log output
// and the host's events of each task), oldest first. Pass the newest Seq
// seen of each Source as q.After to get only newer lines: polling so sees
// every line once, and a line after lost ones says how many in Dropped.
//
// # Errors
//
// ErrJobNotFound (also for another tenant's job); ErrUnavailable when no
// TaskManager answered.
func (c *Client) Logs(ctx context.Context, jobID string, q LogQuery) ([]LogLine, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	after := make(map[string]int64, len(q.After))
	for k, v := range q.After {
		after[k] = int64(v)
	}
	resp, err := c.c.GetLogs(ctx, &dispatcher.JobLogsRequest{JobId: jobID, Task: q.Task, After: after, Limit: int32(q.Limit)}, opts...)
	if err != nil {
		return nil, wrap("logs of job "+jobID, err)
	}
	return linesFromWire(resp), nil
}

// TaskManagerLogs returns the kept lines of a TaskManager's own log (its
// resource id, as Overview lists it) after Seq after: every line on a
// cluster without tenants, else only those logged for the caller's tenant.
//
// # Errors
//
// ErrNotFound for a TaskManager that is not registered.
func (c *Client) TaskManagerLogs(ctx context.Context, resourceID string, after uint64, limit int) ([]LogLine, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.GetTaskManagerLogs(ctx, &dispatcher.TaskManagerLogsQuery{TaskManagerId: resourceID, After: int64(after), Limit: int32(limit)}, opts...)
	if err != nil {
		return nil, wrap("logs of task manager "+resourceID, err)
	}
	return linesFromWire(resp), nil
}

// Stacks returns the guest call stacks of a job's running tasks: one
// current stack each, or with q.Duration a sampled profile (see
// FoldedStacks for flame graph tools). The call takes q.Duration plus the
// client's timeout at most.
//
// # Errors
//
// ErrJobNotFound; ErrInvalidArgument for a duration above a minute;
// ErrUnavailable when a task is being sampled by another caller.
func (c *Client) Stacks(ctx context.Context, jobID string, q StackQuery) ([]TaskStack, error) {
	ctx, cancel, opts := c.call(ctx, q.Duration+c.timeout)
	defer cancel()
	resp, err := c.c.GetStacks(ctx, &dispatcher.JobStacksRequest{JobId: jobID, Task: q.Task,
		DurationMs: q.Duration.Milliseconds(), IntervalMs: q.Interval.Milliseconds()}, opts...)
	if err != nil {
		return nil, wrap("stacks of job "+jobID, err)
	}
	var out []TaskStack
	for _, t := range resp.GetTasks() {
		if t == nil {
			continue
		}
		ts := TaskStack{ExecutionID: t.ExecutionId, TaskManager: t.TaskManager, Task: t.Task,
			Subtask: int(t.Subtask), Attempt: int(t.Attempt), Total: t.Total}
		for _, s := range t.Samples {
			if s != nil {
				ts.Samples = append(ts.Samples, StackCount{Frames: s.Frames, Count: s.Count})
			}
		}
		out = append(out, ts)
	}
	return out, nil
}

func linesFromWire(w *common.LogLines) []LogLine {
	out := make([]LogLine, 0, len(w.GetLines()))
	for _, l := range w.GetLines() {
		if l == nil {
			continue
		}
		out = append(out, LogLine{
			Source: l.Source, Seq: uint64(max(l.Seq, 0)), Dropped: uint64(max(l.Dropped, 0)), Time: msTime(l.TimeMs),
			Level: l.Level, Message: l.Message, Attrs: l.Attrs, TaskManager: l.TaskManager,
			JobID: l.JobId, Task: l.Task, Subtask: int(l.Subtask), Attempt: int(l.Attempt),
		})
	}
	return out
}

// FoldedStacks renders stacks as folded stacks (Brendan Gregg's format:
// "outer;inner;innermost count" per line, counts of equal stacks of all
// tasks added up, sorted), the input of flamegraph.pl and most flame
// graph viewers. Frame characters that would break a line (';', spaces,
// control characters) are written as '_'.
func FoldedStacks(ts []TaskStack) []string {
	cs := make([]control.TaskStack, len(ts))
	for i, t := range ts {
		for _, s := range t.Samples {
			cs[i].Samples = append(cs[i].Samples, control.StackCount{Frames: s.Frames, Count: s.Count})
		}
	}
	return control.Folded(cs)
}
