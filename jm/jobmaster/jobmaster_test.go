package jobmaster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeGateway is a TaskExecutorGateway that plays the TaskManagers, in the
// style of Nomad's mock driver: each behaviour can be told to fail.
type fakeGateway struct {
	t  *testing.T
	jm func() *JobMaster

	mu        sync.Mutex
	deploys   []control.Deployment
	cancels   []string
	frees     []string
	failDep   func(d control.Deployment) error // non-nil error fails that deploy
	onRunning func(d control.Deployment)       // what the task does once RUNNING; nil: nothing
	ignoreCxl bool                             // the TaskManager never confirms cancels
	// onCancel, when set, plays the TaskManager's side of a cancel instead
	// of confirming it; its error is the call's.
	onCancel func(addr string, f control.FencingToken, id string) error
	wg       sync.WaitGroup

	// Checkpoints (see checkpoint_test.go).
	triggers     []triggerCall
	notifies     []notifyCall
	failTrigger  func(d control.Deployment, tr checkpoint.Trigger) error // non-nil error fails that trigger RPC
	store        blob.Store                                              // set: the tasks take checkpoints into it
	onCheckpoint func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply
	seen         map[[2]int64]int // (attempt, checkpoint) → source triggers seen
}

func (g *fakeGateway) report(d control.Deployment, state, failure string, collected [][]byte, acc map[string]int64) error {
	return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{
		Fencing: d.Fencing, ExecutionID: d.ExecutionID, State: state, Failure: failure, Collected: collected, Accumulators: acc,
	})
}

func (g *fakeGateway) DeployTask(ctx context.Context, addr string, d control.Deployment) error {
	g.mu.Lock()
	g.deploys = append(g.deploys, d)
	fail, run := g.failDep, g.onRunning
	g.mu.Unlock()
	if addr != "rpc-"+strings.TrimPrefix(d.AllocationID, "alloc-")[:3] {
		// allocation ids are "alloc-tmN-k": the address must be that TaskManager's
		g.t.Errorf("deploy of %s to %s, allocation %s", d.ExecutionID, addr, d.AllocationID)
	}
	if fail != nil {
		if err := fail(d); err != nil {
			return err
		}
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.report(d, ExecRunning, "", nil, nil)
		if run != nil {
			run(d)
		}
	}()
	return nil
}

func (g *fakeGateway) CancelTask(ctx context.Context, addr string, f control.FencingToken, id string) error {
	g.mu.Lock()
	g.cancels = append(g.cancels, id)
	ignore, hook := g.ignoreCxl, g.onCancel
	g.mu.Unlock()
	if hook != nil {
		return hook(addr, f, id)
	}
	if !ignore {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: f, ExecutionID: id, State: ExecCanceled})
		}()
	}
	return nil
}

func (g *fakeGateway) FreeSlot(ctx context.Context, addr, alloc string) error {
	g.mu.Lock()
	g.frees = append(g.frees, alloc)
	g.mu.Unlock()
	return nil
}

func (g *fakeGateway) snapshot() (deploys []control.Deployment, cancels, frees []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.deploys), slices.Clone(g.cancels), slices.Clone(g.frees)
}

// fakePool hands out slots on TaskManagers tm0..tmN round robin.
type fakePool struct {
	mu          sync.Mutex
	tms         int
	n           int
	live        map[string]bool
	err         error
	requests    int
	unreachable []string
}

func (p *fakePool) ReportUnreachable(tm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unreachable = append(p.unreachable, tm)
}

func (p *fakePool) RequestSlots(ctx context.Context, job string, n int) ([]resourcemanager.Slot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	if p.err != nil {
		return nil, p.err
	}
	var out []resourcemanager.Slot
	for i := range n {
		tm := fmt.Sprintf("tm%d", i%p.tms)
		p.n++
		a := fmt.Sprintf("alloc-%s-%d", tm, p.n)
		p.live[a] = true
		out = append(out, resourcemanager.Slot{AllocationID: a, ResourceID: tm, RPCAddress: "rpc-" + tm, DataAddress: "data-" + tm})
	}
	return out, nil
}

func (p *fakePool) ReleaseSlots(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		delete(p.live, id)
	}
}

func (p *fakePool) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// wordcount: text source -> flat_map -> key_by =hash=> reduce -> collect sink.
func wordcount(srcP, reduceP int) *jobgraph.Graph {
	return &jobgraph.Graph{
		Name: "wordcount",
		Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Parallelism: srcP, Config: map[string]string{"paths": `["in/"]`}},
			{ID: 2, Name: "split", Kind: jobgraph.KindFlatMap, Parallelism: srcP},
			{ID: 3, Name: "by word", Kind: jobgraph.KindKeyBy, Parallelism: srcP},
			{ID: 4, Name: "count", Kind: jobgraph.KindReduce, Parallelism: reduceP},
			{ID: 5, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect, Parallelism: reduceP},
		},
		Edges: []jobgraph.Edge{
			{Source: 1, Target: 2, Partitioner: jobgraph.Forward},
			{Source: 2, Target: 3, Partitioner: jobgraph.Forward},
			{Source: 3, Target: 4, Partitioner: jobgraph.Hash},
			{Source: 4, Target: 5, Partitioner: jobgraph.Forward},
		},
	}
}

type harness struct {
	jm   *JobMaster
	gw   *fakeGateway
	pool *fakePool
}

func start(t *testing.T, g *jobgraph.Graph, mod func(*Config, *fakeGateway, *fakePool)) *harness {
	t.Helper()
	if err := jobgraph.Validate(g, 1, 0); err != nil {
		t.Fatal(err)
	}
	h := &harness{pool: &fakePool{tms: 2, live: map[string]bool{}}}
	h.gw = &fakeGateway{t: t, jm: func() *JobMaster { return h.jm }}
	cfg := Config{
		JobID: "j1", Tenant: "default", ModuleDigest: "sha256-00", Args: []string{"a"},
		Graph: g, DefaultParallelism: 1, LeaderSession: "s1", Address: "jm:1",
		JobConfig: jobconfig.Config{Clock: jobconfig.ClockWall},
		Slots:     h.pool, Gateway: h.gw, CancelTimeout: 5 * time.Second, RPCTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if mod != nil {
		mod(&cfg, h.gw, h.pool)
	}
	// The gateway reports through h.jm: hold deploys until it is set.
	h.gw.mu.Lock()
	jm, err := Start(cfg)
	h.jm = jm
	h.gw.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		jm.Close()
		h.gw.wg.Wait()
	})
	return h
}

// slotsReleased says whether the job gave back every slot it held.
func slotsReleased(h *harness) error {
	if n := h.pool.held(); n != 0 {
		return fmt.Errorf("%d slots still held, want none", n)
	}
	return nil
}

// deployments says whether the job made want deployments so far.
func deployments(h *harness, want int) error {
	if d, _, _ := h.gw.snapshot(); len(d) != want {
		return fmt.Errorf("%d deployments, want %d", len(d), want)
	}
	return nil
}

func (h *harness) wait(t *testing.T, want JobState) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := h.jm.Wait(ctx)
	if r.State != want {
		t.Fatalf("job state %s, want %s (failure: %s)", r.State, want, r.Failure)
	}
	return r
}

// finishAll makes every task report FINISHED once RUNNING, the sinks with a record each.
func finishAll(g *fakeGateway) func(d control.Deployment) {
	return func(d control.Deployment) {
		var rec [][]byte
		if d.Chain[len(d.Chain)-1].Connector == jobgraph.ConnectorCollect {
			rec = [][]byte{fmt.Appendf(nil, "rec-%d", d.Subtask)}
		}
		g.report(d, ExecFinished, "", rec, map[string]int64{"n": 1})
	}
}

func TestDeploysChainsAndChannelsThenFinishes(t *testing.T) {
	h := start(t, wordcount(2, 3), func(c *Config, g *fakeGateway, _ *fakePool) { g.onRunning = finishAll(g) })
	r := h.wait(t, Finished)

	deps, _, frees := h.gw.snapshot()
	if len(deps) != 5 {
		t.Fatalf("%d deployments, want 2 + 3", len(deps))
	}
	// Consumers first: the three reduce->sink subtasks, then the sources.
	for i, d := range deps {
		wantHead := 4
		if i >= 3 {
			wantHead = 1
		}
		if d.Chain[0].ID != wantHead {
			t.Fatalf("deployment %d heads with vertex %d, want %d", i, d.Chain[0].ID, wantHead)
		}
		if d.Fencing != (control.FencingToken{LeaderSession: "s1", JobID: "j1", Attempt: 0}) || d.JobMasterAddress != "jm:1" || d.Tenant != "default" ||
			d.ModuleDigest != "sha256-00" || d.MaxParallelism != 128 || d.Config.Clock != jobconfig.ClockWall || d.Args[0] != "a" {
			t.Fatalf("deployment %d: %+v", i, d)
		}
	}
	src, red := deps[3], deps[0]
	if n := len(src.Chain); n != 3 || src.Chain[0].Connector != jobgraph.ConnectorText || src.Parallelism != 2 {
		t.Fatalf("source chain: %+v", src.Chain)
	}
	if len(red.Chain) != 2 || red.Chain[1].Connector != jobgraph.ConnectorCollect || red.Parallelism != 3 {
		t.Fatalf("reduce chain: %+v", red.Chain)
	}
	if _, err := json.Marshal(src.Chain); err != nil {
		t.Fatal(err)
	}
	if len(src.Inputs) != 0 || len(src.Outputs) != 1 || len(red.Outputs) != 0 || len(red.Inputs) != 1 {
		t.Fatalf("channels: src %+v / %+v, reduce %+v / %+v", src.Inputs, src.Outputs, red.Inputs, red.Outputs)
	}
	out, in := src.Outputs[0], red.Inputs[0]
	if out.ResultID != in.ResultID || out.ResultID != "j1.a0.e3-4" || out.Partitioner != jobgraph.Hash || in.Producers != 2 {
		t.Fatalf("out %+v in %+v", out, in)
	}
	// Consumer subtask i runs in slot i, and slots alternate tm0, tm1.
	if fmt.Sprint(out.Targets) != "[data-tm0 data-tm1 data-tm0]" {
		t.Fatalf("targets %v", out.Targets)
	}
	// Slot sharing: subtask i of every chain in the same allocation.
	alloc := map[int]string{}
	for _, d := range deps {
		if a, ok := alloc[d.Subtask]; ok && a != d.AllocationID {
			t.Fatalf("subtask %d in allocations %s and %s", d.Subtask, a, d.AllocationID)
		}
		alloc[d.Subtask] = d.AllocationID
	}
	if len(alloc) != 3 {
		t.Fatalf("%d slots used, want 3", len(alloc))
	}

	slices.SortFunc(r.Records, func(a, b []byte) int { return strings.Compare(string(a), string(b)) })
	if fmt.Sprintf("%s", r.Records) != "[rec-0 rec-1 rec-2]" || r.Accumulators["n"] != 5 {
		t.Fatalf("result: %s %v", r.Records, r.Accumulators)
	}
	if len(r.Vertices) != 5 || r.Vertices[3].Name != "count" || len(r.Vertices[3].Subtasks) != 3 || r.Vertices[3].Subtasks[2].State != ExecFinished || r.Vertices[3].Subtasks[1].TaskManager != "tm1" {
		t.Fatalf("vertices: %+v", r.Vertices)
	}
	if r.End.IsZero() || r.StateTimes[Running].IsZero() || r.StateTimes[Finished].IsZero() {
		t.Fatalf("times: %+v", r.StateTimes)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
	_, _, frees = h.gw.snapshot()
	if len(frees) != 3 {
		t.Fatalf("freed %v", frees)
	}
}

func TestCancelCancelsEveryTaskAndFreesEverySlot(t *testing.T) {
	h := start(t, wordcount(2, 2), nil)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		for _, v := range h.jm.Details().Vertices {
			if len(v.Subtasks) == 0 { // before its slots arrive
				return fmt.Errorf("%q lists no subtasks yet", v.Name)
			}
			for _, s := range v.Subtasks {
				if s.State != ExecRunning {
					return fmt.Errorf("%q subtask %d is %s, want every task RUNNING", v.Name, s.Index, s.State)
				}
			}
		}
		return nil
	})
	if err := h.jm.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wait(t, Canceled)
	deps, cancels, _ := h.gw.snapshot()
	if len(cancels) != len(deps) || len(deps) != 4 {
		t.Fatalf("canceled %v of %d deployments", cancels, len(deps))
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
	_, _, frees := h.gw.snapshot()
	if len(frees) != 2 {
		t.Fatalf("freed %v", frees)
	}
	if err := h.jm.Cancel(context.Background()); err != nil {
		t.Fatalf("cancel after the end: %v", err)
	}
	err := h.jm.UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: deps[0].Fencing, ExecutionID: deps[0].ExecutionID, State: ExecRunning})
	if !errors.Is(err, rpcerr.ErrFailedPrecondition) {
		t.Fatalf("report after the end: %v", err)
	}
}

func TestCancelTimesOutWhenTasksDoNotConfirm(t *testing.T) {
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		g.ignoreCxl = true
		c.CancelTimeout = 50 * time.Millisecond
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 2) })
	h.jm.Cancel(context.Background())
	h.wait(t, Canceled)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
}

func TestRestartsWithFixedDelayThenFails(t *testing.T) {
	const delay = 50 * time.Millisecond
	var mu sync.Mutex
	var failedAt []time.Time
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Attempts: 2, Delay: delay}
		g.onRunning = func(d control.Deployment) {
			if d.Chain[0].ID == 1 {
				mu.Lock()
				failedAt = append(failedAt, time.Now())
				mu.Unlock()
				g.report(d, ExecFailed, fmt.Sprintf("guest trap in attempt %d\nwasm stack:\n  split.go:12", d.Fencing.Attempt), nil, nil)
			}
		}
	})
	r := h.wait(t, Failed)
	if r.Restarts != 2 || !strings.Contains(r.Failure, "guest trap in attempt 2") || !strings.Contains(r.Failure, "wasm stack") ||
		!strings.Contains(r.Failure, "gave up after 2 restarts") || !strings.Contains(r.Failure, `task "lines -> split -> by word" subtask 1/1`) {
		t.Fatalf("failure %q, restarts %d", r.Failure, r.Restarts)
	}
	// Every attempt's failure, oldest first: two restarts, then FAILED.
	if len(r.History) != 3 {
		t.Fatalf("history %+v: want 3 failures", r.History)
	}
	for i, f := range r.History {
		if !strings.Contains(f.Cause, fmt.Sprintf("guest trap in attempt %d", i)) || (i > 0 && f.Time.Before(r.History[i-1].Time)) {
			t.Errorf("history[%d] = %+v", i, f)
		}
	}
	deps, cancels, _ := h.gw.snapshot()
	var attempts []int64
	for _, d := range deps {
		attempts = append(attempts, d.Fencing.Attempt)
	}
	if fmt.Sprint(attempts) != "[0 0 1 1 2 2]" {
		t.Fatalf("deployment attempts %v", attempts)
	}
	if len(cancels) != 3 {
		t.Fatalf("the surviving task of each attempt must be canceled: %v", cancels)
	}
	if !strings.Contains(deps[2].ExecutionID, ".a1.") || deps[2].Inputs[0].ResultID == deps[0].Inputs[0].ResultID {
		t.Fatalf("attempt 1 reuses attempt 0 ids: %+v", deps[2])
	}
	mu.Lock()
	for i := 1; i < len(failedAt); i++ {
		if d := failedAt[i].Sub(failedAt[i-1]); d < delay {
			t.Fatalf("restart %d after %v, before the delay %v", i, d, delay)
		}
	}
	mu.Unlock()
	// A report of an old attempt is refused.
	err := h.jm.UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: deps[0].Fencing, ExecutionID: deps[0].ExecutionID, State: ExecRunning})
	if err == nil {
		t.Fatal("stale report accepted")
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
}

func TestRestartThenFinishKeepsOnlyTheLastAttempt(t *testing.T) {
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Attempts: 3}
		fin := finishAll(g)
		g.onRunning = func(d control.Deployment) {
			if d.Fencing.Attempt == 0 && d.Chain[0].ID == 4 {
				// The sink finishes in attempt 0 but the source fails: its
				// records must not reach the result.
				fin(d)
				return
			}
			if d.Fencing.Attempt == 0 {
				g.report(d, ExecFailed, "boom", nil, nil)
				return
			}
			fin(d)
		}
	})
	r := h.wait(t, Finished)
	if r.Restarts != 1 || len(r.Records) != 1 || r.Accumulators["n"] != 2 {
		t.Fatalf("restarts %d records %q acc %v", r.Restarts, r.Records, r.Accumulators)
	}
	// The restart's cause is history; a FINISHED job has no failure.
	if r.Failure != "" {
		t.Errorf("FINISHED job shows failure %q", r.Failure)
	}
	if len(r.History) != 1 || !strings.Contains(r.History[0].Cause, "boom") || r.History[0].Time.IsZero() {
		t.Fatalf("history %+v: want the one failure that caused the restart", r.History)
	}
}

func TestStaleFencingAndUnknownExecution(t *testing.T) {
	h := start(t, wordcount(1, 1), nil)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 2) })
	deps, _, _ := h.gw.snapshot()
	ctx := context.Background()
	for _, f := range []control.FencingToken{{LeaderSession: "s1", JobID: "j1", Attempt: 7}, {LeaderSession: "other-session", JobID: "j1", Attempt: 0}, {LeaderSession: "s1", JobID: "j2", Attempt: 0}} {
		err := h.jm.UpdateTaskState(ctx, control.TaskUpdate{Fencing: f, ExecutionID: deps[0].ExecutionID, State: ExecFailed})
		if !errors.Is(err, rpcerr.ErrStaleFencingToken) {
			t.Fatalf("%+v: %v", f, err)
		}
	}
	err := h.jm.UpdateTaskState(ctx, control.TaskUpdate{Fencing: deps[0].Fencing, ExecutionID: "nope", State: ExecRunning})
	if !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("unknown execution: %v", err)
	}
	err = h.jm.UpdateTaskState(ctx, control.TaskUpdate{Fencing: deps[0].Fencing, ExecutionID: deps[0].ExecutionID, State: "EXPLODED"})
	if !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Fatalf("bad state: %v", err)
	}
	if s := h.jm.Details().State; s != Running {
		t.Fatalf("state %s after refused reports", s)
	}
}

func TestTaskManagerLossTriggersRestart(t *testing.T) {
	h := start(t, wordcount(2, 2), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Attempts: 1}
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 4) })
	deps, _, _ := h.gw.snapshot()
	var lost []string
	for _, d := range deps {
		if strings.HasPrefix(d.AllocationID, "alloc-tm1") && !slices.Contains(lost, d.AllocationID) {
			lost = append(lost, d.AllocationID)
		}
	}
	h.jm.TaskManagerLost(resourcemanager.Lost{ResourceID: "tm1", JobID: "j1", Allocations: lost, Reason: "heartbeat timeout"})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 8) })
	d := h.jm.Details()
	if d.Restarts != 1 || len(d.History) != 1 || !strings.Contains(d.History[0].Cause, "task manager tm1 lost (heartbeat timeout)") {
		t.Fatalf("details: restarts %d history %+v", d.Restarts, d.History)
	}
	_, cancels, frees := h.gw.snapshot()
	if len(cancels) != 2 {
		t.Fatalf("only the tasks on the live TaskManager are canceled: %v", cancels)
	}
	for _, f := range frees {
		if slices.Contains(lost, f) {
			t.Fatalf("freed a slot on the dead TaskManager: %s", f)
		}
	}
	// The dead TaskManager's allocations are released in the pool by the
	// ResourceManager itself; here we only check the live one's.
	h.pool.ReleaseSlots(lost...)
	h.jm.Cancel(context.Background())
	h.wait(t, Canceled)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
}

func TestDeployFailureRestartsThenFails(t *testing.T) {
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Attempts: 1}
		g.failDep = func(d control.Deployment) error {
			if d.Chain[0].ID == 1 {
				return rpcerr.Errorf(rpcerr.ErrResourceExhausted, "no free slot")
			}
			return nil
		}
	})
	r := h.wait(t, Failed)
	if !strings.Contains(r.Failure, "deploy to task manager tm0 (rpc-tm0): no free slot") || r.Restarts != 1 {
		t.Fatalf("failure %q restarts %d", r.Failure, r.Restarts)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	if h.pool.unreachable != nil {
		t.Errorf("a refused deploy reported %v unreachable", h.pool.unreachable)
	}
}

// A deploy that cannot connect to its TaskManager tells the ResourceManager,
// so the restart does not get that TaskManager's slots again.
func TestUnreachableTaskManagerIsReported(t *testing.T) {
	h := start(t, wordcount(2, 2), func(c *Config, g *fakeGateway, _ *fakePool) {
		g.failDep = func(d control.Deployment) error {
			if strings.HasPrefix(d.AllocationID, "alloc-tm1") {
				return rpcerr.Errorf(rpcerr.ErrUnreachable, "rpc: dial tcp 127.0.0.1:1: connection refused")
			}
			return nil
		}
	})
	r := h.wait(t, Failed)
	if !strings.Contains(r.Failure, "deploy to task manager tm1") {
		t.Fatalf("failure %q", r.Failure)
	}
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	if len(h.pool.unreachable) == 0 || slices.ContainsFunc(h.pool.unreachable, func(tm string) bool { return tm != "tm1" }) {
		t.Fatalf("reported unreachable: %v, want tm1", h.pool.unreachable)
	}
}

func TestNoSlotsFailsTheJob(t *testing.T) {
	h := start(t, wordcount(2, 4), func(c *Config, g *fakeGateway, p *fakePool) {
		c.Restart = RestartStrategy{Attempts: 5}
		p.err = rpcerr.NotEnoughSlots(4, 1)
	})
	r := h.wait(t, Failed)
	if r.Failure != "could not get 4 slots for the job: not enough slots: need 4, free 1" {
		t.Fatalf("failure %q", r.Failure)
	}
	if d, _, _ := h.gw.snapshot(); len(d) != 0 {
		t.Fatal("deployed without slots")
	}
}

func TestSplitsInOrderAndResetOnRestart(t *testing.T) {
	splits := []checkpoint.Split{{Key: "k/a", Offset: 0, Length: 4}, {Key: "k/a", Offset: 4, Length: 4}, {Key: "k/b", Offset: 0, Length: 3}}
	h := start(t, wordcount(2, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Splits = map[int][]checkpoint.Split{1: splits}
		c.Restart = RestartStrategy{Attempts: 1}
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 3) })
	deps, _, _ := h.gw.snapshot()
	src0, src1 := deps[1], deps[2]
	ctx := context.Background()
	ask := func(d control.Deployment) (checkpoint.Split, bool, error) {
		return h.jm.NextSplit(ctx, control.SplitRequest{Fencing: d.Fencing, ExecutionID: d.ExecutionID, VertexID: 1, Subtask: d.Subtask})
	}
	var got []checkpoint.Split
	for _, d := range []control.Deployment{src0, src0, src1} {
		s, done, err := ask(d)
		if err != nil || done {
			t.Fatalf("%v %v", done, err)
		}
		got = append(got, s)
	}
	if fmt.Sprint(got) != fmt.Sprint(splits) {
		t.Fatalf("splits %v", got)
	}
	for _, d := range []control.Deployment{src0, src1} {
		if _, done, err := ask(d); !done || err != nil {
			t.Fatalf("after the last split: done %v err %v", done, err)
		}
	}
	if _, _, err := h.jm.NextSplit(ctx, control.SplitRequest{Fencing: src0.Fencing, ExecutionID: src0.ExecutionID, VertexID: 2}); !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Fatalf("non-source vertex: %v", err)
	}
	if _, _, err := h.jm.NextSplit(ctx, control.SplitRequest{Fencing: src0.Fencing, ExecutionID: deps[0].ExecutionID, VertexID: 1}); !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Fatalf("execution of another task: %v", err)
	}

	// Fail the job: the next attempt starts from the first split again.
	h.gw.report(src0, ExecFailed, "boom", nil, nil)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 6) })
	deps, _, _ = h.gw.snapshot()
	if _, _, err := ask(src0); !errors.Is(err, rpcerr.ErrStaleFencingToken) {
		t.Fatalf("split for a stale attempt: %v", err)
	}
	s, done, err := ask(deps[4])
	if err != nil || done || s != splits[0] {
		t.Fatalf("after restart: %v %v %v", s, done, err)
	}
}

func TestCloseSuspendsAndFreesSlots(t *testing.T) {
	h := start(t, wordcount(1, 1), nil)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return deployments(h, 2) })
	h.jm.Close()
	if s := h.jm.Details().State; s != Suspended {
		t.Fatalf("state %s", s)
	}
	if h.pool.held() != 0 {
		t.Fatal("slots still held after Close")
	}
}

func TestCancelWhileRestarting(t *testing.T) {
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Attempts: 1, Delay: time.Hour}
		g.onRunning = func(d control.Deployment) { g.report(d, ExecFailed, "boom", nil, nil) }
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if st := h.jm.Details().State; st != Restarting {
			return fmt.Errorf("job is %s, want RESTARTING", st)
		}
		return nil
	})
	h.jm.Cancel(context.Background())
	h.wait(t, Canceled)
}

func TestRestartFromConfig(t *testing.T) {
	def := RestartStrategy{Attempts: 3, Delay: time.Second}
	tests := []struct {
		conf map[string]string
		want RestartStrategy
		err  string
	}{
		{nil, def, ""},
		{map[string]string{"restart-strategy": "none"}, RestartStrategy{}, ""},
		{map[string]string{"restart-strategy.fixed-delay.attempts": "5", "restart-strategy.fixed-delay.delay": "250ms"}, RestartStrategy{Attempts: 5, Delay: 250 * time.Millisecond}, ""},
		{map[string]string{"restart-strategy": "exponential"}, def, `restart-strategy="exponential": want none, fixed-delay, exponential-delay or failure-rate`},
		{map[string]string{"restart-strategy.fixed-delay.attempts": "-1"}, def, "attempts=\"-1\""},
		{map[string]string{"restart-strategy.fixed-delay.delay": "soon"}, def, "delay=\"soon\""},
	}
	for _, tt := range tests {
		got, err := parseRestart(tt.conf, def)
		if tt.err != "" {
			if !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%v: err %v, want %q", tt.conf, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: %+v %v", tt.conf, got, err)
		}
	}
}
