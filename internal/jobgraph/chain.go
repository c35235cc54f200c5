package jobgraph

// Chain is a run of operators that execute as one task: one guest instance
// per subtask, records handed from one operator to the next by function call
// with no exchange between them.
type Chain struct {
	Vertices    []int `json:"vertices"`    // vertex ids, head first
	Parallelism int   `json:"parallelism"` // of every vertex in the chain, defaults applied
}

// Chains groups g's vertices into tasks, as Flink's operator chaining does:
// an edge u->v joins u and v in one chain when it is a forward edge, u and v
// have equal parallelism (defaultParallelism applied), u has exactly one
// output and v exactly one input. Every vertex is in exactly one chain.
//
// The chains come in topological order of their heads (ties broken by the
// order of g.Vertices), so every chain comes after the chains that feed it.
//
// # Notes
//
// Call Validate first: on a graph with a cycle the vertices on it are placed
// in declaration order after the rest.
func Chains(g *Graph, defaultParallelism int) []Chain {
	byID := make(map[int]*Vertex, len(g.Vertices))
	for i := range g.Vertices {
		byID[g.Vertices[i].ID] = &g.Vertices[i]
	}
	outs := make(map[int][]Edge)
	ins := make(map[int][]Edge)
	for _, e := range g.Edges {
		if byID[e.Source] == nil || byID[e.Target] == nil {
			continue
		}
		outs[e.Source] = append(outs[e.Source], e)
		ins[e.Target] = append(ins[e.Target], e)
	}
	// chainedNext[u] = v when the edge u->v is inside a chain.
	chainedNext := make(map[int]int)
	chainedPrev := make(map[int]bool)
	for id, es := range outs {
		if len(es) != 1 {
			continue
		}
		e := es[0]
		if e.Partitioner != Forward || len(ins[e.Target]) != 1 {
			continue
		}
		if ParallelismOf(byID[id], defaultParallelism) != ParallelismOf(byID[e.Target], defaultParallelism) {
			continue
		}
		chainedNext[id] = e.Target
		chainedPrev[e.Target] = true
	}

	var chains []Chain
	placed := make(map[int]bool, len(g.Vertices))
	emit := func(head int) {
		c := Chain{Parallelism: ParallelismOf(byID[head], defaultParallelism)}
		for id, ok := head, true; ok && !placed[id]; id, ok = chainedNext[id] {
			placed[id] = true
			c.Vertices = append(c.Vertices, id)
		}
		chains = append(chains, c)
	}
	for _, id := range TopoOrder(g) {
		if !chainedPrev[id] && !placed[id] {
			emit(id)
		}
	}
	// Vertices on a cycle (an invalid graph) or on a chain loop.
	for _, v := range g.Vertices {
		if !placed[v.ID] {
			emit(v.ID)
		}
	}
	return chains
}

// TopoOrder returns the ids of g's vertices so that every edge's source comes
// before its target; among vertices whose inputs are all placed, declaration
// order wins, so the result is deterministic. Vertices on a cycle are left
// out; edges naming unknown vertices are ignored.
func TopoOrder(g *Graph) []int {
	known := make(map[int]bool, len(g.Vertices))
	for _, v := range g.Vertices {
		known[v.ID] = true
	}
	indeg := make(map[int]int, len(g.Vertices))
	adj := make(map[int][]int)
	for _, e := range g.Edges {
		if !known[e.Source] || !known[e.Target] {
			continue
		}
		adj[e.Source] = append(adj[e.Source], e.Target)
		indeg[e.Target]++
	}
	order := make([]int, 0, len(g.Vertices))
	done := make(map[int]bool, len(g.Vertices))
	// Quadratic in the worst case, which is fine for graphs of tens of vertices
	// and keeps the tie-break by declaration order simple.
	for progress := true; progress; {
		progress = false
		for _, v := range g.Vertices {
			if done[v.ID] || indeg[v.ID] > 0 {
				continue
			}
			done[v.ID] = true
			order = append(order, v.ID)
			for _, n := range adj[v.ID] {
				indeg[n]--
			}
			progress = true
			break
		}
	}
	return order
}
