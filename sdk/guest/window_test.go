//go:build !wasip1

package guest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

func windowPlan(w Windows, fn func(ws *WindowedStream) *Stream) func(env *Env) {
	return func(env *Env) {
		ws := env.Source("s", func(*Context, int, *Collector) bool { return true }).
			KeyBy("k", func(r Record) []byte { return r.Key }).Window(w)
		fn(ws).Collect("o")
	}
}

func sum(acc, v []byte) []byte { return PutInt64(acc, AsInt64(acc)+AsInt64(v)) }

func reduceWin(ws *WindowedStream) *Stream { return ws.Reduce("w", sum) }

// Bad window declarations fail the plan, before anything runs, saying what
// is wrong and what to do.
func TestWindowPlanMisuse(t *testing.T) {
	for name, tc := range map[string]struct {
		plan func(env *Env)
		want string
	}{
		"tumbling size 0":        {windowPlan(Tumbling(0), reduceWin), "Tumbling(0s): the size must be at least 1ms"},
		"tumbling size negative": {windowPlan(Tumbling(-time.Second), reduceWin), "Tumbling(-1s): the size must be at least 1ms"},
		"tumbling below 1ms":     {windowPlan(Tumbling(time.Microsecond), reduceWin), "the size must be at least 1ms"},
		"sliding size 0":         {windowPlan(Sliding(0, 0), reduceWin), "Sliding(0s, 0s): the size must be at least 1ms"},
		"sliding slide 0":        {windowPlan(Sliding(time.Second, 0), reduceWin), "Sliding(1s, 0s): the slide must be at least 1ms"},
		"sliding slide negative": {windowPlan(Sliding(time.Second, -time.Second), reduceWin), "the slide must be at least 1ms"},
		"slide above size":       {windowPlan(Sliding(time.Second, 2*time.Second), reduceWin), "Sliding(1s, 2s): the slide is larger than the size"},
		"session gap 0":          {windowPlan(Session(0), reduceWin), "Session(0s): the gap must be at least 1ms"},
		"session gap negative":   {windowPlan(Session(-time.Minute), reduceWin), "Session(-1m0s): the gap must be at least 1ms"},
		"negative lateness": {windowPlan(Tumbling(time.Second).WithAllowedLateness(-time.Millisecond), reduceWin),
			"WithAllowedLateness(-1ms): the allowed lateness must not be negative"},
		"zero windows": {windowPlan(Windows{}, reduceWin), "build the windows with Tumbling, Sliding or Session"},
		"lateness in processing time": {windowPlan(Tumbling(time.Second).InProcessingTime().WithAllowedLateness(time.Second), reduceWin),
			"allowed lateness is for event time"},
		"session aggregate without merge": {windowPlan(Session(time.Second), func(ws *WindowedStream) *Stream {
			return ws.Aggregate("w", Aggregator{Add: func(acc []byte, r Record) []byte { return acc }})
		}), `window "w": session windows merge, so the Aggregator needs a Merge function`},
		"nil reduce":  {windowPlan(Tumbling(time.Second), func(ws *WindowedStream) *Stream { return ws.Reduce("w", nil) }), `process "w": nil function`},
		"nil process": {windowPlan(Tumbling(time.Second), func(ws *WindowedStream) *Stream { return ws.Process("w", nil) }), `process "w": nil function`},
		"late of a map": {func(env *Env) {
			env.TextSource("in").Map("m", func(r Record) Record { return r }).Late("late").Collect("o")
		}, `Late("late") on "m": only a window operator has a late output`},
		"late twice": {windowPlan(Tumbling(time.Second), func(ws *WindowedStream) *Stream {
			s := reduceWin(ws)
			s.Late("l1").Collect("lo")
			s.Late("l2")
			return s
		}), `the late output is already "l1"`},
		"late in processing time": {windowPlan(Tumbling(time.Second).InProcessingTime(), func(ws *WindowedStream) *Stream {
			s := reduceWin(ws)
			s.Late("l")
			return s
		}), "processing-time windows have no late records"},
		"timer on a window": {windowPlan(Tumbling(time.Second), func(ws *WindowedStream) *Stream {
			return reduceWin(ws).OnEventTimer(func(*KeyedContext, int64, *Collector) {})
		}), "a window operator's timers are its own"},
		"window without key_by": {func(env *Env) {
			s := env.Source("s", func(*Context, int, *Collector) bool { return true })
			(&KeyedStream{s: s}).Window(Tumbling(time.Second)).Reduce("w", sum).Collect("o")
		}, "must follow KeyBy"},
	} {
		t.Run(name, func(t *testing.T) { planFails(t, tc.plan, tc.want) })
	}
}

// A window operator is a Process vertex that names its windows; with a
// late output its results go through a main select operator, which takes
// over its outputs, and its late records through the late one.
func TestWindowLateOutputInTheGraph(t *testing.T) {
	h := withJob(t, func(env *Env) {
		w := env.Source("s", func(*Context, int, *Collector) bool { return true }).
			KeyBy("k", func(r Record) []byte { return r.Key }).
			Window(Sliding(10*time.Second, 5*time.Second).WithAllowedLateness(time.Second)).
			Reduce("w", sum)
		w.Collect("o")
		w.Late("late").Collect("late-o")
		w.SetParallelism(3)
	})
	if st := doPlan(argsBatch()); st != abi.StatusOK {
		t.Fatalf("plan: %s", h.failMsg)
	}
	var g jobgraph.Graph
	if err := json.Unmarshal(h.plan, &g); err != nil {
		t.Fatal(err)
	}
	if err := jobgraph.Validate(&g, 2, 0); err != nil {
		t.Fatalf("the graph does not validate: %v", err)
	}
	byName := map[string]jobgraph.Vertex{}
	for _, v := range g.Vertices {
		byName[v.Name] = v
	}
	win := byName["w"]
	if win.Kind != jobgraph.KindProcess || win.Config["window"] != "sliding 10000ms every 5000ms event time, lateness 1000ms" {
		t.Errorf("window vertex %+v", win)
	}
	for _, n := range []string{"w.main", "late"} {
		if v := byName[n]; v.Kind != jobgraph.KindFlatMap || v.Parallelism != 3 {
			t.Errorf("select %q: %+v, want a flat_map at the window's parallelism 3", n, v)
		}
	}
	var edges []string
	name := func(id int) string { return g.Vertices[id-1].Name }
	for _, e := range g.Edges {
		edges = append(edges, name(e.Source)+">"+name(e.Target)+":"+string(e.Partitioner))
	}
	want := "s>k:forward k>w:hash w.main>o:rebalance w>late:forward late>late-o:rebalance w>w.main:forward"
	if got := strings.Join(edges, " "); got != want {
		t.Errorf("edges %s\nwant  %s", got, want)
	}
}
