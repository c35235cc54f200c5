package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeJMs records task state updates and checkpoint answers; reject makes
// it answer ErrRejected.
type fakeJMs struct {
	mu       sync.Mutex
	updates  map[string][]control.TaskUpdate
	reject   bool
	fail     int // fail this many updates with a retryable error first
	acks     []checkpoint.Ack
	declines []checkpoint.Decline
	fencing  []control.FencingToken // of each ack and decline
	events   []string               // "<exec> <STATE>", "<exec> ack <n>", "<exec> decline <n>", in arrival order
	// splits, when set, hands out the splits sent on it; closing it means
	// no more splits.
	splits    chan checkpoint.Split
	nextCalls atomic.Int32
}

func (f *fakeJMs) UpdateTaskState(_ context.Context, _ string, u control.TaskUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return rpcerr.Errorf(rpcerr.ErrUnavailable, "rpc: connection refused")
	}
	if f.reject {
		return fmt.Errorf("%w: %w", ErrRejected, rpcerr.Errorf(rpcerr.ErrStaleFencingToken, "stale"))
	}
	if f.updates == nil {
		f.updates = map[string][]control.TaskUpdate{}
	}
	f.updates[u.ExecutionID] = append(f.updates[u.ExecutionID], u)
	f.events = append(f.events, u.ExecutionID+" "+u.State)
	return nil
}

func (f *fakeJMs) NextSplit(ctx context.Context, _ string, _ control.SplitRequest) (checkpoint.Split, bool, error) {
	f.nextCalls.Add(1)
	if f.splits == nil {
		return checkpoint.Split{}, true, nil
	}
	select {
	case sp, ok := <-f.splits:
		return sp, !ok, nil
	case <-ctx.Done():
		return checkpoint.Split{}, false, ctx.Err()
	}
}

func (f *fakeJMs) AcknowledgeCheckpoint(_ context.Context, _ string, tok control.FencingToken, a checkpoint.Ack) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, a)
	f.fencing = append(f.fencing, tok)
	f.events = append(f.events, fmt.Sprintf("%s ack %d", a.ExecutionID, a.CheckpointID))
	return nil
}

func (f *fakeJMs) DeclineCheckpoint(_ context.Context, _ string, tok control.FencingToken, d checkpoint.Decline) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.declines = append(f.declines, d)
	f.fencing = append(f.fencing, tok)
	f.events = append(f.events, fmt.Sprintf("%s decline %d", d.ExecutionID, d.CheckpointID))
	return nil
}

func (f *fakeJMs) eventLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func (f *fakeJMs) states(exec string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, u := range f.updates[exec] {
		out = append(out, u.State)
	}
	return out
}

// ended says whether task exec reported a terminal state.
func (f *fakeJMs) ended(exec string) error {
	if _, ok := f.final(exec); !ok {
		return fmt.Errorf("task %s reported %v, want a terminal state last", exec, f.states(exec))
	}
	return nil
}

func (f *fakeJMs) final(exec string) (control.TaskUpdate, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	us := f.updates[exec]
	if len(us) == 0 {
		return control.TaskUpdate{}, false
	}
	u := us[len(us)-1]
	switch u.State {
	case control.TaskFinished, control.TaskFailed, control.TaskCanceled:
		return u, true
	}
	return control.TaskUpdate{}, false
}

func newExecutor(t *testing.T, slots int, jms JobMasters) *Executor {
	t.Helper()
	store, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Slots: slots, Blob: store, JobMasters: jms, Logger: slog.New(slog.DiscardHandler), ReportTimeout: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
		store.Close()
	})
	return e
}

// deployment of a task whose module does not exist: it ends FAILED at once,
// which is all the slot-table tests need.
func deployment(job, exec, alloc string, attempt int64) control.Deployment {
	return control.Deployment{
		Fencing:          control.FencingToken{LeaderSession: "s1", JobID: job, Attempt: attempt},
		ExecutionID:      exec,
		JobID:            job,
		Tenant:           "default",
		ModuleDigest:     "sha256-" + fmt.Sprintf("%064d", 0),
		Chain:            []jobgraph.Vertex{{ID: 1, Name: "src", Kind: jobgraph.KindSource}},
		Subtask:          0,
		Parallelism:      1,
		MaxParallelism:   128,
		AllocationID:     alloc,
		JobMasterAddress: "jm:1",
	}
}

func TestDeployValidates(t *testing.T) {
	e := newExecutor(t, 1, &fakeJMs{})
	tests := []struct {
		name string
		mod  func(*control.Deployment)
		want string
	}{
		{"no execution id", func(d *control.Deployment) { d.ExecutionID = "" }, "no execution id"},
		{"no allocation", func(d *control.Deployment) { d.AllocationID = "" }, "no allocation id"},
		{"token for another job", func(d *control.Deployment) { d.Fencing.JobID = "other" }, "fencing token is for job"},
		{"empty chain", func(d *control.Deployment) { d.Chain = nil }, "empty operator chain"},
		{"subtask out of range", func(d *control.Deployment) { d.Subtask = 3 }, "subtask 3 of parallelism 1"},
		{"no jobmaster", func(d *control.Deployment) { d.JobMasterAddress = "" }, "no jobmaster address"},
		{"foreign restore", func(d *control.Deployment) {
			d.Restore = &checkpoint.TaskRestore{CheckpointID: 7, States: []checkpoint.StateHandle{
				{Key: "tenants/other/jobs/j/checkpoints/00000000000000000007/task-1_2-0.state", KeyGroupEnd: 63},
			}}
		}, "is not a state object of tenant"},
		{"inverted key groups", func(d *control.Deployment) {
			d.Restore = &checkpoint.TaskRestore{CheckpointID: 7, States: []checkpoint.StateHandle{
				{Key: "tenants/" + d.Tenant + "/jobs/j/checkpoints/00000000000000000007/task-1_2-0.state", KeyGroupStart: 9, KeyGroupEnd: 3},
			}}
		}, "key groups 9..3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deployment("j", "x", "a", 0)
			tt.mod(&d)
			err := e.DeployTask(context.Background(), d)
			if !errors.Is(err, ErrInvalidDeployment) || !errors.Is(err, rpcerr.ErrInvalidArgument) {
				t.Fatalf("err = %v; want ErrInvalidDeployment", err)
			}
			if !contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want it to mention %q", err, tt.want)
			}
			if r := e.SlotReport(); r[0].AllocationID != "" {
				t.Errorf("a rejected deployment took a slot: %+v", r)
			}
		})
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || (len(s) >= len(sub) && index(s, sub) >= 0) }

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestSlotTable(t *testing.T) {
	jms := &fakeJMs{}
	e := newExecutor(t, 2, jms)
	ctx := context.Background()

	// Two tasks of one job share allocation a1 (slot sharing).
	if err := e.DeployTask(ctx, deployment("j1", "j1.t0", "a1", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.DeployTask(ctx, deployment("j1", "j1.t1", "a1", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.DeployTask(ctx, deployment("j2", "j2.t0", "a2", 0)); err != nil {
		t.Fatal(err)
	}
	rep := e.SlotReport()
	if rep[0].AllocationID != "a1" || rep[0].JobID != "j1" || rep[1].AllocationID != "a2" || rep[1].JobID != "j2" {
		t.Fatalf("slot report = %+v", rep)
	}
	// No third slot.
	if err := e.DeployTask(ctx, deployment("j3", "j3.t0", "a3", 0)); !errors.Is(err, ErrNoFreeSlot) || !errors.Is(err, rpcerr.ErrResourceExhausted) {
		t.Fatalf("deploy into a full task manager: %v; want ErrNoFreeSlot", err)
	}
	// An allocation belongs to one job.
	if err := e.DeployTask(ctx, deployment("j3", "j3.t0", "a1", 0)); !errors.Is(err, ErrSlotMismatch) {
		t.Fatalf("deploy of another job into a1: %v; want ErrSlotMismatch", err)
	}

	// Every task reports DEPLOYING first and one terminal state last.
	for _, ex := range []string{"j1.t0", "j1.t1", "j2.t0"} {
		testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended(ex) })
		st := jms.states(ex)
		if st[0] != control.TaskDeploying {
			t.Errorf("%s reported %v; want DEPLOYING first", ex, st)
		}
	}
	// Tasks that ended keep their slot until the JobMaster frees it.
	if rep := e.SlotReport(); rep[0].AllocationID != "a1" {
		t.Fatalf("slot freed before FreeSlot: %+v", rep)
	}
	if err := e.FreeSlot(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := e.FreeSlot(ctx, "a1"); err != nil {
		t.Fatalf("freeing twice: %v; want nil (idempotent)", err)
	}
	if rep := e.SlotReport(); rep[0].AllocationID != "" || rep[1].AllocationID != "a2" {
		t.Fatalf("after FreeSlot(a1): %+v", rep)
	}
	if err := e.DeployTask(ctx, deployment("j3", "j3.t0", "a3", 0)); err != nil {
		t.Fatalf("deploy into the freed slot: %v", err)
	}
}

func TestFencing(t *testing.T) {
	e := newExecutor(t, 2, &fakeJMs{})
	ctx := context.Background()
	if err := e.DeployTask(ctx, deployment("j", "j.a1", "a", 1)); err != nil {
		t.Fatal(err)
	}
	// An older attempt of the job may no longer deploy or cancel.
	if err := e.DeployTask(ctx, deployment("j", "j.a0", "a", 0)); !errors.Is(err, ErrStaleFencing) || !errors.Is(err, rpcerr.ErrStaleFencingToken) {
		t.Fatalf("deploy with attempt 0 after 1: %v; want ErrStaleFencing", err)
	}
	// A newer attempt is accepted.
	if err := e.DeployTask(ctx, deployment("j", "j.a2", "a", 2)); err != nil {
		t.Fatal(err)
	}
	// A new leader session resets the attempt count.
	d := deployment("j", "j.b0", "a", 0)
	d.Fencing.LeaderSession = "s2"
	if err := e.DeployTask(ctx, d); err != nil {
		t.Fatalf("deploy from a new leader session: %v", err)
	}
	// Cancel with a token for another job is refused if the task runs;
	// unknown executions are fine.
	if err := e.CancelTask(ctx, control.FencingToken{LeaderSession: "s2", JobID: "j"}, "nope"); err != nil {
		t.Fatalf("cancel of an unknown execution: %v", err)
	}
}

func TestReporterRetriesAndRejection(t *testing.T) {
	jms := &fakeJMs{fail: 3}
	e := newExecutor(t, 1, jms)
	if err := e.DeployTask(context.Background(), deployment("j", "j.t", "a", 0)); err != nil {
		t.Fatal(err)
	}
	// Three refused connections later the updates still arrive, in order.
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended("j.t") })
	if st := jms.states("j.t"); st[0] != control.TaskDeploying {
		t.Fatalf("states = %v", st)
	}
}

func TestDescribeGuestError(t *testing.T) {
	if got := Describe(errors.New("plain")); got != "plain" {
		t.Fatalf("Describe = %q", got)
	}
}

// fakeRM counts registrations and heartbeats; known and fail steer it.
type fakeRM struct {
	registrations atomic.Int32
	heartbeats    atomic.Int32
	known         atomic.Bool
	failRegister  atomic.Int32 // fail this many registrations first
	failBeats     atomic.Bool
	lastReport    atomic.Value // []control.SlotStatus
	lastTasks     atomic.Value // []control.ExecutionMetrics of the last heartbeat
}

func (f *fakeRM) Register(_ context.Context, r control.Registration) (control.Registered, error) {
	if f.failRegister.Load() > 0 {
		f.failRegister.Add(-1)
		return control.Registered{}, rpcerr.Errorf(rpcerr.ErrUnavailable, "rpc: connection refused")
	}
	n := f.registrations.Add(1)
	f.known.Store(true)
	f.lastReport.Store(r.SlotReport)
	return control.Registered{RegistrationID: fmt.Sprint("r", n), HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: 200 * time.Millisecond}, nil
}

// registered says whether the TaskManager registered want times so far.
func (f *fakeRM) registered(want int32) error {
	if n := f.registrations.Load(); n != want {
		return fmt.Errorf("%d registrations, want %d", n, want)
	}
	return nil
}

func (f *fakeRM) Heartbeat(_ context.Context, h control.Heartbeat) (bool, error) {
	f.heartbeats.Add(1)
	f.lastTasks.Store(h.Tasks)
	if f.failBeats.Load() {
		return false, rpcerr.Errorf(rpcerr.ErrUnavailable, "rpc: connection refused")
	}
	return f.known.Load(), nil
}

func runRegistration(t *testing.T, e *Executor, rm ResourceManager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.RunRegistration(ctx, rm, control.Registration{ResourceID: "tm1", RPCAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 2})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestRegistrationRetriesAndReregisters(t *testing.T) {
	e := newExecutor(t, 2, &fakeJMs{})
	rm := &fakeRM{}
	rm.failRegister.Store(2)
	runRegistration(t, e, rm)

	// The JobManager is unreachable twice, then the registration succeeds
	// and heartbeats flow.
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if _, ok := e.Registered(); !ok {
			return errors.New("not registered with the ResourceManager yet")
		}
		if n := rm.heartbeats.Load(); n <= 3 {
			return fmt.Errorf("%d heartbeats after registering, want over 3", n)
		}
		return nil
	})

	// The ResourceManager forgets us (it restarted): we register again, and
	// what ran here is gone (the slots are free in the new report).
	if err := e.DeployTask(context.Background(), deployment("j", "j.t", "a", 0)); err != nil {
		t.Fatal(err)
	}
	rm.known.Store(false)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return rm.registered(2) })
	if rep := rm.lastReport.Load().([]control.SlotStatus); rep[0].AllocationID != "" {
		t.Errorf("re-registration reported %+v; want every slot free", rep)
	}

	// Heartbeats fail for longer than the timeout: register again.
	rm.failBeats.Store(true)
	start := time.Now()
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return rm.registered(3) })
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("registered again after %v of failed heartbeats; want the 200ms timeout first", d)
	}
	rm.failBeats.Store(false)
}
