package guest

import "github.com/sluicehq/sluice/internal/jobgraph"

// Union adds an operator that passes on the records of s and of every
// stream in others, as Flink's DataStream.union: one vertex with an input
// edge from each stream, so the task reads one input gate per stream. The
// streams must carry records of one kind (the SDK does not check what the
// bytes mean) and come from one Env; a stream may appear only once.
//
// Each edge keeps its stream's partitioner (Rebalance, Broadcast, ...;
// forward when the parallelisms match, else rebalance).
func (s *Stream) Union(name string, others ...*Stream) *Stream {
	e := s.env
	if len(others) == 0 {
		e.fail("union %q: no other stream: pass at least one stream to unite with", name)
	}
	seen := map[*op]bool{s.op: true}
	for i, o := range others {
		switch {
		case o == nil:
			e.fail("union %q: stream %d is nil", name, i+1)
			return s
		case o.env != e:
			e.fail("union %q: stream %d (%q) comes from another Env: unite only streams of one job", name, i+1, o.op.name)
			return s
		case o.op.kind == jobgraph.KindSink:
			e.fail("union %q reads sink %q: a sink has no output", name, o.op.name)
			return s
		case seen[o.op]:
			e.fail("union %q: stream %q is passed twice: unite each stream once", name, o.op.name)
			return s
		}
		seen[o.op] = true
	}
	u := s.then(name, jobgraph.KindMap, false)
	u.mapFn = func(r Record) Record { return r }
	for _, o := range others {
		o.op.hasOutput = true
		e.edges = append(e.edges, &edge{src: o.op, dst: u, part: o.part})
	}
	return &Stream{env: e, op: u}
}
