package jm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/kitex/server"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	dspclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	jmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	rmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	tesvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor/taskexecutor"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcserver/rpcservertest"
	"github.com/sluicehq/sluice/internal/rpcwire"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(rpcservertest.LeakOptions(),
		// wazero's compiled-module cache janitor lives with the process.
		goleak.IgnoreAnyFunction("github.com/tetratelabs/wazero/internal/engine/wazevo.(*engine).cleanup"),
	)...)
}

func logger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

func newStore(t *testing.T) blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startJM(t *testing.T, mod func(*jm.Config)) *jm.Server {
	t.Helper()
	cfg := jm.Config{Blob: newStore(t), Logger: logger(t), SlotRequestTimeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	s, err := jm.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func clients(t *testing.T, addr string) (dspclient.Client, rmclient.Client, jmclient.Client) {
	opts := rpcserver.ClientOptions(addr, rpcserver.ClientConfig{RPCTimeout: 30 * time.Second})
	return dspclient.MustNewClient("dispatcher", opts...), rmclient.MustNewClient("resourcemanager", opts...), jmclient.MustNewClient("jobmaster", opts...)
}

func TestHeartbeatTimeoutOverKitex(t *testing.T) {
	s := startJM(t, func(c *jm.Config) {
		// A timeout far above any pause of a loaded machine between two
		// of the fake TaskManager's heartbeats.
		c.HeartbeatInterval = 20 * time.Millisecond
		c.HeartbeatTimeout = 3 * time.Second
	})
	dc, rc, _ := clients(t, s.Addr())
	ctx := context.Background()
	reg := &resourcemanager.RegisterTaskManagerRequest{ResourceId: "tm-a", RpcAddress: "127.0.0.1:7001", DataAddress: "127.0.0.1:7002", Slots: 3}
	resp, err := rc.RegisterTaskManager(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if resp.HeartbeatIntervalMs != 20 || resp.HeartbeatTimeoutMs != 3000 {
		t.Fatalf("register: %+v", resp)
	}
	// A live TaskManager stays registered past the timeout.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		hb, err := rc.Heartbeat(ctx, &resourcemanager.HeartbeatRequest{ResourceId: "tm-a", RegistrationId: resp.RegistrationId})
		if err != nil || !hb.Known {
			t.Fatalf("heartbeat: %v %v", hb, err)
		}
		time.Sleep(20 * time.Millisecond) // behaviour under test: the fake TaskManager's heartbeat pace
	}
	o, err := dc.Overview(ctx)
	if err != nil || len(o.TaskManagers) != 1 || o.SlotsTotal != 3 || o.TaskManagers[0].GetDataAddress() != "127.0.0.1:7002" {
		t.Fatalf("overview: %+v %v", o, err)
	}
	// Silence: declared dead.
	testutil.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		o, err := dc.Overview(ctx)
		if err != nil {
			return err
		}
		if n := len(o.TaskManagers); n != 0 {
			return fmt.Errorf("%d task managers registered, want the silent one declared dead", n)
		}
		return nil
	})
	hb, err := rc.Heartbeat(ctx, &resourcemanager.HeartbeatRequest{ResourceId: "tm-a", RegistrationId: resp.RegistrationId})
	if err != nil || hb.Known {
		t.Fatalf("heartbeat after death: %+v %v", hb, err)
	}
	if _, err := rc.RegisterTaskManager(ctx, reg); err != nil {
		t.Fatalf("re-register: %v", err)
	}
}

func TestMalformedRegistrationOverKitex(t *testing.T) {
	s := startJM(t, nil)
	dc, rc, _ := clients(t, s.Addr())
	ctx := context.Background()
	for _, r := range []*resourcemanager.RegisterTaskManagerRequest{
		{RpcAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 1},
		{ResourceId: "x", RpcAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 0},
		{ResourceId: "x", RpcAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 100000},
		{ResourceId: "x", RpcAddress: "nowhere", DataAddress: "127.0.0.1:2", Slots: 1},
	} {
		_, err := rc.RegisterTaskManager(ctx, r)
		err = rpcserver.FromCall(err)
		if !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "invalid task manager registration") {
			t.Errorf("%+v: %v", r, err)
		}
	}
	o, _ := dc.Overview(ctx)
	if len(o.TaskManagers) != 0 {
		t.Fatal("a malformed registration was kept")
	}
}

// fakeTE is a TaskExecutor over real Kitex that plays the tasks: each
// reports RUNNING, reads its splits when it heads with a text source, and
// reports FINISHED (the sinks with one record), unless told to hang.
type fakeTE struct {
	t    *testing.T
	hang bool

	mu       sync.Mutex
	deployed []*taskexecutor.TaskDeployment
	canceled map[string]*taskexecutor.CancelTaskRequest
	freed    []string
	splits   []string
	warm     []*taskexecutor.ModuleRef
	wg       sync.WaitGroup
}

func (f *fakeTE) WarmModules(ctx context.Context, req *taskexecutor.WarmModulesRequest) error {
	f.mu.Lock()
	f.warm = append(f.warm, req.Modules...)
	f.mu.Unlock()
	return nil
}

// warmed returns the digests the fake was asked to compile ahead.
// The fake keeps no logs and runs no guests.
func (f *fakeTE) TaskLogs(context.Context, *taskexecutor.TaskLogsRequest) (*common.LogLines, error) {
	return &common.LogLines{}, nil
}

func (f *fakeTE) TaskManagerLogs(context.Context, *taskexecutor.TaskManagerLogsRequest) (*common.LogLines, error) {
	return &common.LogLines{}, nil
}

func (f *fakeTE) SampleStacks(context.Context, *taskexecutor.TaskStacksRequest) (*common.TaskStacks, error) {
	return &common.TaskStacks{}, nil
}

func (f *fakeTE) warmed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.warm {
		out = append(out, m.Tenant+"/"+m.Digest)
	}
	return out
}

func (f *fakeTE) DeployTask(ctx context.Context, d *taskexecutor.TaskDeployment) error {
	chain, err := rpcwire.ChainFromWire(d.Chain)
	if err != nil {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "chain: %v", err))
	}
	f.mu.Lock()
	f.deployed = append(f.deployed, d)
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx := context.Background()
		c := jmclient.MustNewClient("jobmaster", rpcserver.ClientOptions(d.JobmasterAddress, rpcserver.ClientConfig{})...)
		report := func(state string, collected [][]byte) error {
			return rpcserver.FromCall(c.UpdateTaskState(ctx, &jobmaster.TaskStateUpdate{
				Fencing: d.Fencing, ExecutionId: d.ExecutionId, State: state, Collected: collected,
				Accumulators: map[string]int64{"tasks": 1},
			}))
		}
		if err := report("RUNNING", nil); err != nil {
			f.t.Errorf("report RUNNING: %v", err)
			return
		}
		if f.hang {
			return
		}
		if chain[0].Connector == jobgraph.ConnectorText {
			for {
				r, err := c.RequestNextSplit(ctx, &jobmaster.NextSplitRequest{Fencing: d.Fencing, ExecutionId: d.ExecutionId, VertexId: int32(chain[0].ID), Subtask: d.Subtask})
				if err != nil {
					f.t.Errorf("split: %v", rpcserver.FromCall(err))
					return
				}
				if r.Done {
					break
				}
				f.mu.Lock()
				f.splits = append(f.splits, fmt.Sprintf("%s@%d+%d", r.Split.Key, r.Split.Offset, r.Split.Length))
				f.mu.Unlock()
			}
		}
		var rec [][]byte
		if chain[len(chain)-1].Connector == jobgraph.ConnectorCollect {
			rec = [][]byte{fmt.Appendf(nil, "from %d", d.Subtask)}
		}
		if err := report("FINISHED", rec); err != nil {
			f.t.Errorf("report FINISHED: %v", err)
		}
	}()
	return nil
}

func (f *fakeTE) CancelTask(ctx context.Context, req *taskexecutor.CancelTaskRequest) error {
	f.mu.Lock()
	f.canceled[req.ExecutionId] = req
	var addr string
	for _, d := range f.deployed {
		if d.ExecutionId == req.ExecutionId {
			addr = d.JobmasterAddress
		}
	}
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		c := jmclient.MustNewClient("jobmaster", rpcserver.ClientOptions(addr, rpcserver.ClientConfig{})...)
		c.UpdateTaskState(context.Background(), &jobmaster.TaskStateUpdate{Fencing: req.Fencing, ExecutionId: req.ExecutionId, State: "CANCELED"})
	}()
	return nil
}

func (f *fakeTE) TriggerCheckpoint(context.Context, *taskexecutor.TriggerCheckpointRequest) error {
	return nil
}

func (f *fakeTE) NotifyCheckpoint(context.Context, *taskexecutor.NotifyCheckpointRequest) error {
	return nil
}

func (f *fakeTE) FreeSlot(ctx context.Context, alloc string) error {
	f.mu.Lock()
	f.freed = append(f.freed, alloc)
	f.mu.Unlock()
	return nil
}

// startTE runs a fake TaskExecutor and registers it with slots.
func startTE(t *testing.T, jmAddr string, id string, slots int, hang bool) *fakeTE {
	t.Helper()
	f := &fakeTE{t: t, hang: hang, canceled: map[string]*taskexecutor.CancelTaskRequest{}}
	srv, err := rpcserver.Start(context.Background(), rpcserver.Config{Logger: logger(t)},
		func(s server.Server) error { return tesvc.RegisterService(s, f) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); f.wg.Wait() })
	_, rc, _ := clients(t, jmAddr)
	reg, err := rc.RegisterTaskManager(context.Background(), &resourcemanager.RegisterTaskManagerRequest{
		ResourceId: id, RpcAddress: srv.Addr(), DataAddress: "127.0.0.1:9", Slots: int32(slots),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Duration(reg.HeartbeatIntervalMs) * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rc.Heartbeat(context.Background(), &resourcemanager.HeartbeatRequest{ResourceId: id, RegistrationId: reg.RegistrationId})
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return f
}

// graphPlanner plans a fixed graph: text source -> flat_map -> key_by
// =hash=> reduce -> collect sink, with the args as the source's paths.
type graphPlanner struct{ reduceP int }

func (graphPlanner) Validate(ctx context.Context, tenant string, wasm []byte) error { return nil }
func (p graphPlanner) Plan(ctx context.Context, tenant string, wasm []byte, args []string, lim control.TaskLimits) (*jobgraph.Graph, error) {
	paths, _ := json.Marshal(args)
	return &jobgraph.Graph{
		Name: "wc",
		Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": string(paths)}},
			{ID: 2, Name: "split", Kind: jobgraph.KindFlatMap},
			{ID: 3, Name: "word", Kind: jobgraph.KindKeyBy},
			{ID: 4, Name: "count", Kind: jobgraph.KindReduce, Parallelism: p.reduceP},
			{ID: 5, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect, Parallelism: p.reduceP},
		},
		Edges: []jobgraph.Edge{
			{Source: 1, Target: 2, Partitioner: jobgraph.Forward},
			{Source: 2, Target: 3, Partitioner: jobgraph.Forward},
			{Source: 3, Target: 4, Partitioner: jobgraph.Hash},
			{Source: 4, Target: 5, Partitioner: jobgraph.Forward},
		},
	}, nil
}

var fakeWasm = []byte("\x00asm\x01\x00\x00\x00fake")

func TestJobOverKitexFinishesAndCancels(t *testing.T) {
	store := newStore(t)
	s := startJM(t, func(c *jm.Config) {
		c.Blob = store
		c.Planner = graphPlanner{reduceP: 2}
		c.SplitSize = 8
		c.DefaultParallelism = 2
	})
	ctx := context.Background()
	body := "one two three\nfour\n" // 19 bytes: 3 splits of 8
	if err := store.Put(ctx, "tenants/default/in/a.txt", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	te := startTE(t, s.Addr(), "tm-1", 4, false)
	dc, _, _ := clients(t, s.Addr())

	up, err := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"in/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	res, err := dc.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Details.Summary.State; st != "FINISHED" {
		t.Fatalf("state %s: %s", st, res.Details.Failure)
	}
	if len(res.Records) != 2 || res.Accumulators["tasks"] != 4 || res.Details.GetModuleDigest() != up.Digest || res.Details.Summary.Name != "wc" {
		t.Fatalf("result: %+v", res)
	}
	if len(res.Details.Vertices) != 5 || res.Details.Vertices[0].Subtasks[1].TaskManager != "tm-1" {
		t.Fatalf("vertices: %+v", res.Details.Vertices)
	}
	te.mu.Lock()
	splits := strings.Join(te.splits, " ")
	deployed := len(te.deployed)
	te.mu.Unlock()
	if deployed != 4 || len(strings.Fields(splits)) != 3 || !strings.Contains(splits, "tenants/default/in/a.txt@16+3") {
		t.Fatalf("deployed %d, splits %s", deployed, splits)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		o, err := dc.Overview(ctx)
		if err != nil {
			return err
		}
		if o.SlotsFree != 4 || o.JobsByState["FINISHED"] != 1 {
			return fmt.Errorf("%d slots free, jobs by state %v; want 4 free and one FINISHED", o.SlotsFree, o.JobsByState)
		}
		return nil
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		te.mu.Lock()
		defer te.mu.Unlock()
		if len(te.freed) != 2 {
			return fmt.Errorf("the fake task manager was told to free %d slots, want 2", len(te.freed))
		}
		return nil
	})

	list, err := dc.ListJobs(ctx)
	if err != nil || len(list.Jobs) != 1 || list.Jobs[0].JobId != sub.JobId {
		t.Fatalf("list: %+v %v", list, err)
	}
	_, err = dc.GetJob(ctx, "nope")
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrJobNotFound) || err.Error() != `job "nope" not found` {
		t.Fatalf("unknown job: %v", err)
	}
	if err := rpcserver.FromCall(dc.CancelJob(ctx, "nope")); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("cancel unknown job: %v", err)
	}
	_, err = dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"in/"}, Parallelism: 200})
	if err = rpcserver.FromCall(err); !errors.Is(err, jobgraph.ErrInvalidGraph) || !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Fatalf("absurd parallelism: %v", err)
	}
}

// TestTaskManagersAreAskedToCompileRunningModules checks both moments the
// JobManager asks for a compile ahead: a job's start (TaskManagers with a
// free slot) and a TaskManager's registration (the modules of the running
// jobs).
func TestTaskManagersAreAskedToCompileRunningModules(t *testing.T) {
	store := newStore(t)
	s := startJM(t, func(c *jm.Config) { c.Blob = store; c.Planner = graphPlanner{reduceP: 1} })
	ctx := context.Background()
	if err := store.Put(ctx, "tenants/default/in/a.txt", strings.NewReader("a b\n"), 4); err != nil {
		t.Fatal(err)
	}
	startTE(t, s.Addr(), "tm-1", 2, true)
	spare := startTE(t, s.Addr(), "tm-2", 8, true) // keeps free slots whatever the job takes
	dc, _, _ := clients(t, s.Addr())
	up, err := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(err)
	}
	if got := spare.warmed(); len(got) != 0 {
		t.Fatalf("asked to compile %v with no job running", got)
	}
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"in/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	want := "default/" + up.Digest
	asked := func(f *fakeTE) func() error {
		return func() error {
			if got := f.warmed(); !slices.Contains(got, want) {
				return fmt.Errorf("asked to compile %v, want %s", got, want)
			}
			return nil
		}
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, asked(spare))
	late := startTE(t, s.Addr(), "tm-3", 1, true)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, asked(late))
	if err := rpcserver.FromCall(dc.CancelJob(ctx, sub.JobId)); err != nil {
		t.Fatal(err)
	}
}

func TestCancelOverKitex(t *testing.T) {
	s := startJM(t, func(c *jm.Config) { c.Planner = graphPlanner{reduceP: 1}; c.CancelTimeout = 5 * time.Second })
	ctx := context.Background()
	te := startTE(t, s.Addr(), "tm-1", 2, true)
	dc, _, _ := clients(t, s.Addr())
	up, _ := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	// A path that names nothing is refused before any slot is asked for.
	_, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"missing.txt"}})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("missing input: %v", err)
	}
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/default/modules/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		d, err := dc.GetJob(ctx, sub.JobId)
		if err != nil {
			return err
		}
		for _, v := range d.Vertices {
			// Before its slots arrive a job lists no subtasks at all.
			if len(v.Subtasks) == 0 {
				return fmt.Errorf("vertex %s lists no subtasks yet", v.Name)
			}
			for _, st := range v.Subtasks {
				if st.State != "RUNNING" {
					return fmt.Errorf("vertex %s subtask %d is %s, want RUNNING", v.Name, st.Index, st.State)
				}
			}
		}
		return nil
	})
	if err := dc.CancelJob(ctx, sub.JobId); err != nil {
		t.Fatal(err)
	}
	res, err := dc.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000})
	if err != nil || res.Details.Summary.State != "CANCELED" {
		t.Fatalf("%+v %v", res, err)
	}
	te.mu.Lock()
	nc, nd := len(te.canceled), len(te.deployed)
	te.mu.Unlock()
	if nc != nd || nd != 2 {
		t.Fatalf("canceled %d of %d tasks", nc, nd)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		o, err := dc.Overview(ctx)
		if err != nil {
			return err
		}
		te.mu.Lock()
		defer te.mu.Unlock()
		if o.SlotsFree != 2 || len(te.freed) != 1 {
			return fmt.Errorf("%d slots free, %d slot frees sent to the fake task manager; want 2 and 1", o.SlotsFree, len(te.freed))
		}
		return nil
	})
}

func TestNotEnoughSlotsOverKitex(t *testing.T) {
	s := startJM(t, func(c *jm.Config) {
		c.Planner = graphPlanner{reduceP: 3}
		c.SlotRequestTimeout = 100 * time.Millisecond
	})
	ctx := context.Background()
	startTE(t, s.Addr(), "tm-1", 2, false)
	dc, _, _ := clients(t, s.Addr())
	up, _ := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/default/modules/"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dc.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000})
	if err != nil || res.Details.Summary.State != "FAILED" || !strings.Contains(res.Details.Failure, "not enough slots: need 3, free 2") {
		t.Fatalf("%+v %v", res.Details, err)
	}
}

// TestUnreachableTaskManagerGetsNoRestart: a TaskManager that died without
// being declared dead yet (its heartbeat timeout has not passed) refuses
// the deploys; the restart must not get its slots back and spend the
// restart attempts on it, but wait for slots and fail for lack of them.
func TestUnreachableTaskManagerGetsNoRestart(t *testing.T) {
	s := startJM(t, func(c *jm.Config) {
		c.Planner = graphPlanner{reduceP: 4}
		c.HeartbeatTimeout = 5 * time.Second
		c.SlotRequestTimeout = 300 * time.Millisecond
	})
	ctx := context.Background()
	startTE(t, s.Addr(), "tm-live", 2, true)
	// tm-dead registered, then its process went away: nothing listens at
	// its address any more.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := l.Addr().String()
	l.Close()
	dc, rc, _ := clients(t, s.Addr())
	if _, err := rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{
		ResourceId: "tm-dead", RpcAddress: deadAddr, DataAddress: "127.0.0.1:9", Slots: 2,
	}); err != nil {
		t.Fatal(err)
	}
	up, _ := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{
		ModuleDigest: up.Digest, Args_: []string{"tenants/default/modules/"},
		Config: map[string]string{"restart-strategy": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "10ms"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dc.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Details
	if d.Summary.State != "FAILED" || !strings.Contains(d.Failure, "not enough slots: need 4, free 2") || d.Restarts != 1 {
		t.Fatalf("job %s after %d restarts: %s", d.Summary.State, d.Restarts, d.Failure)
	}
}
