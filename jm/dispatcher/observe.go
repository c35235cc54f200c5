package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// The log and stack types, as the TaskManagers keep them (internal/control).
type (
	// LogLine is one kept log line.
	LogLine = control.LogLine
	// LogQuery selects log lines; After is the reader's cursor.
	LogQuery = control.LogQuery
	// StackQuery asks for one current stack or a sampled profile.
	StackQuery = control.StackQuery
	// TaskStack is what sampling found in one task.
	TaskStack = control.TaskStack
)

// TaskObserver reads what TaskManagers keep of their tasks: log lines and
// guest stack samples, by TaskManager RPC address. jm/rpc implements it
// over Kitex; tests use fakes.
type TaskObserver interface {
	TaskLogs(ctx context.Context, address string, r control.TaskLogsRequest) ([]control.LogLine, error)
	TaskManagerLogs(ctx context.Context, address string, r control.TaskManagerLogsRequest) ([]control.LogLine, error)
	SampleStacks(ctx context.Context, address string, r control.TaskStacksRequest) ([]control.TaskStack, error)
}

func (d *Dispatcher) observer() (TaskObserver, error) {
	if d.cfg.Observer == nil {
		return nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "this job manager does not reach its task managers' logs and stacks")
	}
	return d.cfg.Observer, nil
}

func (d *Dispatcher) rpcTimeout() time.Duration {
	if d.cfg.RPCTimeout > 0 {
		return d.cfg.RPCTimeout
	}
	return 10 * time.Second
}

// fanOut calls f on every TaskManager in tms at once, each bounded by
// timeout, and returns the results of those that answered. It fails only
// when every TaskManager failed (with the first error); the others' errors
// are logged.
func fanOut[T any](ctx context.Context, d *Dispatcher, tms []resourcemanager.TaskManagerInfo, timeout time.Duration, f func(ctx context.Context, addr string) ([]T, error)) ([]T, error) {
	res := make([][]T, len(tms))
	errs := make([]error, len(tms))
	var wg sync.WaitGroup
	for i, tm := range tms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res[i], errs[i] = f(cctx, tm.RPCAddress)
		}()
	}
	wg.Wait()
	var out []T
	var first error
	ok := 0
	for i, err := range errs {
		if err != nil {
			first = cmp.Or(first, err)
			d.log.Warn("task manager did not answer", "tm", tms[i].ResourceID, "err", err)
			continue
		}
		ok++
		out = append(out, res[i]...)
	}
	if ok == 0 && first != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rpcerr.CodeOf(first) == rpcerr.CodeUnknown {
			first = rpcerr.Errorf(rpcerr.ErrUnavailable, "%w", first)
		}
		return nil, first
	}
	return out, nil
}

// Logs returns the kept log lines of the tenant's job: its guests' log
// output and the host's events of its tasks (deployed, running, failed
// with the cause, checkpoints...), from every TaskManager that keeps some,
// in time order. Each TaskManager keeps a bounded number of lines per task
// and the logs of its last ended tasks only (tm/executor); a line that
// follows lost ones says how many in Dropped. Poll with q.After set to the
// newest Seq seen of each Source to get only new lines.
//
// # Errors
//
// ErrJobNotFound for an unknown job or another tenant's; ErrUnavailable
// when no TaskManager answered.
func (d *Dispatcher) Logs(ctx context.Context, tenant, job string, q LogQuery) ([]LogLine, error) {
	if _, err := d.job(tenant, job); err != nil {
		return nil, err
	}
	obs, err := d.observer()
	if err != nil {
		return nil, err
	}
	req := control.TaskLogsRequest{JobID: job, Tenant: tenant, Query: q}
	lines, err := fanOut(ctx, d, d.cfg.Resources.Overview().TaskManagers, d.rpcTimeout(), func(ctx context.Context, addr string) ([]LogLine, error) {
		return obs.TaskLogs(ctx, addr, req)
	})
	if err != nil {
		return nil, fmt.Errorf("logs of job %s: %w", job, err)
	}
	// A TaskManager answers for its own tasks only; still, nothing of
	// another job or tenant leaves here.
	lines = slices.DeleteFunc(lines, func(l LogLine) bool { return l.JobID != job || l.Tenant != tenant })
	sortLines(lines)
	return lines, nil
}

func sortLines(lines []LogLine) {
	slices.SortStableFunc(lines, func(a, b LogLine) int {
		if a.Source == b.Source {
			return cmp.Compare(a.Seq, b.Seq)
		}
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Source, b.Source))
	})
}

// TaskManagerLogs returns the kept lines of TaskManager tmID's own log
// that tenant may read: in an open cluster (Config.OpenCluster) every
// line; with tenants only the lines logged for the tenant's tasks and
// jobs, since the rest may name other tenants (docs/SECURITY.md). The
// cursor is q.After[""]; q.Task is ignored.
//
// # Errors
//
// ErrNotFound for a TaskManager that is not registered; ErrUnavailable
// when it does not answer.
func (d *Dispatcher) TaskManagerLogs(ctx context.Context, tenant, tmID string, q LogQuery) ([]LogLine, error) {
	obs, err := d.observer()
	if err != nil {
		return nil, err
	}
	var tm *resourcemanager.TaskManagerInfo
	for _, t := range d.cfg.Resources.Overview().TaskManagers {
		if t.ResourceID == tmID {
			tm = &t
			break
		}
	}
	if tm == nil {
		return nil, rpcerr.Errorf(rpcerr.ErrNotFound, "task manager %q not found: `sluice overview` lists them", tmID)
	}
	cctx, cancel := context.WithTimeout(ctx, d.rpcTimeout())
	defer cancel()
	lines, err := obs.TaskManagerLogs(cctx, tm.RPCAddress, control.TaskManagerLogsRequest{
		Tenant: tenant, All: d.cfg.OpenCluster, After: q.After[""], Limit: q.Limit})
	if err != nil {
		if rpcerr.CodeOf(err) == rpcerr.CodeUnknown && !errors.Is(err, context.Canceled) {
			err = rpcerr.Errorf(rpcerr.ErrUnavailable, "%w", err)
		}
		return nil, fmt.Errorf("logs of task manager %s: %w", tmID, err)
	}
	if !d.cfg.OpenCluster {
		lines = slices.DeleteFunc(lines, func(l LogLine) bool { return l.Tenant != tenant })
	}
	return lines, nil
}

// Stacks returns the guest call stacks of the tenant's job's running
// tasks: with q.Duration zero one current stack of each, else a profile
// sampled at every q.Interval for q.Duration (Flink's thread dump and flame
// graph; control.Folded renders it for flame graph tools). A task whose
// guest ran no code meanwhile (waiting for input) has no samples.
//
// # Errors
//
// ErrJobNotFound; ErrInvalidArgument for a duration above
// control.MaxStackDuration or an interval below control.MinStackInterval;
// ErrUnavailable when a task is being sampled already or no TaskManager
// answered.
func (d *Dispatcher) Stacks(ctx context.Context, tenant, job string, q StackQuery) ([]TaskStack, error) {
	jm, err := d.job(tenant, job)
	if err != nil {
		return nil, err
	}
	if q.Duration < 0 || q.Duration > control.MaxStackDuration {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "sampling duration %v: must be between 0 (one stack) and %v", q.Duration, control.MaxStackDuration)
	}
	if q.Interval < 0 || (q.Interval > 0 && q.Interval < control.MinStackInterval) {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "sampling interval %v: must be at least %v", q.Interval, control.MinStackInterval)
	}
	obs, err := d.observer()
	if err != nil {
		return nil, err
	}
	// Only the TaskManagers running the job's subtasks now have stacks.
	on := map[string]bool{}
	for _, v := range jm.Details().Vertices {
		for _, s := range v.Subtasks {
			if s.TaskManager != "" {
				on[s.TaskManager] = true
			}
		}
	}
	var tms []resourcemanager.TaskManagerInfo
	for _, t := range d.cfg.Resources.Overview().TaskManagers {
		if on[t.ResourceID] {
			tms = append(tms, t)
		}
	}
	req := control.TaskStacksRequest{JobID: job, Tenant: tenant, Query: q}
	stacks, err := fanOut(ctx, d, tms, q.Duration+d.rpcTimeout(), func(ctx context.Context, addr string) ([]TaskStack, error) {
		return obs.SampleStacks(ctx, addr, req)
	})
	if err != nil {
		return nil, fmt.Errorf("stacks of job %s: %w", job, err)
	}
	slices.SortFunc(stacks, func(a, b TaskStack) int {
		return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(a.Subtask, b.Subtask), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.ExecutionID, b.ExecutionID))
	})
	return stacks, nil
}

// FlameNode is one frame of a flame graph (Flink's JobVertexFlameGraph
// node): its function, the samples that passed through it, and its
// callees.
type FlameNode struct {
	Name     string
	Value    int64
	Children []FlameNode
}

// FlameGraph merges the samples of stacks into one tree under a "root"
// node, callees sorted by name.
func FlameGraph(stacks []TaskStack) FlameNode {
	type node struct {
		value    int64
		children map[string]*node
	}
	root := &node{children: map[string]*node{}}
	for _, t := range stacks {
		for _, s := range t.Samples {
			n := root
			n.value += s.Count
			for _, f := range s.Frames {
				c, ok := n.children[f]
				if !ok {
					c = &node{children: map[string]*node{}}
					n.children[f] = c
				}
				c.value += s.Count
				n = c
			}
		}
	}
	var build func(name string, n *node) FlameNode
	build = func(name string, n *node) FlameNode {
		out := FlameNode{Name: name, Value: n.value}
		for _, k := range slices.Sorted(maps.Keys(n.children)) {
			out.Children = append(out.Children, build(k, n.children[k]))
		}
		return out
	}
	return build("root", root)
}
