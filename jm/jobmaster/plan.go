package jobmaster

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// task is one chain of the job graph: it runs as Parallelism subtasks.
type task struct {
	index       int
	name        string // "source -> map -> sink"
	vertices    []jobgraph.Vertex
	parallelism int
	inputs      []taskEdge // edges into the chain head from other chains
	outputs     []taskEdge // edges out of the chain tail to other chains
}

// taskEdge is a graph edge between two chains.
type taskEdge struct {
	edge     jobgraph.Edge
	producer *task
	consumer *task
}

// resultID names the intermediate result an edge carries in one attempt of
// a job. The attempt is part of it, so channels of a canceled attempt never
// meet those of the next.
func resultID(jobID string, attempt int64, e jobgraph.Edge) string {
	return fmt.Sprintf("%s.a%d.e%d-%d", jobID, attempt, e.Source, e.Target)
}

// buildTasks expands g into tasks, one per chain (jobgraph.Chains), in
// topological order. g must be valid (jobgraph.Validate).
func buildTasks(g *jobgraph.Graph, defaultParallelism int) []*task {
	byID := make(map[int]jobgraph.Vertex, len(g.Vertices))
	for _, v := range g.Vertices {
		if v.Parallelism == 0 {
			v.Parallelism = defaultParallelism
		}
		byID[v.ID] = v
	}
	chains := jobgraph.Chains(g, defaultParallelism)
	tasks := make([]*task, len(chains))
	head := map[int]*task{}
	tail := map[int]*task{}
	inChain := map[[2]int]bool{}
	for i, c := range chains {
		t := &task{index: i, parallelism: c.Parallelism}
		names := make([]string, len(c.Vertices))
		for j, id := range c.Vertices {
			v := byID[id]
			t.vertices = append(t.vertices, v)
			names[j] = v.Name
			if j > 0 {
				inChain[[2]int{c.Vertices[j-1], id}] = true
			}
		}
		t.name = strings.Join(names, " -> ")
		head[c.Vertices[0]] = t
		tail[c.Vertices[len(c.Vertices)-1]] = t
		tasks[i] = t
	}
	for _, e := range g.Edges {
		if inChain[[2]int{e.Source, e.Target}] {
			continue
		}
		p, c := tail[e.Source], head[e.Target]
		if p == nil || c == nil {
			continue // Validate guarantees chains end and start at edges
		}
		te := taskEdge{edge: e, producer: p, consumer: c}
		p.outputs = append(p.outputs, te)
		c.inputs = append(c.inputs, te)
	}
	return tasks
}

// slotsNeeded is how many slots a job needs with slot sharing: subtask i of
// every task shares slot i, so the largest parallelism.
func slotsNeeded(tasks []*task) int {
	n := 0
	for _, t := range tasks {
		n = max(n, t.parallelism)
	}
	return n
}

// producersPerConsumer is how many producer subtasks feed one consumer
// subtask over e.
func producersPerConsumer(e taskEdge) int {
	if e.edge.Partitioner == jobgraph.Forward {
		return 1
	}
	return e.producer.parallelism
}

// textSource returns the source vertex at t's head that reads splits the
// JobMaster hands out (a text, nexmark or kafka connector), if any.
func (t *task) textSource() (jobgraph.Vertex, bool) {
	v := t.vertices[0]
	return v, v.Kind == jobgraph.KindSource && (v.Connector == jobgraph.ConnectorText || v.Connector == jobgraph.ConnectorNexmark || v.Connector == jobgraph.ConnectorKafkaSource)
}
