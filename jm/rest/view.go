package rest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// A job's vertices, as the API shows them, are its tasks: the chains of
// operators (jobgraph.Chains) that run as one guest instance per subtask,
// as Flink's job vertices are. A vertex's id is its head operator's id;
// its name the chained operators' names joined by " -> ". The Dispatcher's
// Details list every operator with its subtasks; those of one chain share
// their subtasks, and the head's stand for the chain.

// vertexView is one task of a job.
type vertexView struct {
	id          string
	name        string
	parallelism int
	operators   []jobgraph.Vertex
	subtasks    []jobmaster.SubtaskStatus
	inputs      []inputView
}

// inputView is an edge into a task from another.
type inputView struct {
	from        string // the producing task's id
	partitioner jobgraph.Partitioner
}

// jobView is one job as the routes show it.
type jobView struct {
	det      jobmaster.Details
	spec     dispatcher.JobSpec
	vertices []vertexView
}

// job loads the tenant's job named by the route's :job.
func (s *Server) job(ctx context.Context, r *request) (jobView, error) {
	id := r.param("job")
	det, err := s.cfg.Dispatcher.GetJob(ctx, r.tenant, id)
	if err != nil {
		return jobView{}, err
	}
	spec, err := s.cfg.Dispatcher.JobSpec(ctx, r.tenant, id)
	if err != nil {
		return jobView{}, err
	}
	return viewOf(det, spec), nil
}

func viewOf(det jobmaster.Details, spec dispatcher.JobSpec) jobView {
	v := jobView{det: det, spec: spec}
	g := spec.Graph
	if g == nil {
		return v
	}
	byID := map[int]jobgraph.Vertex{}
	for _, op := range g.Vertices {
		byID[op.ID] = op
	}
	status := map[int]jobmaster.VertexStatus{}
	for _, vs := range det.Vertices {
		status[vs.ID] = vs
	}
	chainOf := map[int]int{}
	chains := jobgraph.Chains(g, spec.DefaultParallelism)
	for i, c := range chains {
		vv := vertexView{id: strconv.Itoa(c.Vertices[0]), parallelism: c.Parallelism}
		names := make([]string, 0, len(c.Vertices))
		for _, id := range c.Vertices {
			chainOf[id] = i
			vv.operators = append(vv.operators, byID[id])
			names = append(names, byID[id].Name)
		}
		vv.name = strings.Join(names, " -> ")
		vv.subtasks = status[c.Vertices[0]].Subtasks
		v.vertices = append(v.vertices, vv)
	}
	for _, e := range g.Edges {
		pc, ok1 := chainOf[e.Source]
		cc, ok2 := chainOf[e.Target]
		if !ok1 || !ok2 || pc == cc {
			continue
		}
		v.vertices[cc].inputs = append(v.vertices[cc].inputs, inputView{from: v.vertices[pc].id, partitioner: e.Partitioner})
	}
	return v
}

// vertex finds the task named by the route's :vertex.
func (j jobView) vertex(id string) (vertexView, error) {
	for _, v := range j.vertices {
		if v.id == id {
			return v, nil
		}
	}
	return vertexView{}, rpcerr.Errorf(rpcerr.ErrNotFound, "vertex %q of job %s not found: GET /jobs/%s lists its vertices", id, j.det.JobID, j.det.JobID)
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// execStates are the execution states, Flink's names, in Flink's order.
var execStates = []string{"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED", "RECONCILING", "INITIALIZING"}

// taskCounts counts subtasks by state, every state present.
func taskCounts(subs []jobmaster.SubtaskStatus) map[string]int {
	out := make(map[string]int, len(execStates))
	for _, s := range execStates {
		out[s] = 0
	}
	for _, st := range subs {
		out[st.State]++
	}
	return out
}

// vertexStatus aggregates subtask states as Flink's ExecutionJobVertex does.
func vertexStatus(subs []jobmaster.SubtaskStatus) string {
	if len(subs) == 0 {
		return jobmaster.ExecCreated
	}
	n := taskCounts(subs)
	switch {
	case n[jobmaster.ExecFailed] > 0:
		return jobmaster.ExecFailed
	case n[jobmaster.ExecCanceling] > 0:
		return jobmaster.ExecCanceling
	case n[jobmaster.ExecCanceled] > 0 && n[jobmaster.ExecCanceled]+n[jobmaster.ExecFinished] == len(subs):
		return jobmaster.ExecCanceled
	case n[jobmaster.ExecFinished] == len(subs):
		return jobmaster.ExecFinished
	case n[jobmaster.ExecRunning] > 0:
		return jobmaster.ExecRunning
	case n[jobmaster.ExecDeploying] > 0:
		return jobmaster.ExecDeploying
	}
	return jobmaster.ExecCreated
}

// metricsBody is a task's figures (control.TaskMetrics) in Flink's names.
type metricsBody struct {
	ReadRecords              int64   `json:"read-records"`
	WriteRecords             int64   `json:"write-records"`
	ReadBytes                int64   `json:"read-bytes"`
	WriteBytes               int64   `json:"write-bytes"`
	BusyMsPerSecond          int64   `json:"busy-ms-per-second"`
	IdleMsPerSecond          int64   `json:"idle-ms-per-second"`
	BackpressuredMsPerSecond int64   `json:"backpressured-ms-per-second"`
	OutputBufferUsage        float64 `json:"output-buffer-usage"`
	MemoryPages              int64   `json:"memory-pages"`
	Fuel                     int64   `json:"fuel"`
	// Reported is when the newest report was measured (Unix ms); 0 before
	// the first.
	Reported int64 `json:"reported"`
}

func metricsOf(m control.TaskMetrics) metricsBody {
	return metricsBody{
		ReadRecords: m.RecordsIn, WriteRecords: m.RecordsOut, ReadBytes: m.BytesIn, WriteBytes: m.BytesOut,
		BusyMsPerSecond: m.BusyMsPerSecond, IdleMsPerSecond: m.IdleMsPerSecond, BackpressuredMsPerSecond: m.BackPressuredMsPerSecond,
		OutputBufferUsage: m.OutputBufferUsage, MemoryPages: m.MemoryPages, Fuel: m.Fuel, Reported: ms(m.Reported),
	}
}

// sumMetrics adds up a task's subtasks: counters summed, per-second figures
// and buffer usage the largest (the slowest subtask is the one that
// matters), the newest report time.
func sumMetrics(subs []jobmaster.SubtaskStatus) metricsBody {
	var out metricsBody
	for _, st := range subs {
		m := metricsOf(st.Metrics)
		out.ReadRecords += m.ReadRecords
		out.WriteRecords += m.WriteRecords
		out.ReadBytes += m.ReadBytes
		out.WriteBytes += m.WriteBytes
		out.MemoryPages += m.MemoryPages
		out.Fuel += m.Fuel
		out.BusyMsPerSecond = max(out.BusyMsPerSecond, m.BusyMsPerSecond)
		out.IdleMsPerSecond = max(out.IdleMsPerSecond, m.IdleMsPerSecond)
		out.BackpressuredMsPerSecond = max(out.BackpressuredMsPerSecond, m.BackpressuredMsPerSecond)
		out.OutputBufferUsage = max(out.OutputBufferUsage, m.OutputBufferUsage)
		out.Reported = max(out.Reported, m.Reported)
	}
	return out
}

// shipStrategy is Flink's name of a partitioner.
func shipStrategy(p jobgraph.Partitioner) string {
	switch p {
	case jobgraph.Hash:
		return "HASH"
	case jobgraph.Rebalance:
		return "REBALANCE"
	case jobgraph.Broadcast:
		return "BROADCAST"
	case jobgraph.Forward:
		return "FORWARD"
	}
	return strings.ToUpper(string(p))
}

// allSubtasks lists every task's subtasks, for job-wide counts.
func (j jobView) allSubtasks() []jobmaster.SubtaskStatus {
	var out []jobmaster.SubtaskStatus
	for _, v := range j.vertices {
		out = append(out, v.subtasks...)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(mapKeys(m))
}
