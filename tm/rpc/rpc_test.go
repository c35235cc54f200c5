package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/tm/executor"
)

// recorder is an Executor that records what it was asked and returns err.
type recorder struct {
	trig   checkpoint.Trigger
	cpID   int64
	done   bool
	d      control.Deployment
	tok    control.FencingToken
	exec   string
	alloc  string
	err    error
	called bool
	warm   []control.ModuleRef
	logs   control.TaskLogsRequest
	tmLogs control.TaskManagerLogsRequest
	stacks control.TaskStacksRequest
}

func (r *recorder) TaskLogs(_ context.Context, q control.TaskLogsRequest) ([]control.LogLine, error) {
	r.called, r.logs = true, q
	return []control.LogLine{{Source: "e1", Seq: 7, Dropped: 2, Message: "hello\x00"}}, r.err
}

func (r *recorder) TaskManagerLogs(_ context.Context, q control.TaskManagerLogsRequest) ([]control.LogLine, error) {
	r.called, r.tmLogs = true, q
	return nil, r.err
}

func (r *recorder) SampleStacks(_ context.Context, q control.TaskStacksRequest) ([]control.TaskStack, error) {
	r.called, r.stacks = true, q
	return []control.TaskStack{{ExecutionID: "e1", Samples: []control.StackCount{{Frames: []string{"a", "b"}, Count: 3}}, Total: 3}}, r.err
}

func (r *recorder) WarmModules(_ context.Context, refs []control.ModuleRef) error {
	r.called, r.warm = true, refs
	return r.err
}

func (r *recorder) DeployTask(_ context.Context, d control.Deployment) error {
	r.called, r.d = true, d
	return r.err
}

func (r *recorder) CancelTask(_ context.Context, tok control.FencingToken, exec string) error {
	r.called, r.tok, r.exec = true, tok, exec
	return r.err
}

func (r *recorder) FreeSlot(_ context.Context, alloc string) error {
	r.called, r.alloc = true, alloc
	return r.err
}

func (r *recorder) TriggerCheckpoint(_ context.Context, tok control.FencingToken, exec string, t checkpoint.Trigger) error {
	r.called, r.tok, r.exec, r.trig = true, tok, exec, t
	return r.err
}

func (r *recorder) NotifyCheckpoint(_ context.Context, tok control.FencingToken, exec string, id int64, completed bool) error {
	r.called, r.tok, r.exec, r.cpID, r.done = true, tok, exec, id, completed
	return r.err
}

func wireCode(t *testing.T, err error) common.ErrorCode {
	t.Helper()
	var se *common.SluiceError
	if !errors.As(err, &se) {
		t.Fatalf("handler returned %T %v; want *common.SluiceError", err, err)
	}
	return se.GetCode()
}

func TestDeployTaskHandler(t *testing.T) {
	good := func() *taskexecutor.TaskDeployment {
		return &taskexecutor.TaskDeployment{
			Fencing:      &common.FencingToken{LeaderSession: "s", JobId: "j", Attempt: 2},
			ExecutionId:  "j.t0",
			JobId:        "j",
			Tenant:       "default",
			ModuleDigest: "sha256-00",
			Args_:        []string{"--input", "x"},
			Chain: []*taskexecutor.Vertex{
				{Id: 1, Name: "src", Kind: "source", Connector: "text"},
				{Id: 2, Name: "tok", Kind: "flat_map"},
			},
			Subtask:          1,
			Parallelism:      2,
			MaxParallelism:   128,
			Inputs:           []*taskexecutor.InputSpec{{ResultId: "r0", Producers: 2}},
			Outputs:          []*taskexecutor.ChannelSpec{{Partitioner: 1, Targets: []string{"a:1", "b:2"}, ResultId: "r1"}},
			AllocationId:     "alloc",
			JobmasterAddress: "jm:1",
			Config:           map[string]string{"sandbox.clock": "wall", "execution.checkpointing.interval": "1s"},
			Restore: &taskexecutor.TaskRestore{CheckpointId: 7, States: []*common.StateHandle{
				{Key: "tenants/default/jobs/j/checkpoints/00000000000000000007/task-1_2-0.state", Size: 10, KeyGroupStart: 0, KeyGroupEnd: 63},
			}},
		}
	}
	rec := &recorder{}
	h := NewTaskExecutor(rec)
	if err := h.DeployTask(context.Background(), good()); err != nil {
		t.Fatal(err)
	}
	d := rec.d
	if d.Fencing != (control.FencingToken{LeaderSession: "s", JobID: "j", Attempt: 2}) || d.ExecutionID != "j.t0" ||
		len(d.Chain) != 2 || d.Chain[1].Kind != jobgraph.KindFlatMap || d.Subtask != 1 || d.Parallelism != 2 ||
		len(d.Inputs) != 1 || d.Inputs[0].Producers != 2 || len(d.Outputs) != 1 || d.Outputs[0].Partitioner != jobgraph.Hash ||
		len(d.Outputs[0].Targets) != 2 || d.AllocationID != "alloc" || d.JobMasterAddress != "jm:1" || d.Config.Clock != jobconfig.ClockWall || d.Config.Checkpoints.Interval != time.Second ||
		d.Restore == nil || d.Restore.CheckpointID != 7 || len(d.Restore.States) != 1 || d.Restore.States[0].KeyGroupEnd != 63 {
		t.Fatalf("deployment = %+v", d)
	}

	bad := []struct {
		name string
		mod  func(*taskexecutor.TaskDeployment)
		want string
	}{
		{"no fencing", func(r *taskexecutor.TaskDeployment) { r.Fencing = nil }, "no fencing token"},
		{"missing vertex", func(r *taskexecutor.TaskDeployment) { r.Chain[1] = nil }, "chain vertex 2 of 2 is missing"},
		{"unknown partitioner", func(r *taskexecutor.TaskDeployment) { r.Outputs[0].Partitioner = 9 }, "unknown partitioner 9"},
		{"bad config", func(r *taskexecutor.TaskDeployment) { r.Config = map[string]string{"sandbox.clock": "sundial"} }, `sandbox.clock="sundial"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			req := good()
			tt.mod(req)
			err := NewTaskExecutor(rec).DeployTask(context.Background(), req)
			if wireCode(t, err) != common.ErrorCode_INVALID_ARGUMENT || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want INVALID_ARGUMENT with %q", err, tt.want)
			}
			if rec.called {
				t.Error("a malformed deployment reached the executor")
			}
		})
	}

	// Executor errors keep their code on the wire.
	for _, tc := range []struct {
		err  error
		code common.ErrorCode
	}{
		{executor.ErrNoFreeSlot, common.ErrorCode_RESOURCE_EXHAUSTED},
		{executor.ErrStaleFencing, common.ErrorCode_STALE_FENCING_TOKEN},
		{executor.ErrSlotMismatch, common.ErrorCode_FAILED_PRECONDITION},
		{executor.ErrUnavailable, common.ErrorCode_UNAVAILABLE},
	} {
		err := NewTaskExecutor(&recorder{err: tc.err}).DeployTask(context.Background(), good())
		if got := wireCode(t, err); got != tc.code {
			t.Errorf("%v went out as %v; want %v", tc.err, got, tc.code)
		}
		if back := rpcserver.FromWire(err.(*common.SluiceError)); !errors.Is(back, rpcerr.ErrInvalidArgument) && tc.code == common.ErrorCode_INVALID_ARGUMENT {
			t.Errorf("round trip lost the code: %v", back)
		}
	}
}

func TestCancelAndFreeHandlers(t *testing.T) {
	rec := &recorder{}
	h := NewTaskExecutor(rec)
	if err := h.CancelTask(context.Background(), &taskexecutor.CancelTaskRequest{Fencing: &common.FencingToken{JobId: "j", Attempt: 1}, ExecutionId: "x"}); err != nil {
		t.Fatal(err)
	}
	if rec.exec != "x" || rec.tok.Attempt != 1 {
		t.Fatalf("cancel reached the executor as %+v %q", rec.tok, rec.exec)
	}
	if err := h.CancelTask(context.Background(), &taskexecutor.CancelTaskRequest{ExecutionId: "x"}); wireCode(t, err) != common.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("cancel without a token: %v", err)
	}
	if err := h.FreeSlot(context.Background(), "a"); err != nil || rec.alloc != "a" {
		t.Fatalf("FreeSlot: %v %q", err, rec.alloc)
	}
	if err := h.FreeSlot(context.Background(), ""); wireCode(t, err) != common.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("FreeSlot(\"\"): %v", err)
	}
}

func TestCheckpointHandlers(t *testing.T) {
	rec := &recorder{}
	h := NewTaskExecutor(rec)
	tok := &common.FencingToken{JobId: "j", Attempt: 3}
	if err := h.TriggerCheckpoint(context.Background(), &taskexecutor.TriggerCheckpointRequest{
		Fencing: tok, ExecutionId: "x", CheckpointId: 5, TimestampMs: 99, Savepoint: true, Stop: true,
	}); err != nil {
		t.Fatal(err)
	}
	if rec.exec != "x" || rec.tok.Attempt != 3 || rec.trig != (checkpoint.Trigger{ID: 5, TimestampMs: 99, Savepoint: true, Stop: true}) {
		t.Fatalf("trigger reached the executor as %+v %q %+v", rec.tok, rec.exec, rec.trig)
	}
	if err := h.NotifyCheckpoint(context.Background(), &taskexecutor.NotifyCheckpointRequest{Fencing: tok, ExecutionId: "x", CheckpointId: 5, Completed: true}); err != nil {
		t.Fatal(err)
	}
	if rec.cpID != 5 || !rec.done {
		t.Fatalf("notify reached the executor as %d %v", rec.cpID, rec.done)
	}
	for _, req := range []*taskexecutor.TriggerCheckpointRequest{
		{ExecutionId: "x", CheckpointId: 1},
		{Fencing: tok, CheckpointId: 1},
		{Fencing: tok, ExecutionId: "x", CheckpointId: 0},
	} {
		rec.called = false
		if err := h.TriggerCheckpoint(context.Background(), req); wireCode(t, err) != common.ErrorCode_INVALID_ARGUMENT || rec.called {
			t.Errorf("trigger %+v: %v (reached the executor: %v)", req, err, rec.called)
		}
	}
	rec.err = executor.ErrStaleFencing
	if err := h.NotifyCheckpoint(context.Background(), &taskexecutor.NotifyCheckpointRequest{Fencing: tok, ExecutionId: "x", CheckpointId: 5}); wireCode(t, err) != common.ErrorCode_STALE_FENCING_TOKEN {
		t.Errorf("stale notify: %v", err)
	}
}

func TestRejectedClassification(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpcerr.Errorf(rpcerr.ErrStaleFencingToken, "old"), true},
		{rpcerr.Errorf(rpcerr.ErrNotFound, "no such execution"), true},
		{rpcerr.Errorf(rpcerr.ErrInvalidArgument, "bad"), true},
		{rpcerr.Errorf(rpcerr.ErrUnavailable, "refused"), false},
		{rpcerr.Errorf(rpcerr.ErrDeadlineExceeded, "slow"), false},
	} {
		if got := errors.Is(rejected(tc.err), executor.ErrRejected); got != tc.want {
			t.Errorf("rejected(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

func TestWarmModulesEndpoint(t *testing.T) {
	rec := &recorder{}
	h := NewTaskExecutor(rec)
	req := &taskexecutor.WarmModulesRequest{Modules: []*taskexecutor.ModuleRef{{Tenant: "a", Digest: "sha256-1"}, {Tenant: "b", Digest: "sha256-2"}}}
	if err := h.WarmModules(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(rec.warm) != 2 || rec.warm[0] != (control.ModuleRef{Tenant: "a", Digest: "sha256-1"}) || rec.warm[1].Tenant != "b" {
		t.Fatalf("executor got %+v", rec.warm)
	}
	for name, req := range map[string]*taskexecutor.WarmModulesRequest{
		"no tenant":  {Modules: []*taskexecutor.ModuleRef{{Digest: "sha256-1"}}},
		"nil module": {Modules: []*taskexecutor.ModuleRef{nil}},
		"too many":   {Modules: make([]*taskexecutor.ModuleRef, 65)},
	} {
		rec := &recorder{}
		err := NewTaskExecutor(rec).WarmModules(context.Background(), req)
		if wireCode(t, err) != common.ErrorCode_INVALID_ARGUMENT || rec.called {
			t.Errorf("%s: err = %v, executor called %v; want INVALID_ARGUMENT, not called", name, err, rec.called)
		}
	}
}

func TestObserveEndpoints(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	h := NewTaskExecutor(rec)
	got, err := h.TaskLogs(ctx, &taskexecutor.TaskLogsRequest{JobId: "j", Tenant: "acme", Task: "map", After: map[string]int64{"e1": 6, "bad": -1}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if q := rec.logs; q.JobID != "j" || q.Tenant != "acme" || q.Query.Task != "map" || q.Query.After["e1"] != 6 || q.Query.After["bad"] != 0 || q.Query.Limit != 5 {
		t.Fatalf("executor got %+v", q)
	}
	if l := got.GetLines(); len(l) != 1 || l[0].Seq != 7 || l[0].Dropped != 2 || l[0].Message != "hello\x00" {
		t.Fatalf("answer %+v", l)
	}
	if _, err := h.TaskManagerLogs(ctx, &taskexecutor.TaskManagerLogsRequest{Tenant: "acme", After: 9}); err != nil || rec.tmLogs.Tenant != "acme" || rec.tmLogs.All || rec.tmLogs.After != 9 {
		t.Fatalf("task manager logs: %v, %+v", err, rec.tmLogs)
	}
	st, err := h.SampleStacks(ctx, &taskexecutor.TaskStacksRequest{JobId: "j", Tenant: "acme", DurationMs: 1500, IntervalMs: 5})
	if err != nil || rec.stacks.Query.Duration != 1500*time.Millisecond || rec.stacks.Query.Interval != 5*time.Millisecond {
		t.Fatalf("stacks: %v, %+v", err, rec.stacks)
	}
	if ts := st.GetTasks(); len(ts) != 1 || ts[0].Total != 3 || len(ts[0].Samples) != 1 || ts[0].Samples[0].Frames[1] != "b" {
		t.Fatalf("stacks answer %+v", ts)
	}

	// Without the cluster secret nothing is read.
	secret, err := auth.NewSecret([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	rec = &recorder{}
	h = NewTaskExecutor(rec).WithSecret(secret)
	_, err1 := h.TaskLogs(ctx, &taskexecutor.TaskLogsRequest{JobId: "j", Tenant: "acme"})
	_, err2 := h.TaskManagerLogs(ctx, &taskexecutor.TaskManagerLogsRequest{All: true})
	_, err3 := h.SampleStacks(ctx, &taskexecutor.TaskStacksRequest{JobId: "j", Tenant: "acme"})
	for _, err := range []error{err1, err2, err3} {
		if wireCode(t, err) != common.ErrorCode_UNAUTHENTICATED {
			t.Errorf("without the secret: %v", err)
		}
	}
	if rec.called {
		t.Error("the executor was called without the secret")
	}
}
