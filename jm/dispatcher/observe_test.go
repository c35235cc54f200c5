package dispatcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// tmPool is a countingPool with two TaskManagers.
type tmPool struct{ *countingPool }

func (p tmPool) Overview() resourcemanager.Overview {
	o := p.countingPool.Overview()
	o.TaskManagers = []resourcemanager.TaskManagerInfo{{ResourceID: "tm-a", RPCAddress: "a:1"}, {ResourceID: "tm-b", RPCAddress: "b:1"}}
	return o
}

// fakeObserver answers every TaskManager with lines of the job asked for,
// plus one of a foreign job and tenant that must never get through;
// address "b:1" fails when down is set.
type fakeObserver struct {
	mu   sync.Mutex
	asks []control.TaskLogsRequest
	tm   []control.TaskManagerLogsRequest
	down bool
}

func (o *fakeObserver) TaskLogs(_ context.Context, addr string, r control.TaskLogsRequest) ([]control.LogLine, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asks = append(o.asks, r)
	if addr == "b:1" && o.down {
		return nil, rpcerr.Errorf(rpcerr.ErrUnreachable, "b is down")
	}
	t0 := time.Unix(100, 0)
	if addr == "b:1" {
		t0 = t0.Add(time.Second)
	}
	return []control.LogLine{
		{Source: addr + "/x", Seq: 2, JobID: r.JobID, Tenant: r.Tenant, Message: "second", Time: t0.Add(time.Millisecond)},
		{Source: addr + "/x", Seq: 1, JobID: r.JobID, Tenant: r.Tenant, Message: "first", Time: t0},
		{Source: "rogue", Seq: 1, JobID: "other", Tenant: "eve", Message: "secret", Time: t0},
	}, nil
}

func (o *fakeObserver) TaskManagerLogs(_ context.Context, addr string, r control.TaskManagerLogsRequest) ([]control.LogLine, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tm = append(o.tm, r)
	return []control.LogLine{{Seq: 1, Tenant: "acme", Message: "mine"}, {Seq: 2, Tenant: "eve", Message: "theirs"}, {Seq: 3, Message: "tm-wide"}}, nil
}

func (o *fakeObserver) SampleStacks(context.Context, string, control.TaskStacksRequest) ([]control.TaskStack, error) {
	return nil, errors.New("not asked in these tests")
}

func TestLogsAreTenantScoped(t *testing.T) {
	obs := &fakeObserver{}
	f := newFixture(t, func(c *Config) { c.Observer, c.Resources = obs, tmPool{&countingPool{}} })
	ctx := context.Background()
	if _, _, err := f.d.UploadModule(ctx, "acme", wasm); err != nil {
		t.Fatal(err)
	}
	job := submit(t, f.d, "acme")

	lines, err := f.d.Logs(ctx, "acme", job, LogQuery{Task: "v2", After: map[string]uint64{"a:1/x": 0}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Source+" "+l.Message)
	}
	want := []string{"a:1/x first", "a:1/x second", "b:1/x first", "b:1/x second"}
	if len(got) != len(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lines %q, want %q", got, want)
		}
	}
	for _, a := range obs.asks {
		if a.JobID != job || a.Tenant != "acme" || a.Query.Task != "v2" {
			t.Errorf("task manager asked %+v", a)
		}
	}

	// One TaskManager down: the other's lines still come.
	obs.down = true
	if lines, err := f.d.Logs(ctx, "acme", job, LogQuery{}); err != nil || len(lines) != 2 {
		t.Fatalf("with one task manager down: %d lines, %v", len(lines), err)
	}

	// Another tenant, or no such job: not found, and no TaskManager asked.
	n := len(obs.asks)
	for _, tc := range []struct{ tenant, job string }{{"eve", job}, {DefaultTenant, job}, {"acme", "nope"}} {
		if _, err := f.d.Logs(ctx, tc.tenant, tc.job, LogQuery{}); !errors.Is(err, rpcerr.ErrJobNotFound) {
			t.Errorf("logs of %s as %s: %v, want job not found", tc.job, tc.tenant, err)
		}
		if _, err := f.d.Stacks(ctx, tc.tenant, tc.job, StackQuery{}); !errors.Is(err, rpcerr.ErrJobNotFound) {
			t.Errorf("stacks of %s as %s: %v, want job not found", tc.job, tc.tenant, err)
		}
	}
	if len(obs.asks) != n {
		t.Errorf("task managers asked for a job the caller may not see")
	}

	// Bad sampling requests change nothing.
	for _, q := range []StackQuery{{Duration: -time.Second}, {Duration: 2 * control.MaxStackDuration}, {Duration: time.Second, Interval: time.Microsecond}} {
		if _, err := f.d.Stacks(ctx, "acme", job, q); !errors.Is(err, rpcerr.ErrInvalidArgument) {
			t.Errorf("stacks %+v: %v, want invalid argument", q, err)
		}
	}
}

func TestTaskManagerLogsShowOnlyTheCallersLines(t *testing.T) {
	for _, open := range []bool{false, true} {
		obs := &fakeObserver{}
		f := newFixture(t, func(c *Config) { c.Observer, c.Resources, c.OpenCluster = obs, tmPool{&countingPool{}}, open })
		lines, err := f.d.TaskManagerLogs(context.Background(), "acme", "tm-b", LogQuery{After: map[string]uint64{"": 7}})
		if err != nil {
			t.Fatal(err)
		}
		if r := obs.tm[0]; r.Tenant != "acme" || r.All != open || r.After != 7 {
			t.Errorf("open=%v: task manager asked %+v", open, r)
		}
		if want := map[bool]int{false: 1, true: 3}[open]; len(lines) != want || lines[0].Message != "mine" {
			t.Errorf("open=%v: lines %+v, want %d starting with mine", open, lines, want)
		}
		if _, err := f.d.TaskManagerLogs(context.Background(), "acme", "tm-zzz", LogQuery{}); !errors.Is(err, rpcerr.ErrNotFound) {
			t.Errorf("unknown task manager: %v", err)
		}
	}
}

func TestObserveWithoutObserverIsUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	if _, _, err := f.d.UploadModule(context.Background(), DefaultTenant, wasm); err != nil {
		t.Fatal(err)
	}
	job := submit(t, f.d, DefaultTenant)
	if _, err := f.d.Logs(context.Background(), DefaultTenant, job, LogQuery{}); !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Fatalf("logs without an observer: %v", err)
	}
}

// submit starts the "ok" job (v1 -> v2 -> v3) of the uploaded fake module
// as tenant.
func submit(t *testing.T, d *Dispatcher, tenant string) string {
	t.Helper()
	id, err := d.SubmitJob(context.Background(), tenant, Submission{ModuleDigest: blob.Digest(wasm), Args: []string{"ok"}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestFlameGraphMergesStacks(t *testing.T) {
	g := FlameGraph([]TaskStack{
		{Samples: []control.StackCount{{Frames: []string{"main", "b", "hot"}, Count: 5}, {Frames: []string{"main", "a"}, Count: 1}}},
		{Samples: []control.StackCount{{Frames: []string{"main", "b", "hot"}, Count: 2}, {Frames: []string{"main", "b"}, Count: 1}}},
	})
	if g.Name != "root" || g.Value != 9 || len(g.Children) != 1 {
		t.Fatalf("root %+v", g)
	}
	m := g.Children[0]
	if m.Name != "main" || m.Value != 9 || len(m.Children) != 2 || m.Children[0].Name != "a" || m.Children[0].Value != 1 {
		t.Fatalf("main %+v", m)
	}
	b := m.Children[1]
	if b.Name != "b" || b.Value != 8 || len(b.Children) != 1 || b.Children[0].Name != "hot" || b.Children[0].Value != 7 {
		t.Fatalf("b %+v", b)
	}
	if e := FlameGraph(nil); e.Value != 0 || len(e.Children) != 0 {
		t.Fatalf("empty %+v", e)
	}
}
