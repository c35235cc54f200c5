//go:build !wasip1

package jobtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/wasmhost"
)

// TaskConfig says which task of a job a Task runs.
type TaskConfig struct {
	// Args are the job's arguments, for its plan and the task info.
	Args []string
	// Operators names the chain of guest operators the task runs, head
	// first; each must read the one before it. Records given to Process
	// go into the head; what the last emits is the Task's output.
	Operators []string
	// Subtask of Parallelism (0 of 1 when both are 0): which key groups
	// the task holds.
	Subtask, Parallelism int
	// Restore holds snapshots (from Task.Barrier) to build the task's
	// state from, taken at this parallelism or any other: the task gets
	// the keyed state and timers of its key groups from each, and the
	// operator state of the old subtasks whose first key group it holds.
	Restore [][]byte
	// Limits bound the task as a TaskManager's do (zero: the defaults).
	Limits wasmhost.Limits
}

// Task runs one task of a job, a chain of its operators, over records the
// test gives it: Flink's operator test harness. Records, barriers, end of
// input and processing time go in; output, counters, snapshots and state
// come out. A Task is not safe for concurrent use.
type Task struct {
	mode   *Mode
	ctx    context.Context
	graph  *jobgraph.Graph
	chain  []jobgraph.Vertex
	ids    map[string]int
	inst   instance
	out    []Record
	now    int64
	wms    []int64 // what a guest source gave watermark_emit
	closed bool
}

// Open plans the job and starts the task cfg names; call Close when done
// (a native task must be closed before the next opens).
//
// # Errors
//
// The plan's error; an error naming the operators when cfg.Operators is
// not a chain of the job's guest operators; an error restoring a snapshot
// taken with another max parallelism; or the guest's failure in its open
// hooks.
func (m *Mode) Open(ctx context.Context, cfg TaskConfig) (*Task, error) {
	g, err := m.Plan(ctx, cfg.Args)
	if err != nil {
		return nil, err
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 1
	}
	ids := make(map[string]int, len(g.Vertices))
	byID := make(map[int]jobgraph.Vertex, len(g.Vertices))
	for _, v := range g.Vertices {
		ids[v.Name] = v.ID
		byID[v.ID] = v
	}
	edges := make(map[[2]int]bool, len(g.Edges))
	for _, e := range g.Edges {
		edges[[2]int{e.Source, e.Target}] = true
	}
	if len(cfg.Operators) == 0 {
		return nil, m.errorf("open: no operators: name the chain's operators in TaskConfig.Operators (the job has %s)", names(g))
	}
	var chain []jobgraph.Vertex
	for i, name := range cfg.Operators {
		id, ok := ids[name]
		if !ok {
			return nil, m.errorf("open: the job has no operator %q (it has %s)", name, names(g))
		}
		v := byID[id]
		if v.Connector != "" {
			return nil, m.errorf("open: %q is the host's %q connector, not guest code; name guest operators only", name, v.Connector)
		}
		if i > 0 && !edges[[2]int{chain[i-1].ID, id}] {
			return nil, m.errorf("open: %q does not read %q: a chain's operators must follow one another", name, chain[i-1].Name)
		}
		chain = append(chain, v)
	}
	maxP := jobgraph.MaxParallelismOf(g)
	if cfg.Parallelism > maxP || cfg.Subtask < 0 || cfg.Subtask >= cfg.Parallelism {
		return nil, m.errorf("open: subtask %d of parallelism %d with %d key groups", cfg.Subtask, cfg.Parallelism, maxP)
	}
	var st *wasmhost.State
	if len(cfg.Restore) > 0 {
		start, end := keygroup.Range(cfg.Subtask, cfg.Parallelism, maxP)
		st = wasmhost.NewState(maxP, start, end)
		for i, snap := range cfg.Restore {
			if err := st.Restore(bytes.NewReader(snap)); err != nil {
				return nil, m.errorf("open: restore snapshot %d: %w", i, err)
			}
		}
	}
	t := &Task{mode: m, ctx: ctx, graph: g, chain: chain, ids: ids}
	inst, err := m.instantiate(ctx, wasmhost.TaskConfig{
		JobID:    "jobtest",
		TaskName: fmt.Sprintf("%s (%d/%d)", strings.Join(cfg.Operators, " -> "), cfg.Subtask+1, cfg.Parallelism),
		Chain:    chain, Subtask: cfg.Subtask, Parallelism: cfg.Parallelism, MaxParallelism: maxP,
		Args: cfg.Args, Limits: cfg.Limits, State: st,
		Emit: t.emit,
		// A guest source's watermarks are kept for EmittedWatermarks.
		EmitWatermark: t.emitWatermark(chain),
	})
	if err != nil {
		return nil, err
	}
	t.inst = inst
	if err := inst.Open(ctx); err != nil {
		inst.Close(ctx)
		return nil, err
	}
	return t, nil
}

func names(g *jobgraph.Graph) string {
	var s []string
	for _, v := range g.Vertices {
		s = append(s, fmt.Sprintf("%q", v.Name))
	}
	return strings.Join(s, ", ")
}

// emit keeps copies of the records the chain emits: the instance's alias
// guest memory.
func (t *Task) emit(recs []abi.Record) error {
	t.out = appendCopies(t.out, recs)
	return nil
}

func appendCopies(dst, recs []abi.Record) []abi.Record {
	// One allocation for the batch's bytes, not two per record.
	n := 0
	for i := range recs {
		n += len(recs[i].Key) + len(recs[i].Value)
	}
	arena := make([]byte, 0, n)
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(arena)
		arena = append(arena, b...)
		return arena[start:len(arena):len(arena)]
	}
	for _, r := range recs {
		r.Key, r.Value = clone(r.Key), clone(r.Value)
		dst = append(dst, r)
	}
	return dst
}

// Graph returns the job graph the job's plan declared.
func (t *Task) Graph() *jobgraph.Graph { return t.graph }

// Process hands recs to the chain's head as one input batch (one
// sluice_process call); the output lands in Output.
//
// # Errors
//
// The guest's failure (a *wasmhost.GuestError: a panic in user code is
// wasmhost.ErrGuestFailed, a misuse of the ABI such as a key outside the
// task's key groups wasmhost.ErrTrap); the task is unusable afterwards.
func (t *Task) Process(recs ...Record) error { return t.inst.Process(t.ctx, recs) }

// ProcessValues is Process of records with the given values and no keys.
func (t *Task) ProcessValues(values ...string) error {
	recs := make([]Record, len(values))
	for i, v := range values {
		recs[i].Value = []byte(v)
	}
	return t.Process(recs...)
}

// ProcessKeyed is Process of records with keys and values taken in pairs
// from keyValues (key, value, key, value...), as a keyed operator receives
// them after a hash edge.
func (t *Task) ProcessKeyed(keyValues ...string) error {
	if len(keyValues)%2 != 0 {
		return t.mode.errorf("ProcessKeyed: %d strings, want key, value pairs", len(keyValues))
	}
	recs := make([]Record, len(keyValues)/2)
	for i := range recs {
		recs[i] = Record{Key: []byte(keyValues[2*i]), HasKey: true, Value: []byte(keyValues[2*i+1])}
	}
	return t.Process(recs...)
}

// Poll asks a guest source at the chain's head for up to max records (one
// sluice_source_poll call) and reports whether the source has ended.
//
// # Errors
//
// As Process.
func (t *Task) Poll(max int) (done bool, err error) { return t.inst.SourcePoll(t.ctx, max) }

// Barrier runs the operators' barrier hooks for checkpoint id and returns
// the snapshot of the task's state the host takes then, to give to
// TaskConfig.Restore. Output emitted by the hooks comes before it.
//
// # Errors
//
// As Process.
func (t *Task) Barrier(id int64) ([]byte, error) {
	if err := t.inst.Barrier(t.ctx, id); err != nil {
		return nil, err
	}
	f := t.inst.State().Freeze()
	defer f.Release()
	return f.AppendTo(nil), nil
}

// SetProcessingTime moves the task's processing time to ms (it never goes
// back) and fires, in one sluice_timers call, every timer due by then.
//
// # Errors
//
// As Process.
func (t *Task) SetProcessingTime(ms int64) error {
	if ms > t.now {
		t.now = ms
	}
	return t.inst.FireTimers(t.ctx, t.now)
}

// AdvanceProcessingTime is SetProcessingTime(ProcessingTime() + ms).
func (t *Task) AdvanceProcessingTime(ms int64) error { return t.SetProcessingTime(t.now + ms) }

// ProcessingTime returns the task's processing time, what the guest's
// now_ms returns (0 until set).
func (t *Task) ProcessingTime() int64 { return t.now }

// NextTimer returns the time of the earliest registered timer.
func (t *Task) NextTimer() (ms int64, ok bool) { return t.inst.NextTimer() }

// SetWatermark advances the task's event time to ms, as an input
// watermark does on a TaskManager: the event-time timers at or below ms
// fire, earliest first (their output is in Output), then the watermark
// hook runs. A lower ms than before does nothing.
//
// # Errors
//
// As Process.
func (t *Task) SetWatermark(ms int64) error { return t.inst.AdvanceWatermark(t.ctx, ms) }

// Watermark returns the task's event time, what the guest's watermark_ms
// returns: math.MinInt64 until set.
func (t *Task) Watermark() int64 { return t.inst.Watermark() }

// NextEventTimer returns the time of the earliest registered event-time
// timer.
func (t *Task) NextEventTimer() (ms int64, ok bool) { return t.inst.NextEventTimer() }

// EmittedWatermarks returns the watermarks a Go source with the "guest"
// strategy emitted so far, in order.
func (t *Task) EmittedWatermarks() []int64 { return t.wms }

func (t *Task) emitWatermark(chain []jobgraph.Vertex) func(int64) error {
	if w, err := chain[0].Watermarks(); err != nil || w.Kind != jobgraph.WatermarkGuest || chain[0].Kind != jobgraph.KindSource {
		return nil
	}
	return func(ts int64) error {
		t.wms = append(t.wms, ts)
		return nil
	}
}

// EndInput tells the chain its input has ended; operators that hold
// results until then (a Reduce with EmitFinal) emit them.
//
// # Errors
//
// As Process.
func (t *Task) EndInput() error { return t.inst.EndInput(t.ctx) }

// Output returns every record the chain emitted since the task opened (or
// since the last TakeOutput), in order.
func (t *Task) Output() []Record { return t.out }

// TakeOutput returns Output and empties it.
func (t *Task) TakeOutput() []Record {
	out := t.out
	t.out = nil
	return out
}

// OutputValues returns the values of Output as strings.
func (t *Task) OutputValues() []string { return Values(t.out) }

// Values returns the values of recs as strings.
func Values(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// Counters returns the counters the chain added to so far.
func (t *Task) Counters() map[string]int64 { return t.inst.Counters() }

// KeyedState returns operator op's keyed state name of key as the host
// holds it. A Reduce keeps its accumulators in guest memory between
// barriers: its keyed state is current after Barrier.
//
// # Errors
//
// An error for an unknown operator, or a key outside the task's key groups.
func (t *Task) KeyedState(op, name string, key []byte) ([]byte, bool, error) {
	id, ok := t.ids[op]
	if !ok {
		return nil, false, t.mode.errorf("keyed state: the job has no operator %q", op)
	}
	v, ok, err := t.inst.State().Get(id, name, key)
	return bytes.Clone(v), ok, err
}

// OperatorState returns operator op's operator state name, if it exists.
func (t *Task) OperatorState(op, name string) ([]byte, bool) {
	v, ok := t.inst.State().OperatorState(t.ids[op], name)
	return bytes.Clone(v), ok
}

// Owns reports whether key is in one of the task's key groups: whether a
// hash edge would route it to this subtask.
func (t *Task) Owns(key []byte) bool {
	maxP, start, end := t.inst.State().KeyGroups()
	kg := keygroup.Of(key, maxP)
	return kg >= start && kg <= end
}

// Close runs the operators' close hooks (unless the task failed) and
// frees the task. It is safe to call more than once.
//
// # Errors
//
// The guest's failure in its close hooks.
func (t *Task) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	return t.inst.Close(t.ctx)
}
