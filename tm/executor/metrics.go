package executor

import (
	"errors"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/tm/task"
	"github.com/sluicehq/sluice/wasmhost"
)

// An ended task's final figures are kept for the next endedScrapes calls
// of TaskStats (two: a scrape that fails on its way to Prometheus does
// not lose them), up to maxEndedStats of them, so a TaskManager nobody
// scrapes keeps no more.
const (
	endedScrapes  = 2
	maxEndedStats = 256
)

type endedStat struct {
	st   TaskStat
	left int // TaskStats calls that still return it
}

// TaskStat is one task's figures with what labels them.
type TaskStat struct {
	ExecutionID string
	JobID       string
	JobName     string
	Tenant      string
	// Task is the chain's operator names joined by " -> "; Operators are
	// the names, head first.
	Task      string
	Operators []string
	// SourceHead: the chain's head is a host source (text, nexmark, kafka),
	// whose records out are the task's records in; SinkTail: its tail is a
	// host sink, whose records in are the task's records out.
	SourceHead, SinkTail bool
	Subtask              int
	// Ended: the task stopped; these are its final figures.
	Ended   bool
	Metrics control.TaskMetrics
}

// GuestFailures counts the guest traps and call-deadline hits of one
// tenant's tasks since the TaskManager started.
type GuestFailures struct {
	Traps, Deadlines int64
	// FuelLimits are tasks whose guest call used its fuel limit.
	FuelLimits int64
}

// taskMeter is what the executor keeps of a running task's metrics.
// Guarded by Executor.mu.
type taskMeter struct {
	m *task.Metrics
	// prev is the sample of the last heartbeat, rates the per-second
	// figures over the window it closed.
	prev  task.Sample
	rates rates
}

type rates struct{ busy, idle, bp int64 }

// ratesBetween returns Flink's ms-per-second gauges over the window from a
// to b.
func ratesBetween(a, b task.Sample) rates {
	d := b.Elapsed - a.Elapsed
	if d <= 0 {
		return rates{}
	}
	per := func(x time.Duration) int64 { return min(max(int64(x*1000/d), 0), 1000) }
	r := rates{idle: per(b.Idle - a.Idle), bp: per(b.BackPressured - a.BackPressured)}
	r.busy = max(1000-r.idle-r.bp, 0)
	return r
}

func controlMetrics(s task.Sample, r rates) control.TaskMetrics {
	return control.TaskMetrics{
		RecordsIn: s.RecordsIn, RecordsOut: s.RecordsOut, BytesIn: s.BytesIn, BytesOut: s.BytesOut,
		BusyMsPerSecond: r.busy, IdleMsPerSecond: r.idle, BackPressuredMsPerSecond: r.bp,
		OutputBufferUsage: s.OutputBufferUsage, MemoryPages: s.MemoryPages, Fuel: s.Fuel,
		Reported:          s.At,
		AccumulatedBusyMs: s.Busy().Milliseconds(), AccumulatedIdleMs: s.Idle.Milliseconds(),
		AccumulatedBackPressuredMs: s.BackPressured.Milliseconds(),
		LastAlignmentMs:            s.LastAlignment.Milliseconds(),
	}
}

// HeartbeatMetrics returns the figures of every running task for the
// heartbeat, and starts the next rate window: the per-second figures cover
// the time since the previous call. Nil with metrics off or no task.
func (e *Executor) HeartbeatMetrics() []control.ExecutionMetrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.tasks) == 0 || e.cfg.DisableMetrics {
		return nil
	}
	out := make([]control.ExecutionMetrics, 0, len(e.tasks))
	for id, t := range e.tasks {
		if t.meter == nil {
			continue
		}
		s := t.meter.m.Sample()
		t.meter.rates = ratesBetween(t.meter.prev, s)
		t.meter.prev = s
		out = append(out, control.ExecutionMetrics{ExecutionID: id, JobID: t.d.JobID, Metrics: controlMetrics(s, t.meter.rates)})
	}
	return out
}

// TaskStats returns the figures of every running task (the per-second ones
// of the last heartbeat window) and the final figures of the tasks that
// ended lately: each is returned by the next two calls, then forgotten, so
// a scrape sees an ended task's last figures before its series go. Empty
// with metrics off.
func (e *Executor) TaskStats() []TaskStat {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]TaskStat, 0, len(e.tasks)+len(e.endedStats))
	ended := make(map[string]bool, len(e.endedStats))
	for _, es := range e.endedStats {
		ended[es.st.ExecutionID] = true
	}
	for id, t := range e.tasks {
		// A task that just ended is still in the table until its final
		// report goes out: its final figures stand for it.
		if t.meter != nil && !ended[id] {
			out = append(out, taskStat(t.d, controlMetrics(t.meter.m.Sample(), t.meter.rates), false))
		}
	}
	kept := e.endedStats[:0]
	for _, es := range e.endedStats {
		out = append(out, es.st)
		if es.left--; es.left > 0 {
			kept = append(kept, es)
		}
	}
	clear(e.endedStats[len(kept):])
	e.endedStats = kept
	return out
}

func taskStat(d control.Deployment, m control.TaskMetrics, ended bool) TaskStat {
	ops := make([]string, len(d.Chain))
	for i, v := range d.Chain {
		ops[i] = v.Name
	}
	st := TaskStat{
		ExecutionID: d.ExecutionID, JobID: d.JobID, JobName: d.JobName, Tenant: d.Tenant,
		Task: strings.Join(ops, " -> "), Operators: ops, Subtask: d.Subtask, Ended: ended, Metrics: m,
	}
	if n := len(d.Chain); n > 0 {
		st.SourceHead = d.Chain[0].Connector == jobgraph.ConnectorText || d.Chain[0].Connector == jobgraph.ConnectorNexmark || d.Chain[0].Connector == jobgraph.ConnectorKafkaSource
		switch d.Chain[n-1].Connector {
		case jobgraph.ConnectorCollect, jobgraph.ConnectorFile, jobgraph.ConnectorBlackhole:
			st.SinkTail = true
		}
	}
	return st
}

// GuestFailures returns the traps and deadline hits by tenant.
func (e *Executor) GuestFailures() map[string]GuestFailures {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]GuestFailures, len(e.guestFailures))
	for k, v := range e.guestFailures {
		out[k] = v
	}
	return out
}

// TenantFuel returns the fuel each tenant's guests spent on this
// TaskManager since it started, over every task (ended ones too); nil
// without a runtime.
func (e *Executor) TenantFuel() map[string]int64 {
	if e.cfg.Runtime == nil {
		return nil
	}
	return e.cfg.Runtime.TenantFuel()
}

// finalMetrics closes t's figures when it stopped: the per-second ones
// cover its whole run. It keeps them for the next TaskStats and counts a
// guest's trap or deadline hit. Nil with metrics off.
func (e *Executor) finalMetrics(t *runningTask, err error) *control.TaskMetrics {
	var ge *wasmhost.GuestError
	failed := errors.As(err, &ge)
	e.mu.Lock()
	defer e.mu.Unlock()
	if failed {
		f := e.guestFailures[t.d.Tenant]
		switch {
		case errors.Is(ge.Cause, wasmhost.ErrDeadline):
			f.Deadlines++
		case errors.Is(ge.Cause, wasmhost.ErrFuelLimit):
			f.FuelLimits++
		case !errors.Is(ge.Cause, wasmhost.ErrGuestFailed):
			f.Traps++
		}
		e.guestFailures[t.d.Tenant] = f
	}
	if t.meter == nil {
		return nil
	}
	s := t.meter.m.Sample()
	m := controlMetrics(s, ratesBetween(task.Sample{}, s))
	if len(e.endedStats) >= maxEndedStats {
		e.endedStats = e.endedStats[1:]
	}
	e.endedStats = append(e.endedStats, endedStat{st: taskStat(t.d, m, true), left: endedScrapes})
	return &m
}
