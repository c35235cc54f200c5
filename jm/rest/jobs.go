package rest

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// getJobs is GET /jobs: the tenant's jobs, oldest first.
func (s *Server) getJobs(ctx context.Context, r *request) (int, any, error) {
	type job struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	out := struct {
		Jobs []job `json:"jobs"`
	}{Jobs: []job{}}
	for _, d := range s.cfg.Dispatcher.ListJobs(ctx, r.tenant) {
		out.Jobs = append(out.Jobs, job{ID: d.JobID, Status: string(d.State)})
	}
	return http.StatusOK, out, nil
}

type jobSummaryBody struct {
	JID              string         `json:"jid"`
	Name             string         `json:"name"`
	State            string         `json:"state"`
	StartTime        int64          `json:"start-time"`
	EndTime          int64          `json:"end-time"`
	Duration         int64          `json:"duration"`
	LastModification int64          `json:"last-modification"`
	Tasks            map[string]int `json:"tasks"`
}

// summaryOf is a job's line in /jobs/overview.
func (s *Server) summaryOf(j jobView) jobSummaryBody {
	d := j.det
	b := jobSummaryBody{
		JID: d.JobID, Name: d.Name, State: string(d.State),
		StartTime: ms(d.Start), EndTime: -1, Duration: s.duration(d),
	}
	if !d.End.IsZero() {
		b.EndTime = ms(d.End)
	}
	for _, t := range d.StateTimes {
		b.LastModification = max(b.LastModification, ms(t))
	}
	counts := taskCounts(j.allSubtasks())
	total := 0
	b.Tasks = map[string]int{}
	for st, n := range counts {
		b.Tasks[strings.ToLower(st)] = n
		total += n
	}
	b.Tasks["total"] = total
	return b
}

func (s *Server) duration(d jobmaster.Details) int64 {
	switch {
	case d.Start.IsZero():
		return 0
	case d.End.IsZero():
		return s.cfg.Now().Sub(d.Start).Milliseconds()
	}
	return d.End.Sub(d.Start).Milliseconds()
}

// getJobsOverview is GET /jobs/overview.
func (s *Server) getJobsOverview(ctx context.Context, r *request) (int, any, error) {
	out := struct {
		Jobs []jobSummaryBody `json:"jobs"`
	}{Jobs: []jobSummaryBody{}}
	for _, d := range s.cfg.Dispatcher.ListJobs(ctx, r.tenant) {
		spec, err := s.cfg.Dispatcher.JobSpec(ctx, r.tenant, d.JobID)
		if err != nil {
			continue // expired since the listing
		}
		out.Jobs = append(out.Jobs, s.summaryOf(viewOf(d, spec)))
	}
	return http.StatusOK, out, nil
}

type vertexBody struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Parallelism int            `json:"parallelism"`
	Status      string         `json:"status"`
	StartTime   int64          `json:"start-time"`
	EndTime     int64          `json:"end-time"`
	Duration    int64          `json:"duration"`
	Tasks       map[string]int `json:"tasks"`
	Metrics     metricsBody    `json:"metrics"`
	Operators   []operatorBody `json:"operators"`
}

type operatorBody struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Connector string `json:"connector,omitempty"`
}

type jobBody struct {
	JID            string           `json:"jid"`
	Name           string           `json:"name"`
	State          string           `json:"state"`
	IsStoppable    bool             `json:"isStoppable"`
	StartTime      int64            `json:"start-time"`
	EndTime        int64            `json:"end-time"`
	Duration       int64            `json:"duration"`
	MaxParallelism int              `json:"maxParallelism"`
	Now            int64            `json:"now"`
	Timestamps     map[string]int64 `json:"timestamps"`
	Vertices       []vertexBody     `json:"vertices"`
	StatusCounts   map[string]int   `json:"status-counts"`
	Plan           planBody         `json:"plan"`
	ModuleDigest   string           `json:"module-digest"`
	Restarts       int              `json:"restarts"`
	Failure        string           `json:"failure,omitempty"`
}

// jobStates are the job states, for "timestamps".
var jobStates = []jobmaster.JobState{jobmaster.Created, jobmaster.Running, jobmaster.Failing, jobmaster.Restarting, jobmaster.Cancelling, jobmaster.Canceled, jobmaster.Finished, jobmaster.Failed, jobmaster.Suspended}

// getJob is GET /jobs/:job.
func (s *Server) getJob(ctx context.Context, r *request) (int, any, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	d := j.det
	sum := s.summaryOf(j)
	b := jobBody{
		JID: d.JobID, Name: d.Name, State: string(d.State), IsStoppable: d.State == jobmaster.Running,
		StartTime: sum.StartTime, EndTime: sum.EndTime, Duration: sum.Duration,
		Now: ms(s.cfg.Now()), Timestamps: map[string]int64{}, Vertices: []vertexBody{},
		StatusCounts: taskCounts(j.allSubtasks()), Plan: planOf(j),
		ModuleDigest: d.ModuleDigest, Restarts: d.Restarts, Failure: d.Failure,
	}
	if j.spec.Graph != nil {
		b.MaxParallelism = jobgraph.MaxParallelismOf(j.spec.Graph)
	}
	for _, st := range jobStates {
		b.Timestamps[string(st)] = ms(d.StateTimes[st])
	}
	for _, v := range j.vertices {
		vb := vertexBody{
			ID: v.id, Name: v.name, Parallelism: v.parallelism, Status: vertexStatus(v.subtasks),
			StartTime: sum.StartTime, EndTime: sum.EndTime, Duration: sum.Duration,
			Tasks: taskCounts(v.subtasks), Metrics: sumMetrics(v.subtasks),
		}
		for _, op := range v.operators {
			vb.Operators = append(vb.Operators, operatorBody{ID: op.ID, Name: op.Name, Kind: string(op.Kind), Connector: op.Connector})
		}
		b.Vertices = append(b.Vertices, vb)
	}
	return http.StatusOK, b, nil
}

// patchJob is PATCH /jobs/:job[?mode=cancel]: cancel the job (202; wait
// for CANCELED with GET /jobs/:job).
func (s *Server) patchJob(ctx context.Context, r *request) (int, any, error) {
	switch mode := r.URL.Query().Get("mode"); mode {
	case "", "cancel":
	case "stop":
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "mode=stop: stop a job with a savepoint with POST /jobs/%s/stop", r.param("job"))
	default:
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "mode %q: want cancel (the default)", mode)
	}
	if err := s.cfg.Dispatcher.CancelJob(ctx, r.tenant, r.param("job")); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, struct{}{}, nil
}

type planInputBody struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

type planNodeBody struct {
	ID          string          `json:"id"`
	Parallelism int             `json:"parallelism"`
	Operator    string          `json:"operator"`
	Description string          `json:"description"`
	Inputs      []planInputBody `json:"inputs,omitempty"`
}

type planBody struct {
	JID   string         `json:"jid"`
	Name  string         `json:"name"`
	Type  string         `json:"type"`
	Nodes []planNodeBody `json:"nodes"`
}

// planOf is the job's plan: one node per task. Every Sluice job runs as
// Flink's STREAMING mode does (pipelined, all tasks at once), bounded or
// not.
func planOf(j jobView) planBody {
	p := planBody{JID: j.det.JobID, Name: j.det.Name, Type: "STREAMING", Nodes: []planNodeBody{}}
	for _, v := range j.vertices {
		kinds := make([]string, len(v.operators))
		for i, op := range v.operators {
			kinds[i] = string(op.Kind)
			if op.Connector != "" {
				kinds[i] += "(" + op.Connector + ")"
			}
		}
		n := planNodeBody{ID: v.id, Parallelism: v.parallelism, Operator: strings.Join(kinds, " -> "), Description: v.name}
		for i, in := range v.inputs {
			n.Inputs = append(n.Inputs, planInputBody{Num: i, ID: in.from, ShipStrategy: shipStrategy(in.partitioner), Exchange: "pipelined_bounded"})
		}
		p.Nodes = append(p.Nodes, n)
	}
	return p
}

// getPlan is GET /jobs/:job/plan.
func (s *Server) getPlan(ctx context.Context, r *request) (int, any, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		Plan planBody `json:"plan"`
	}{planOf(j)}, nil
}

type exceptionBody struct {
	Name          string  `json:"exceptionName"`
	Stacktrace    string  `json:"stacktrace"`
	Timestamp     int64   `json:"timestamp"`
	TaskName      *string `json:"taskName"`
	TaskManagerID *string `json:"taskManagerId"`
}

// getExceptions is GET /jobs/:job/exceptions: the current failure and the
// failures the job restarted from, newest first, each with the guest's
// Wasm stack as the task reported it.
func (s *Server) getExceptions(ctx context.Context, r *request) (int, any, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	d := j.det
	type history struct {
		Entries   []exceptionBody `json:"entries"`
		Truncated bool            `json:"truncated"`
	}
	out := struct {
		Root         *string `json:"root-exception"`
		Timestamp    *int64  `json:"timestamp"`
		History      history `json:"exceptionHistory"`
		ModuleDigest string  `json:"module-digest"`
	}{History: history{Entries: []exceptionBody{}, Truncated: len(d.History) >= jobmaster.MaxHistory}, ModuleDigest: d.ModuleDigest}
	for i := len(d.History) - 1; i >= 0; i-- {
		f := d.History[i]
		e := exceptionBody{Name: exceptionName(f.Cause), Stacktrace: f.Cause, Timestamp: ms(f.Time)}
		if v, st, ok := j.failedSubtask(f.Cause); ok {
			name, tm := v.name, st.TaskManager
			e.TaskName = &name
			if tm != "" {
				e.TaskManagerID = &tm
			}
		}
		out.History.Entries = append(out.History.Entries, e)
	}
	if d.Failure != "" {
		root := d.Failure
		out.Root = &root
		if n := len(d.History); n > 0 {
			ts := ms(d.History[n-1].Time)
			out.Timestamp = &ts
		}
	}
	return http.StatusOK, out, nil
}

// exceptionName is the first line of a failure, up to its first colon:
// what failed, as Flink's exception class names it.
func exceptionName(cause string) string {
	line, _, _ := strings.Cut(cause, "\n")
	if head, _, ok := strings.Cut(line, ": "); ok {
		return head
	}
	return line
}

// failedSubtask finds the subtask whose failure is cause (or part of it).
func (j jobView) failedSubtask(cause string) (vertexView, jobmaster.SubtaskStatus, bool) {
	for _, v := range j.vertices {
		for _, st := range v.subtasks {
			if st.Failure != "" && strings.Contains(cause, st.Failure) {
				return v, st, true
			}
		}
	}
	return vertexView{}, jobmaster.SubtaskStatus{}, false
}

type accumulatorBody struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// getAccumulators is GET /jobs/:job/accumulators: the guests' counters,
// summed once the job FINISHED (empty before), values as strings as
// Flink's.
func (s *Server) getAccumulators(ctx context.Context, r *request) (int, any, error) {
	d, err := s.cfg.Dispatcher.GetJob(ctx, r.tenant, r.param("job"))
	if err != nil {
		return 0, nil, err
	}
	out := struct {
		Job  []accumulatorBody `json:"job-accumulators"`
		User []accumulatorBody `json:"user-task-accumulators"`
	}{Job: []accumulatorBody{}, User: []accumulatorBody{}}
	for _, name := range sortedKeys(d.Accumulators) {
		out.User = append(out.User, accumulatorBody{Name: name, Type: "Long", Value: strconv.FormatInt(d.Accumulators[name], 10)})
	}
	return http.StatusOK, out, nil
}

type subtaskBody struct {
	Subtask       int         `json:"subtask"`
	Status        string      `json:"status"`
	Attempt       int         `json:"attempt"`
	TaskManagerID string      `json:"taskmanager-id"`
	Host          string      `json:"host"`
	Failure       string      `json:"failure,omitempty"`
	Metrics       metricsBody `json:"metrics"`
}

func (s *Server) subtasksOf(ctx context.Context, r *request, v vertexView) []subtaskBody {
	o := s.cfg.Dispatcher.Overview(ctx, r.tenant).Overview
	out := []subtaskBody{}
	for _, st := range v.subtasks {
		b := subtaskBody{Subtask: st.Index, Status: st.State, Attempt: st.Attempt, TaskManagerID: st.TaskManager, Failure: st.Failure, Metrics: metricsOf(st.Metrics)}
		if t, ok := tmLookup(o, st.TaskManager); ok {
			b.Host = t.RPCAddress
		}
		out = append(out, b)
	}
	return out
}

// jobVertex loads the route's job and vertex.
func (s *Server) jobVertex(ctx context.Context, r *request) (jobView, vertexView, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return j, vertexView{}, err
	}
	v, err := j.vertex(r.param("vertex"))
	return j, v, err
}

// getVertex is GET /jobs/:job/vertices/:vertex.
func (s *Server) getVertex(ctx context.Context, r *request) (int, any, error) {
	_, v, err := s.jobVertex(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		ID          string        `json:"id"`
		Name        string        `json:"name"`
		Parallelism int           `json:"parallelism"`
		Now         int64         `json:"now"`
		Subtasks    []subtaskBody `json:"subtasks"`
	}{v.id, v.name, v.parallelism, ms(s.cfg.Now()), s.subtasksOf(ctx, r, v)}, nil
}

// getSubtasks is GET /jobs/:job/vertices/:vertex/subtasks.
func (s *Server) getSubtasks(ctx context.Context, r *request) (int, any, error) {
	_, v, err := s.jobVertex(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		Subtasks []subtaskBody `json:"subtasks"`
	}{s.subtasksOf(ctx, r, v)}, nil
}

type backpressureSubtask struct {
	Subtask   int     `json:"subtask"`
	Level     string  `json:"backpressureLevel"`
	Ratio     float64 `json:"ratio"`
	IdleRatio float64 `json:"idleRatio"`
	BusyRatio float64 `json:"busyRatio"`
}

// backpressureLevel is Flink's: ok up to 10% of the time back-pressured,
// low up to 50%, high above.
func backpressureLevel(ratio float64) string {
	switch {
	case ratio <= 0.10:
		return "ok"
	case ratio <= 0.5:
		return "low"
	}
	return "high"
}

// getBackpressure is GET /jobs/:job/vertices/:vertex/backpressure, from
// the tasks' back-pressured, idle and busy time per second.
func (s *Server) getBackpressure(ctx context.Context, r *request) (int, any, error) {
	_, v, err := s.jobVertex(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	out := struct {
		Status   string                `json:"status"`
		Level    string                `json:"backpressureLevel"`
		End      int64                 `json:"end-timestamp"`
		Subtasks []backpressureSubtask `json:"subtasks"`
	}{Status: "ok", Subtasks: []backpressureSubtask{}}
	worst := 0.0
	for _, st := range v.subtasks {
		m := st.Metrics
		b := backpressureSubtask{
			Subtask: st.Index, Ratio: float64(m.BackPressuredMsPerSecond) / 1000,
			IdleRatio: float64(m.IdleMsPerSecond) / 1000, BusyRatio: float64(m.BusyMsPerSecond) / 1000,
		}
		b.Level = backpressureLevel(b.Ratio)
		worst = max(worst, b.Ratio)
		out.End = max(out.End, ms(m.Reported))
		out.Subtasks = append(out.Subtasks, b)
	}
	out.Level = backpressureLevel(worst)
	if out.End == 0 {
		out.End = ms(s.cfg.Now())
	}
	return http.StatusOK, out, nil
}

// getWatermarks is GET /jobs/:job/vertices/:vertex/watermarks: Flink's list
// of {"id","value"}, empty until jobs have event time.
func (s *Server) getWatermarks(ctx context.Context, r *request) (int, any, error) {
	if _, _, err := s.jobVertex(ctx, r); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, []metricBody{}, nil
}
