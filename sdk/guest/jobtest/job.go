//go:build !wasip1

package jobtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/wasmhost"
)

// JobConfig is a whole-job run.
type JobConfig struct {
	// Args are the job's arguments (what follows `--` on the command line).
	Args []string
	// Parallelism is the job's default parallelism (0 means 1).
	Parallelism int
	// Inputs are the files of the job's text sources, by the path the plan
	// names (after --input); a path not here is read from disk, relative
	// to the test's working directory, as a glob pattern.
	Inputs map[string]string
	// BatchRecords is how many records go into one input batch and one
	// source poll (0 means 1024).
	BatchRecords int
	// ProcessingTimeStep, when positive, advances every task's processing
	// time by this many ms after each input batch (or poll) and fires the
	// timers due, so that timers fire in a job run; otherwise processing
	// time stays 0.
	ProcessingTimeStep int64
}

// Result is what a job run produced.
type Result struct {
	// Collected holds the values of the records that reached the job's
	// collect sinks, in the order the harness ran the tasks (subtask 0
	// first); the order of a real cluster is not defined, so sort to
	// compare across parallelisms.
	Collected []string
	// Files holds, per file sink path, the lines the file sink would
	// commit, in the same order.
	Files map[string][]string
	// Counters are the job's counters summed over its tasks.
	Counters map[string]int64
}

// RunJob runs the whole job over its bounded inputs to the end: a
// MiniCluster in the test process. It plans the job, chains it as the
// JobManager does (jobgraph.Chains), and runs every task, one subtask
// after another in topological order, routing each task's output to the
// next tasks by the edges' partitioners (forward, hash by key group,
// round-robin rebalance, broadcast), then ends each task's input and
// closes it. A text source's subtask i reads the input lines i, i+p,
// i+2p...; a guest source is polled until it ends.
//
// # Errors
//
// The plan's error, an invalid graph (jobgraph.Validate's message), a
// missing input, a keyless record on a hash edge, or the first task's
// failure (a *wasmhost.GuestError for the guest's).
func (m *Mode) RunJob(ctx context.Context, cfg JobConfig) (*Result, error) {
	g, err := m.Plan(ctx, cfg.Args)
	if err != nil {
		return nil, err
	}
	p := cfg.Parallelism
	if p == 0 {
		p = 1
	}
	if err := jobgraph.Validate(g, p, 0); err != nil {
		return nil, m.errorf("%w", err)
	}
	r := &run{mode: m, cfg: cfg, g: g, p: p, maxP: jobgraph.MaxParallelismOf(g),
		byID: map[int]*jobgraph.Vertex{}, outs: map[int][]jobgraph.Edge{},
		pending: map[int][][]abi.Record{}, text: map[int][][]byte{},
		res: &Result{Files: map[string][]string{}, Counters: map[string]int64{}}}
	if r.cfg.BatchRecords <= 0 {
		r.cfg.BatchRecords = 1024
	}
	for i := range g.Vertices {
		r.byID[g.Vertices[i].ID] = &g.Vertices[i]
	}
	for _, e := range g.Edges {
		r.outs[e.Source] = append(r.outs[e.Source], e)
	}
	for _, c := range jobgraph.Chains(g, p) {
		for s := 0; s < c.Parallelism; s++ {
			if err := r.task(ctx, c, s); err != nil {
				return nil, err
			}
		}
	}
	return r.res, nil
}

type run struct {
	mode    *Mode
	cfg     JobConfig
	g       *jobgraph.Graph
	p, maxP int
	byID    map[int]*jobgraph.Vertex
	outs    map[int][]jobgraph.Edge
	pending map[int][][]abi.Record // per chain head vertex: input records per subtask
	text    map[int][][]byte       // per text source vertex: its input lines
	res     *Result
}

// task runs subtask s of chain c to the end.
func (r *run) task(ctx context.Context, c jobgraph.Chain, s int) error {
	head := r.byID[c.Vertices[0]]
	tail := r.byID[c.Vertices[len(c.Vertices)-1]]
	var guestOps []jobgraph.Vertex
	for _, id := range c.Vertices {
		if v := r.byID[id]; v.Connector == "" {
			guestOps = append(guestOps, *v)
		}
	}
	var in []abi.Record
	if head.Connector == jobgraph.ConnectorText {
		lines, err := r.lines(head)
		if err != nil {
			return err
		}
		for i := s; i < len(lines); i += c.Parallelism {
			in = append(in, abi.Record{Value: lines[i]})
		}
	} else if ins := r.pending[head.ID]; ins != nil {
		in = ins[s]
	}
	if ins := r.pending[head.ID]; ins != nil {
		ins[s] = nil // handed over: free it with the task
	}
	out := &router{r: r, tail: tail, subtask: s}
	if len(guestOps) == 0 {
		return out.emit(in)
	}
	inst, err := r.mode.instantiate(ctx, wasmhost.TaskConfig{
		JobID: "jobtest", TaskName: fmt.Sprintf("%s (%d/%d)", head.Name, s+1, c.Parallelism),
		Chain: guestOps, Subtask: s, Parallelism: c.Parallelism, MaxParallelism: r.maxP,
		Args: r.cfg.Args, Emit: out.emit,
		// RunJob forwards no watermarks: a Go source's are dropped.
		EmitWatermark: func(int64) error { return nil },
	})
	if err != nil {
		return err
	}
	defer inst.Close(ctx)
	if err := inst.Open(ctx); err != nil {
		return err
	}
	now := int64(0)
	step := func() error {
		if r.cfg.ProcessingTimeStep <= 0 {
			return nil
		}
		now += r.cfg.ProcessingTimeStep
		return inst.FireTimers(ctx, now)
	}
	if head.Connector == "" && head.Kind == jobgraph.KindSource {
		for {
			done, err := inst.SourcePoll(ctx, r.cfg.BatchRecords)
			if err != nil {
				return err
			}
			if err := step(); err != nil {
				return err
			}
			if done {
				break
			}
		}
	} else {
		for len(in) > 0 {
			n := min(len(in), r.cfg.BatchRecords)
			if err := inst.Process(ctx, in[:n]); err != nil {
				return err
			}
			in = in[n:]
			if err := step(); err != nil {
				return err
			}
		}
	}
	if head.Kind != jobgraph.KindSource {
		// All inputs ended: event time is over, as when a TaskManager's
		// task gets END_OF_PARTITION on every channel.
		if err := inst.AdvanceWatermark(ctx, math.MaxInt64); err != nil {
			return err
		}
	}
	if err := inst.EndInput(ctx); err != nil {
		return err
	}
	for k, v := range inst.Counters() {
		r.res.Counters[k] += v
	}
	return inst.Close(ctx)
}

// router takes one subtask's output to where the chain's tail sends it:
// a host sink of the chain, or the inputs of the next chains.
type router struct {
	r       *run
	tail    *jobgraph.Vertex
	subtask int
	next    map[int]int // per out edge: the rebalance partitioner's next target
	copies  []abi.Record
}

func (o *router) emit(recs []abi.Record) error {
	r := o.r
	switch o.tail.Connector {
	case jobgraph.ConnectorCollect:
		for _, rec := range recs {
			r.res.Collected = append(r.res.Collected, string(rec.Value))
		}
		return nil
	case jobgraph.ConnectorFile:
		path := o.tail.SinkPath()
		for _, rec := range recs {
			r.res.Files[path] = append(r.res.Files[path], string(rec.Value))
		}
		return nil
	}
	recs = appendCopies(o.copies[:0], recs)
	o.copies = recs[:0]
	for i, e := range r.outs[o.tail.ID] {
		target := r.byID[e.Target]
		tp := jobgraph.ParallelismOf(target, r.p)
		ins := r.pending[e.Target]
		if ins == nil {
			ins = make([][]abi.Record, tp)
			r.pending[e.Target] = ins
		}
		for _, rec := range recs {
			switch e.Partitioner {
			case jobgraph.Forward:
				ins[o.subtask] = append(ins[o.subtask], rec)
			case jobgraph.Hash:
				if !rec.HasKey {
					return r.mode.errorf("%q -> %q: record has no key on a hash-partitioned output: put KeyBy before %q", o.tail.Name, target.Name, target.Name)
				}
				ts := keygroup.Subtask(keygroup.Of(rec.Key, r.maxP), tp, r.maxP)
				ins[ts] = append(ins[ts], rec)
			case jobgraph.Broadcast:
				for ts := range ins {
					ins[ts] = append(ins[ts], rec)
				}
			default: // rebalance: round robin, each producer starting at its own index
				if o.next == nil {
					o.next = map[int]int{}
				}
				ts, ok := o.next[i]
				if !ok {
					ts = o.subtask % tp
				}
				ins[ts] = append(ins[ts], rec)
				o.next[i] = (ts + 1) % tp
			}
		}
	}
	return nil
}

// lines returns the lines of a text source's inputs, each without its line
// ending, files in the order of the source's paths (a glob's matches
// sorted).
func (r *run) lines(v *jobgraph.Vertex) ([][]byte, error) {
	if lines, ok := r.text[v.ID]; ok {
		return lines, nil
	}
	paths, err := v.SourcePaths()
	if err != nil {
		return nil, r.mode.errorf("source %q: paths: %w", v.Name, err)
	}
	var out [][]byte
	for _, p := range paths {
		var contents []string
		if c, ok := r.cfg.Inputs[p]; ok {
			contents = append(contents, c)
		} else {
			matches, err := filepath.Glob(p)
			if err != nil {
				return nil, r.mode.errorf("source %q: input %q: %w", v.Name, p, err)
			}
			if len(matches) == 0 {
				return nil, r.mode.errorf("source %q: input %q: no such file; create it or give its contents in JobConfig.Inputs", v.Name, p)
			}
			sort.Strings(matches)
			for _, f := range matches {
				b, err := os.ReadFile(f)
				if err != nil {
					return nil, r.mode.errorf("source %q: %w", v.Name, err)
				}
				contents = append(contents, string(b))
			}
		}
		for _, c := range contents {
			sc := bufio.NewScanner(strings.NewReader(c))
			sc.Buffer(nil, 1<<30)
			for sc.Scan() {
				// Scanner drops "\n" and a "\r" before it, as the text
				// connector does.
				out = append(out, bytes.Clone(sc.Bytes()))
			}
		}
	}
	r.text[v.ID] = out
	return out, nil
}
