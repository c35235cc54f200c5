package rest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/dispatcher"
)

// Logs and stacks come from the TaskManagers, through the Dispatcher
// (Dispatcher.Logs, TaskManagerLogs, Stacks), scoped to the tenant there.

type logLineBody struct {
	Time          int64  `json:"time"`
	Level         string `json:"level"`
	Task          string `json:"task"`
	Subtask       int    `json:"subtask"`
	Attempt       int    `json:"attempt"`
	Message       string `json:"message"`
	Attrs         string `json:"attrs,omitempty"`
	TaskManagerID string `json:"taskmanager-id"`
	Source        string `json:"source"`
	Seq           uint64 `json:"seq"`
	Dropped       uint64 `json:"dropped,omitempty"`
}

type logsBody struct {
	Lines []logLineBody `json:"lines"`
	// Next is the cursor to pass as ?after= for the lines after these.
	Next string `json:"next"`
}

// logQuery reads ?task=, ?limit= and ?after=SOURCE:SEQ,… (the "next" of
// the previous answer).
func logQuery(r *request) (dispatcher.LogQuery, error) {
	q := dispatcher.LogQuery{Task: r.URL.Query().Get("task"), After: map[string]uint64{}}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 || n > control.MaxLogLines {
			return q, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "limit %q: want a number of lines from 0 to %d", l, control.MaxLogLines)
		}
		q.Limit = n
	}
	if a := r.URL.Query().Get("after"); a != "" {
		for _, part := range strings.Split(a, ",") {
			i := strings.LastIndexByte(part, ':')
			if i < 0 {
				return q, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "after %q: want SOURCE:SEQ,… as the previous answer's \"next\"", a)
			}
			n, err := strconv.ParseUint(part[i+1:], 10, 64)
			if err != nil {
				return q, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "after %q: want SOURCE:SEQ,… as the previous answer's \"next\"", a)
			}
			q.After[part[:i]] = n
		}
	}
	return q, nil
}

// logsOf is the answer for lines read with q: the lines and the cursor
// after them (q's cursor moved past every line).
func logsOf(lines []dispatcher.LogLine, q dispatcher.LogQuery) logsBody {
	out := logsBody{Lines: []logLineBody{}}
	next := q.After
	for _, l := range lines {
		out.Lines = append(out.Lines, logLineBody{
			Time: ms(l.Time), Level: l.Level, Task: l.Task, Subtask: l.Subtask, Attempt: l.Attempt,
			Message: l.Message, Attrs: l.Attrs, TaskManagerID: l.TaskManager, Source: l.Source, Seq: l.Seq, Dropped: l.Dropped,
		})
		next[l.Source] = max(next[l.Source], l.Seq)
	}
	parts := make([]string, 0, len(next))
	for _, src := range sortedKeys(next) {
		parts = append(parts, src+":"+strconv.FormatUint(next[src], 10))
	}
	out.Next = strings.Join(parts, ",")
	return out
}

// getJobLogs is GET /jobs/:job/logs[?task=NAME&after=CURSOR&limit=N]: the
// kept log lines of the job's tasks (guest log output and host events), in
// time order.
func (s *Server) getJobLogs(ctx context.Context, r *request) (int, any, error) {
	q, err := logQuery(r)
	if err != nil {
		return 0, nil, err
	}
	lines, err := s.cfg.Dispatcher.Logs(ctx, r.tenant, r.param("job"), q)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, logsOf(lines, q), nil
}

// getTaskManagerLogs is GET /taskmanagers/:tm/logs[?after=CURSOR&limit=N]:
// the TaskManager's own log, the lines the tenant may read.
func (s *Server) getTaskManagerLogs(ctx context.Context, r *request) (int, any, error) {
	q, err := logQuery(r)
	if err != nil {
		return 0, nil, err
	}
	lines, err := s.cfg.Dispatcher.TaskManagerLogs(ctx, r.tenant, r.param("tm"), q)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, logsOf(lines, q), nil
}

type stackSampleBody struct {
	Frames []string `json:"frames"`
	Count  int64    `json:"count"`
}

type taskStackBody struct {
	ExecutionID   string            `json:"execution-id"`
	TaskManagerID string            `json:"taskmanager-id"`
	Task          string            `json:"task"`
	Subtask       int               `json:"subtask"`
	Attempt       int               `json:"attempt"`
	Samples       []stackSampleBody `json:"samples"`
	Total         int64             `json:"total"`
}

// durationParam reads ?name= in milliseconds (def when absent).
func durationParam(r *request, name string, def time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > control.MaxStackDuration.Milliseconds() {
		return 0, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s %q: want milliseconds from 0 to %d", name, v, control.MaxStackDuration.Milliseconds())
	}
	return time.Duration(n) * time.Millisecond, nil
}

// getStacks is GET /jobs/:job/stacks[?task=NAME&duration=MS&interval=MS]:
// the current Wasm call stack of each running subtask (Flink's thread
// dump), function names from the module's name section; with duration, a
// sampled profile of each.
func (s *Server) getStacks(ctx context.Context, r *request) (int, any, error) {
	q := dispatcher.StackQuery{Task: r.URL.Query().Get("task")}
	var err error
	if q.Duration, err = durationParam(r, "duration", 0); err != nil {
		return 0, nil, err
	}
	if q.Interval, err = durationParam(r, "interval", 0); err != nil {
		return 0, nil, err
	}
	stacks, err := s.cfg.Dispatcher.Stacks(ctx, r.tenant, r.param("job"), q)
	if err != nil {
		return 0, nil, err
	}
	out := struct {
		Stacks []taskStackBody `json:"stacks"`
	}{Stacks: []taskStackBody{}}
	for _, t := range stacks {
		b := taskStackBody{ExecutionID: t.ExecutionID, TaskManagerID: t.TaskManager, Task: t.Task, Subtask: t.Subtask, Attempt: t.Attempt, Total: t.Total, Samples: []stackSampleBody{}}
		for _, sc := range t.Samples {
			b.Samples = append(b.Samples, stackSampleBody{Frames: sc.Frames, Count: sc.Count})
		}
		out.Stacks = append(out.Stacks, b)
	}
	return http.StatusOK, out, nil
}

// flameNode is Flink's flame graph node.
type flameNode struct {
	Name     string      `json:"name"`
	Value    int64       `json:"value"`
	Children []flameNode `json:"children"`
}

func flameOf(n dispatcher.FlameNode) flameNode {
	out := flameNode{Name: n.Name, Value: n.Value, Children: make([]flameNode, 0, len(n.Children))}
	for _, c := range n.Children {
		out.Children = append(out.Children, flameOf(c))
	}
	return out
}

// DefaultFlameGraphDuration is how long a flame graph samples when the
// request says nothing.
const DefaultFlameGraphDuration = time.Second

// getFlameGraph is GET /jobs/:job/vertices/:vertex/flamegraph[?duration=MS
// &interval=MS]: the vertex's subtasks sampled for duration (default 1s),
// as Flink's {"endTimestamp", "data": {name, value, children}} tree.
func (s *Server) getFlameGraph(ctx context.Context, r *request) (int, any, error) {
	_, v, err := s.jobVertex(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	q := dispatcher.StackQuery{Task: v.name}
	if q.Duration, err = durationParam(r, "duration", DefaultFlameGraphDuration); err != nil {
		return 0, nil, err
	}
	if q.Interval, err = durationParam(r, "interval", 0); err != nil {
		return 0, nil, err
	}
	stacks, err := s.cfg.Dispatcher.Stacks(ctx, r.tenant, r.param("job"), q)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		End  int64     `json:"endTimestamp"`
		Data flameNode `json:"data"`
	}{ms(s.cfg.Now()), flameOf(dispatcher.FlameGraph(stacks))}, nil
}
