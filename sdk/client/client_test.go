package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudwego/kitex/server"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	dispsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/sdk/client"
)

// fakeDispatcher answers from a table of jobs; a job reaches its final
// state after finishAfter polls.
type fakeDispatcher struct {
	mu          sync.Mutex
	polls       atomic.Int32
	finishAfter int32
	lastWaitMs  int64
	hang        time.Duration
}

var _ dispatcher.Dispatcher = (*fakeDispatcher)(nil)

func (f *fakeDispatcher) UploadModule(_ context.Context, req *dispatcher.UploadModuleRequest) (*dispatcher.UploadModuleResponse, error) {
	if len(req.Module) < 4 || string(req.Module[:4]) != "\x00asm" {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidModule, "invalid module: not WebAssembly (no \\0asm header)"))
	}
	return &dispatcher.UploadModuleResponse{Digest: "sha256-abc", Size: int64(len(req.Module))}, nil
}

func (f *fakeDispatcher) SubmitJob(_ context.Context, req *dispatcher.SubmitJobRequest) (*dispatcher.SubmitJobResponse, error) {
	if req.Parallelism > 100 {
		return nil, rpcserver.ToWire(rpcerr.NotEnoughSlots(int(req.Parallelism), 8))
	}
	return &dispatcher.SubmitJobResponse{JobId: "job-1"}, nil
}

func (f *fakeDispatcher) ListJobs(context.Context) (*dispatcher.ListJobsResponse, error) {
	return &dispatcher.ListJobsResponse{Jobs: []*dispatcher.JobSummary{{JobId: "job-1", Name: "wc", State: "RUNNING", StartTimeMs: 1000}}}, nil
}

func (f *fakeDispatcher) GetJob(_ context.Context, id string) (*dispatcher.JobDetails, error) {
	if id != "job-1" {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", id))
	}
	if f.hang > 0 {
		time.Sleep(f.hang) // behaviour under test: a server that hangs past the call timeout
	}
	d := f.details("FINISHED")
	d.Restarts = 1
	d.Accumulators = map[string]int64{"violations": 0}
	d.History = []*dispatcher.FailureRecord{{TimeMs: 1500, Cause: "task manager lost"}}
	return d, nil
}

func (f *fakeDispatcher) details(state string) *dispatcher.JobDetails {
	return &dispatcher.JobDetails{
		Summary: &dispatcher.JobSummary{JobId: "job-1", State: state, StartTimeMs: 1000},
		Vertices: []*dispatcher.VertexStatus{{Id: 1, Name: "src", Parallelism: 2, Subtasks: []*dispatcher.SubtaskStatus{
			{Index: 0, State: state, TaskManager: "tm-a"}, {Index: 1, State: state, TaskManager: "tm-b"},
		}}},
	}
}

func (f *fakeDispatcher) CancelJob(context.Context, string) error { return nil }

func (f *fakeDispatcher) WaitJob(_ context.Context, req *dispatcher.WaitJobRequest) (*dispatcher.JobResult_, error) {
	f.mu.Lock()
	f.lastWaitMs = req.TimeoutMs
	f.mu.Unlock()
	n := f.polls.Add(1)
	if n < f.finishAfter {
		return &dispatcher.JobResult_{Details: f.details("RUNNING")}, nil
	}
	return &dispatcher.JobResult_{
		Details:      f.details("FINISHED"),
		Records:      [][]byte{[]byte("a\t1"), []byte("b\t2")},
		Accumulators: map[string]int64{"lines": 2},
		DurationMs:   1500,
	}, nil
}

func (f *fakeDispatcher) Overview(context.Context) (*dispatcher.ClusterOverview, error) {
	return &dispatcher.ClusterOverview{
		TaskManagers: []*dispatcher.TaskManagerInfo{{ResourceId: "tm-a", Address: "127.0.0.1:1", SlotsTotal: 4, SlotsFree: 3}},
		SlotsTotal:   4, SlotsFree: 3, JobsByState: map[string]int32{"RUNNING": 1},
	}, nil
}

func (f *fakeDispatcher) TriggerSavepoint(_ context.Context, req *dispatcher.SavepointRequest) (*dispatcher.CheckpointInfo, error) {
	if req.JobId != "job-1" {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", req.JobId))
	}
	return &dispatcher.CheckpointInfo{Id: 4, Savepoint: true, SavepointId: "sp-1", Status: "COMPLETED", TriggeredMs: 2000, DurationMs: 30, Size: 99, Location: "tenants/default/savepoints/sp-1/"}, nil
}

func (f *fakeDispatcher) ListCheckpoints(_ context.Context, id string) (*dispatcher.ListCheckpointsResponse, error) {
	return &dispatcher.ListCheckpointsResponse{Checkpoints: []*dispatcher.CheckpointInfo{
		{Id: 2, Status: "ABORTED", Reason: "declined"}, {Id: 1, Status: "COMPLETED", Size: 10, Retained: ptr(true)},
	}}, nil
}

func (f *fakeDispatcher) DisposeSavepoint(_ context.Context, id string) error {
	if id != "sp-1" {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrNotFound, "savepoint %q not found", id))
	}
	return nil
}

// GetLogs answers two lines of source "e1" after the cursor's seq.
func (f *fakeDispatcher) GetLogs(_ context.Context, req *dispatcher.JobLogsRequest) (*common.LogLines, error) {
	if req.JobId != "job-1" {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", req.JobId))
	}
	n := req.After["e1"]
	return &common.LogLines{Lines: []*common.LogLine{
		{Source: "e1", Seq: n + 1, Dropped: 3, TimeMs: 5000, Level: "INFO", Message: "one", Task: req.Task},
		{Source: "e1", Seq: n + 2, TimeMs: 5001, Level: "WARN", Message: "two", Attrs: "k=v"},
	}}, nil
}

func (f *fakeDispatcher) GetTaskManagerLogs(_ context.Context, req *dispatcher.TaskManagerLogsQuery) (*common.LogLines, error) {
	return &common.LogLines{Lines: []*common.LogLine{{Seq: req.After + 1, TaskManager: req.TaskManagerId, Message: "tm"}}}, nil
}

func (f *fakeDispatcher) GetStacks(_ context.Context, req *dispatcher.JobStacksRequest) (*common.TaskStacks, error) {
	return &common.TaskStacks{Tasks: []*common.TaskStack{
		{ExecutionId: "e1", Task: "map", Total: 5, Samples: []*common.StackCount{{Frames: []string{"main", "hot fn"}, Count: 4}, {Frames: []string{"main"}, Count: 1}}},
		{ExecutionId: "e2", Task: "map", Subtask: 1, Total: 2, Samples: []*common.StackCount{{Frames: []string{"main", "hot fn"}, Count: int64(req.DurationMs / 1000)}}},
	}}, nil
}

func TestLogsAndStacks(t *testing.T) {
	c, err := client.New(start(t, &fakeDispatcher{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lines, err := c.Logs(ctx, "job-1", client.LogQuery{Task: "map", After: map[string]uint64{"e1": 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0].Seq != 11 || lines[0].Dropped != 3 || lines[0].Task != "map" || lines[1].Attrs != "k=v" || !lines[1].Time.Equal(time.UnixMilli(5001)) {
		t.Fatalf("lines %+v", lines)
	}
	if _, err := c.Logs(ctx, "nope", client.LogQuery{}); !errors.Is(err, client.ErrJobNotFound) {
		t.Fatalf("logs of an unknown job: %v", err)
	}
	if tl, err := c.TaskManagerLogs(ctx, "tm-1", 4, 0); err != nil || len(tl) != 1 || tl[0].Seq != 5 || tl[0].TaskManager != "tm-1" {
		t.Fatalf("task manager logs %+v, %v", tl, err)
	}
	ts, err := c.Stacks(ctx, "job-1", client.StackQuery{Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Samples[0].Frames[1] != "hot fn" || ts[1].Samples[0].Count != 2 {
		t.Fatalf("stacks %+v", ts)
	}
	got := client.FoldedStacks(ts)
	want := []string{"main 1", "main;hot_fn 6"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("folded %q, want %q", got, want)
	}
}

func start(t *testing.T, f *fakeDispatcher) string {
	t.Helper()
	srv, err := rpcserver.Start(context.Background(), rpcserver.Config{Addr: "127.0.0.1:0"},
		func(s server.Server) error { return dispsvc.RegisterService(s, f) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr()
}

func TestClientCalls(t *testing.T) {
	f := &fakeDispatcher{finishAfter: 3}
	c, err := client.New(start(t, f), client.WithPollInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if d, err := c.UploadModule(ctx, []byte("\x00asm\x01\x00\x00\x00")); err != nil || d != "sha256-abc" {
		t.Fatalf("UploadModule = %q, %v", d, err)
	}
	_, err = c.UploadModule(ctx, []byte("not wasm"))
	if !errors.Is(err, client.ErrInvalidModule) || !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("UploadModule(not wasm) = %v; want ErrInvalidModule and ErrInvalidArgument", err)
	}
	if id, err := c.SubmitJob(ctx, client.JobSpec{ModuleDigest: "sha256-abc", Parallelism: 2}); err != nil || id != "job-1" {
		t.Fatalf("SubmitJob = %q, %v", id, err)
	}
	_, err = c.SubmitJob(ctx, client.JobSpec{ModuleDigest: "sha256-abc", Parallelism: 1000})
	if !errors.Is(err, client.ErrNotEnoughSlots) || !errors.Is(err, client.ErrResourceExhausted) {
		t.Fatalf("SubmitJob(p=1000) = %v; want ErrNotEnoughSlots", err)
	}
	jobs, err := c.ListJobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "job-1" || jobs[0].Start.UnixMilli() != 1000 || !jobs[0].End.IsZero() {
		t.Fatalf("ListJobs = %+v, %v", jobs, err)
	}
	_, err = c.GetJob(ctx, "nope")
	if !errors.Is(err, client.ErrJobNotFound) || !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetJob(nope) = %v; want ErrJobNotFound", err)
	}
	d, err := c.GetJob(ctx, "job-1")
	if err != nil || len(d.Vertices) != 1 || len(d.Vertices[0].Subtasks) != 2 || d.Vertices[0].Subtasks[1].TaskManager != "tm-b" {
		t.Fatalf("GetJob = %+v, %v", d, err)
	}
	if v, ok := d.Accumulators["violations"]; !ok || v != 0 || len(d.History) != 1 || d.History[0].Cause != "task manager lost" || d.History[0].Time.UnixMilli() != 1500 {
		t.Fatalf("GetJob accumulators %v history %+v", d.Accumulators, d.History)
	}
	if err := c.CancelJob(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	ov, err := c.Overview(ctx)
	if err != nil || ov.SlotsTotal != 4 || ov.SlotsFree != 3 || ov.JobsByState["RUNNING"] != 1 || ov.TaskManagers[0].ResourceID != "tm-a" {
		t.Fatalf("Overview = %+v, %v", ov, err)
	}

	sp, err := c.TriggerSavepoint(ctx, "job-1", true, time.Minute)
	if err != nil || sp.SavepointID != "sp-1" || !sp.Savepoint || sp.Duration != 30*time.Millisecond || sp.Triggered.UnixMilli() != 2000 || sp.Size != 99 {
		t.Fatalf("TriggerSavepoint = %+v, %v", sp, err)
	}
	if _, err := c.TriggerSavepoint(ctx, "nope", false, 0); !errors.Is(err, client.ErrJobNotFound) {
		t.Fatalf("TriggerSavepoint(nope) = %v; want ErrJobNotFound", err)
	}
	cps, err := c.ListCheckpoints(ctx, "job-1")
	if err != nil || len(cps) != 2 || cps[0].Reason != "declined" || cps[1].Size != 10 || cps[0].Retained || !cps[1].Retained {
		t.Fatalf("ListCheckpoints = %+v, %v", cps, err)
	}
	if err := c.DisposeSavepoint(ctx, "sp-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DisposeSavepoint(ctx, "sp-2"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("DisposeSavepoint(sp-2) = %v; want ErrNotFound", err)
	}

	r, err := c.WaitJob(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateFinished || len(r.Records) != 2 || r.Accumulators["lines"] != 2 || r.Duration != 1500*time.Millisecond {
		t.Fatalf("WaitJob = %+v", r)
	}
	if n := f.polls.Load(); n != 3 {
		t.Errorf("WaitJob polled %d times; want 3 (it long-polls until FINISHED)", n)
	}
	if f.lastWaitMs != 50 {
		t.Errorf("server-side wait = %dms; want the poll interval 50ms", f.lastWaitMs)
	}
}

func TestClientTimeoutAndUnavailable(t *testing.T) {
	f := &fakeDispatcher{hang: 2 * time.Second}
	c, err := client.New(start(t, f), client.WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.GetJob(context.Background(), "job-1")
	if !errors.Is(err, client.ErrDeadlineExceeded) {
		t.Fatalf("GetJob on a hung server = %v; want ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timed out after %v; want about 200ms", d)
	}

	// Nobody listens on this address.
	c2, err := client.New("127.0.0.1:1", client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.ListJobs(context.Background()); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("ListJobs on a closed port = %v; want ErrUnavailable", err)
	}
	// WaitJob keeps retrying an unreachable JobManager until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c2.WaitJob(ctx, "job-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitJob on a closed port = %v; want the context's deadline", err)
	}
}

func TestNewWithoutAddress(t *testing.T) {
	if _, err := client.New(""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("New(\"\") = %v; want ErrInvalidArgument", err)
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Kitex keeps process-wide goroutines (timeout worker pool, shared
		// tickers, load-balancer cache watchers, netpoll pollers) that no
		// Close ends; everything else a test starts must be gone.
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/client.(*timeoutPool).createWorker.func1"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/client.(*timeoutPool).createTicker.func1"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/pkg/loadbalance/lbcache.(*BalancerFactory).watcher"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/pkg/utils.(*SharedTicker).Tick"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
		goleak.IgnoreAnyFunction("github.com/bytedance/gopkg/util/gopool.(*worker).run.func1"),
	)
}

func ptr[T any](v T) *T { return &v }

// TestClientFollowsTheLeader: a client that finds its JobManager gone asks
// the lookup where the leader is now; the failed call says unavailable,
// and the calls after it (WaitJob's retries among them) reach the leader.
func TestClientFollowsTheLeader(t *testing.T) {
	leader := start(t, &fakeDispatcher{})
	var lookups atomic.Int32
	c, err := client.New("127.0.0.1:1", client.WithTimeout(time.Second), client.WithLeaderLookup(func(ctx context.Context) (string, error) {
		if lookups.Add(1) == 1 {
			return "", errors.New("no leader yet")
		}
		return leader, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListJobs(context.Background()); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("ListJobs at a dead JobManager = %v; want ErrUnavailable", err)
	}
	if c.Addr() != "127.0.0.1:1" {
		t.Fatalf("after a failed lookup the client calls %s; want the old address kept", c.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.WaitJob(ctx, "job-1")
	if err != nil || r.State != client.StateFinished {
		t.Fatalf("WaitJob after the leader moved: %+v, %v", r, err)
	}
	if c.Addr() != leader || lookups.Load() != 2 {
		t.Fatalf("client calls %s after %d lookups; want %s after 2", c.Addr(), lookups.Load(), leader)
	}
}
