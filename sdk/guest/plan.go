package guest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// op is one declared operator: its vertex in the graph and the Go functions
// that implement it.
type op struct {
	id          int
	name        string
	kind        jobgraph.Kind
	parallelism int
	connector   string
	config      map[string]string
	hasOutput   bool

	mapFn   MapFunc
	flatMap FlatMapFunc
	filter  FilterFunc
	keyFn   KeyFunc
	// joinSide, on a KeyBy, is 1 + the side byte it puts in front of each
	// record's value (join.go); 0 for a plain KeyBy.
	joinSide int16
	reduce   ReduceFunc
	final    bool
	result   func(dst, acc []byte) []byte
	process  ProcessFunc
	timer    TimerFunc
	// eventTimer runs for event-time timers (OnEventTimer).
	eventTimer TimerFunc
	source     SourceFunc
	// window is a window operator's (a Process vertex) state and timers.
	window *windowOp
	// interval is an interval join's (a Process vertex with two inputs).
	interval *intervalJoin
	sink     SinkFunc

	onOpen    func(ctx *Context)
	onBarrier func(ctx *Context, checkpointID int64)
	onClose   func(ctx *Context)
}

type edge struct {
	src, dst *op
	part     jobgraph.Partitioner
}

func (e *Env) add(name string, kind jobgraph.Kind, nilFn bool) *op {
	o := &op{id: len(e.ops) + 1, name: name, kind: kind}
	if name == "" {
		e.fail("%s operator %d has no name: every operator needs one", kind, o.id)
	}
	if nilFn {
		e.fail("%s %q: nil function", kind, name)
	}
	e.ops = append(e.ops, o)
	return o
}

// then adds an operator that reads s.
func (s *Stream) then(name string, kind jobgraph.Kind, nilFn bool) *op {
	e := s.env
	if s.op.kind == jobgraph.KindSink {
		e.fail("%s %q reads sink %q: a sink has no output", kind, name, s.op.name)
	}
	o := e.add(name, kind, nilFn)
	part := s.part
	if jobgraph.Keyed(kind) && part != jobgraph.Hash {
		e.fail("%s %q must follow KeyBy", kind, name)
	}
	s.op.hasOutput = true
	e.edges = append(e.edges, &edge{src: s.op, dst: o, part: part})
	return o
}

func (o *op) setParallelism(e *Env, n int) {
	if n < 1 {
		e.fail("SetParallelism(%d) on %q: must be at least 1", n, o.name)
		return
	}
	o.parallelism = n
}

// declare runs the registered plan function with args and returns what it
// declared.
func declare(args []string) (*Env, error) {
	if registered == nil {
		return nil, errors.New("no job declared: call guest.Job from an init function of package main")
	}
	e := &Env{args: args}
	registered(e)
	e.finishWindows()
	if e.err != nil {
		return nil, fmt.Errorf("plan: %w", e.err)
	}
	if len(e.ops) == 0 {
		return nil, errors.New("plan: the job declares no operators")
	}
	return e, nil
}

// graph returns the job graph e declares.
func (e *Env) graph() *jobgraph.Graph {
	g := &jobgraph.Graph{Name: e.name, MaxParallelism: e.maxP, Vertices: []jobgraph.Vertex{}, Edges: []jobgraph.Edge{}}
	// A KeyBy only computes keys: it runs at its input's parallelism unless
	// set, so it chains to its input (as Flink applies the key selector in
	// the producer). Otherwise a rebalance would feed it and the records of
	// one key would reach the keyed operator through several channels, out
	// of order.
	for _, ed := range e.edges {
		if ed.dst.kind == jobgraph.KindKeyBy && ed.dst.parallelism == 0 {
			ed.dst.parallelism = ed.src.parallelism
		}
	}
	for _, o := range e.ops {
		if g.Name == "" && o.kind == jobgraph.KindSource {
			g.Name = o.name
		}
		g.Vertices = append(g.Vertices, jobgraph.Vertex{
			ID: o.id, Name: o.name, Kind: o.kind, Parallelism: o.parallelism,
			Connector: o.connector, Config: o.config,
		})
	}
	for _, ed := range e.edges {
		p := ed.part
		if p == "" {
			// Parallelism 0 means the job default, so equal fields mean
			// equal parallelism once the cluster picks the default.
			p = jobgraph.Forward
			if ed.src.parallelism != ed.dst.parallelism {
				p = jobgraph.Rebalance
			}
		}
		g.Edges = append(g.Edges, jobgraph.Edge{Source: ed.src.id, Target: ed.dst.id, Partitioner: p})
	}
	return g
}

func jsonStrings(s []string) string {
	if s == nil {
		s = []string{}
	}
	b, _ := json.Marshal(s)
	return string(b)
}
