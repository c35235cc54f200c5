package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/logring"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/wasmhost"
)

// Bounds of the kept logs, for Config fields left zero. One task keeps at
// most DefaultTaskLogLines lines and DefaultTaskLogBytes bytes (each line
// costs its text plus about 160 bytes); the logs of the last
// DefaultEndedTaskLogs tasks that ended stay readable. A TaskManager keeps
// its own log (what it writes at INFO and above, task lines included) in a
// ring of DefaultOwnLogLines lines and DefaultOwnLogBytes bytes (tm.Config).
// The most a TaskManager holds is about (slots + ended) × 256 KiB + 1 MiB.
const (
	DefaultTaskLogLines  = 1000
	DefaultTaskLogBytes  = 256 << 10
	DefaultEndedTaskLogs = 64
	DefaultOwnLogLines   = 5000
	DefaultOwnLogBytes   = 1 << 20
)

// taskLog is the kept log of one task.
type taskLog struct {
	ring                *logring.Ring
	jobID, tenant, name string
	vertices            []string
	subtask, attempt    int
}

func (tl *taskLog) matches(task string) bool {
	if task == "" || task == tl.name {
		return true
	}
	for _, v := range tl.vertices {
		if v == task {
			return true
		}
	}
	return false
}

// newTaskLog makes the ring of d's task and registers it; the task's
// logger writes into it.
func (e *Executor) newTaskLog(d control.Deployment) *taskLog {
	names := make([]string, len(d.Chain))
	for i, v := range d.Chain {
		names[i] = v.Name
	}
	tl := &taskLog{
		ring:  logring.New(e.cfg.TaskLogLines, e.cfg.TaskLogBytes),
		jobID: d.JobID, tenant: d.Tenant, name: strings.Join(names, " -> "), vertices: names,
		subtask: d.Subtask, attempt: int(d.Fencing.Attempt),
	}
	e.mu.Lock()
	e.logs[d.ExecutionID] = tl
	e.mu.Unlock()
	return tl
}

// taskLogger is the logger of one task: e.log, with every record of DEBUG
// and above also kept in the task's ring.
func (e *Executor) taskLogger(tl *taskLog, executionID string) *slog.Logger {
	return slog.New(logring.NewHandler(e.log.Handler(), tl.ring, slog.LevelDebug, func(l *control.LogLine) {
		l.Source, l.TaskManager, l.JobID, l.Tenant = executionID, e.cfg.ResourceID, tl.jobID, tl.tenant
		l.Task, l.Subtask, l.Attempt = tl.name, tl.subtask, tl.attempt
	}))
}

// event keeps a host event of the task in its ring only (the TaskManager's
// log has its own lines for what matters there).
func (e *Executor) event(tl *taskLog, executionID string, level slog.Level, msg, attrs string) {
	tl.ring.Add(control.LogLine{
		Source: executionID, TaskManager: e.cfg.ResourceID, JobID: tl.jobID, Tenant: tl.tenant,
		Task: tl.name, Subtask: tl.subtask, Attempt: tl.attempt,
		Time: e.now(), Level: level.String(), Message: msg, Attrs: attrs,
	})
}

// taskEnded keeps the log of an ended task readable until
// EndedTaskLogs newer ones ended.
func (e *Executor) taskEnded(executionID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, executionID)
	for len(e.ended) > e.cfg.EndedTaskLogs {
		delete(e.logs, e.ended[0])
		e.ended = e.ended[1:]
	}
}

// TaskLogs returns the kept lines of job r.JobID's tasks of tenant
// r.Tenant (running ones and the last ended ones), each task's oldest
// first, tasks by name, subtask and attempt.
//
// # Errors
//
// rpcerr.ErrInvalidArgument without a job id or tenant.
func (e *Executor) TaskLogs(_ context.Context, r control.TaskLogsRequest) ([]control.LogLine, error) {
	if r.JobID == "" || r.Tenant == "" {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "task logs: a job id and its tenant are required")
	}
	type src struct {
		id string
		tl *taskLog
	}
	var srcs []src
	e.mu.Lock()
	for id, tl := range e.logs {
		if tl.jobID == r.JobID && tl.tenant == r.Tenant && tl.matches(r.Query.Task) {
			srcs = append(srcs, src{id, tl})
		}
	}
	e.mu.Unlock()
	slices.SortFunc(srcs, func(a, b src) int {
		return cmp.Or(cmp.Compare(a.tl.name, b.tl.name), cmp.Compare(a.tl.subtask, b.tl.subtask),
			cmp.Compare(a.tl.attempt, b.tl.attempt), cmp.Compare(a.id, b.id))
	})
	var out []control.LogLine
	for _, s := range srcs {
		out = append(out, s.tl.ring.Read(r.Query.After[s.id], r.Query.Limit, nil)...)
	}
	return out, nil
}

// TaskManagerLogs returns the TaskManager's own kept lines after r.After:
// with r.All every line, else only the lines logged for tenant r.Tenant.
//
// # Errors
//
// rpcerr.ErrUnavailable when this TaskManager keeps no log of its own.
func (e *Executor) TaskManagerLogs(_ context.Context, r control.TaskManagerLogsRequest) ([]control.LogLine, error) {
	if e.cfg.OwnLog == nil {
		return nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "task manager %s keeps no log of its own", e.cfg.ResourceID)
	}
	var keep func(*control.LogLine) bool
	if !r.All {
		keep = func(l *control.LogLine) bool { return l.Tenant == r.Tenant }
	}
	lines := e.cfg.OwnLog.Read(r.After, r.Limit, keep)
	if !r.All && len(lines) > 0 {
		// What left the ring was of every tenant: its count is not this
		// tenant's business.
		lines[0].Dropped = 0
	}
	return lines, nil
}

// SampleStacks samples the guest call stacks of job r.JobID's running tasks
// of tenant r.Tenant (see wasmhost.Instance.SampleStacks), all at once: for
// r.Query.Duration at every r.Query.Interval, or one current stack each.
// A task whose guest runs no code meanwhile has no samples.
//
// # Errors
//
// rpcerr.ErrInvalidArgument without a job id or tenant, or for a duration
// above control.MaxStackDuration or an interval below
// control.MinStackInterval; rpcerr.ErrUnavailable when a task is being
// sampled by another request.
func (e *Executor) SampleStacks(ctx context.Context, r control.TaskStacksRequest) ([]control.TaskStack, error) {
	q := r.Query
	switch {
	case r.JobID == "" || r.Tenant == "":
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "sample stacks: a job id and its tenant are required")
	case q.Duration < 0 || q.Duration > control.MaxStackDuration:
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "sample stacks: duration %v: must be at most %v", q.Duration, control.MaxStackDuration)
	case q.Interval < 0 || (q.Interval > 0 && q.Interval < control.MinStackInterval):
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "sample stacks: interval %v: must be at least %v", q.Interval, control.MinStackInterval)
	}
	if q.Interval == 0 {
		q.Interval = control.DefaultStackInterval
	}
	var tasks []*runningTask
	e.mu.Lock()
	for _, t := range e.tasks {
		if t.d.JobID == r.JobID && t.d.Tenant == r.Tenant && t.log.matches(q.Task) {
			tasks = append(tasks, t)
		}
	}
	e.mu.Unlock()
	out := make([]control.TaskStack, len(tasks))
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		out[i] = control.TaskStack{ExecutionID: t.d.ExecutionID, TaskManager: e.cfg.ResourceID,
			Task: t.log.name, Subtask: t.d.Subtask, Attempt: int(t.d.Fencing.Attempt)}
		in := t.inst.Load()
		if in == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := in.SampleStacks(ctx, q.Duration, q.Interval)
			if err != nil {
				errs[i] = err
				return
			}
			out[i].Total = p.Total
			for _, s := range p.Stacks {
				out[i].Samples = append(out[i].Samples, control.StackCount{Frames: s.Frames, Count: s.Count})
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if errors.Is(err, wasmhost.ErrSampling) {
			return nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "sample stacks of task %s: %w: try again when it ends", tasks[i].d.ExecutionID, err)
		} else if err != nil {
			return nil, fmt.Errorf("sample stacks of task %s: %w", tasks[i].d.ExecutionID, err)
		}
	}
	slices.SortFunc(out, func(a, b control.TaskStack) int {
		return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(a.Subtask, b.Subtask), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.ExecutionID, b.ExecutionID))
	})
	return out, nil
}
