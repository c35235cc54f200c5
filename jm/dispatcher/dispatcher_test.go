package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
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
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePlanner plans the graph named by the first argument.
type fakePlanner struct {
	graphs map[string]*jobgraph.Graph
	plans  atomic.Int64
}

func (p *fakePlanner) Validate(ctx context.Context, tenant string, wasm []byte) error {
	if bytes.Contains(wasm, []byte("no-abi")) {
		return errors.New("module does not export sluice_abi_v1: build it with the Sluice SDK")
	}
	return nil
}

func (p *fakePlanner) Plan(ctx context.Context, tenant string, wasm []byte, args []string, lim control.TaskLimits) (*jobgraph.Graph, error) {
	p.plans.Add(1)
	if len(args) == 0 {
		return nil, errors.New("guest plan trapped: index out of range\nwasm stack: main.plan")
	}
	g, ok := p.graphs[args[0]]
	if !ok {
		return nil, fmt.Errorf("no graph %q", args[0])
	}
	c := *g
	return &c, nil
}

// countingPool never has slots but counts requests.
type countingPool struct {
	mu       sync.Mutex
	requests int
}

func (p *countingPool) RequestSlots(ctx context.Context, job string, n int) ([]resourcemanager.Slot, error) {
	p.mu.Lock()
	p.requests++
	p.mu.Unlock()
	return nil, rpcerr.NotEnoughSlots(n, 0)
}
func (p *countingPool) ReleaseSlots(...string)   {}
func (p *countingPool) ReportUnreachable(string) {}
func (p *countingPool) Overview() resourcemanager.Overview {
	return resourcemanager.Overview{SlotsTotal: 4, SlotsFree: 4}
}
func (p *countingPool) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.requests }

type nopGateway struct{}

func (nopGateway) DeployTask(context.Context, string, control.Deployment) error { return nil }
func (nopGateway) CancelTask(context.Context, string, control.FencingToken, string) error {
	return nil
}
func (nopGateway) FreeSlot(context.Context, string, string) error { return nil }
func (nopGateway) TriggerCheckpoint(context.Context, string, control.FencingToken, string, checkpoint.Trigger) error {
	return nil
}
func (nopGateway) NotifyCheckpoint(context.Context, string, control.FencingToken, string, int64, bool) error {
	return nil
}

var wasm = []byte("\x00asm\x01\x00\x00\x00 a fake module")

func v(id int, kind jobgraph.Kind, p int) jobgraph.Vertex {
	return jobgraph.Vertex{ID: id, Name: fmt.Sprintf("v%d", id), Kind: kind, Parallelism: p}
}

func e(s, t int, p jobgraph.Partitioner) jobgraph.Edge {
	return jobgraph.Edge{Source: s, Target: t, Partitioner: p}
}

func graphs() map[string]*jobgraph.Graph {
	src := v(1, jobgraph.KindSource, 0)
	sink := v(3, jobgraph.KindSink, 0)
	m := v(2, jobgraph.KindMap, 0)
	text := jobgraph.Vertex{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": `["in/"]`}}
	return map[string]*jobgraph.Graph{
		"ok":         {Name: "ok", Vertices: []jobgraph.Vertex{src, m, sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 3, jobgraph.Forward)}},
		"cycle":      {Vertices: []jobgraph.Vertex{src, m, v(4, jobgraph.KindMap, 0), sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 4, jobgraph.Forward), e(4, 2, jobgraph.Forward), e(4, 3, jobgraph.Forward)}},
		"dangling":   {Vertices: []jobgraph.Vertex{src, m, sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 3, jobgraph.Forward), e(2, 9, jobgraph.Rebalance)}},
		"negative":   {Vertices: []jobgraph.Vertex{src, v(2, jobgraph.KindMap, -1), sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Rebalance), e(2, 3, jobgraph.Rebalance)}},
		"absurd":     {Vertices: []jobgraph.Vertex{src, v(2, jobgraph.KindMap, 1_000_000), sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Rebalance), e(2, 3, jobgraph.Rebalance)}},
		"huge-maxp":  {MaxParallelism: 1 << 20, Vertices: []jobgraph.Vertex{src, m, sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 3, jobgraph.Forward)}},
		"unknown":    {Vertices: []jobgraph.Vertex{src, {ID: 2, Name: "x", Kind: "teleport"}, sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 3, jobgraph.Forward)}},
		"wide":       {MaxParallelism: 1000, Vertices: []jobgraph.Vertex{src, v(2, jobgraph.KindMap, 500), sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Rebalance), e(2, 3, jobgraph.Rebalance)}},
		"text":       {Name: "text", Vertices: []jobgraph.Vertex{text, m, sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 3, jobgraph.Forward)}},
		"empty":      {},
		"text-other": {Vertices: []jobgraph.Vertex{{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": `["tenants/acme/secret.txt"]`}}, m, sink}, Edges: []jobgraph.Edge{e(1, 2, jobgraph.Forward), e(2, 3, jobgraph.Forward)}},
	}
}

type fixture struct {
	d     *Dispatcher
	pool  *countingPool
	store blob.Store
	now   *fakeNow
}

type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) Now() time.Time      { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) Add(d time.Duration) { f.mu.Lock(); f.t = f.t.Add(d); f.mu.Unlock() }
func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pool: &countingPool{}, store: store, now: &fakeNow{t: time.Unix(1_000_000, 0)}}
	cfg := Config{
		Blob: store, Planner: &fakePlanner{graphs: graphs()}, Resources: f.pool, Gateway: nopGateway{},
		Address: func() string { return "127.0.0.1:1" }, ModuleSizeLimit: 1 << 10, MaxJobSlots: 256,
		Now: f.now.Now, SplitSize: 4, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	t.Cleanup(func() { d.Close(); store.Close() })
	return f
}

func TestUpload(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	digest, size, err := f.d.UploadModule(ctx, DefaultTenant, wasm)
	if err != nil || size != int64(len(wasm)) || digest != blob.Digest(wasm) {
		t.Fatalf("upload: %s %d %v", digest, size, err)
	}
	tests := []struct {
		name string
		mod  []byte
		is   error
		msg  string
	}{
		{"not wasm", []byte("#!/bin/sh\necho hello"), rpcerr.ErrInvalidModule, "not a WebAssembly binary"},
		{"empty", nil, rpcerr.ErrInvalidModule, "not a WebAssembly binary"},
		{"no abi", append(bytes.Clone(wasm), "no-abi"...), rpcerr.ErrInvalidModule, "does not export sluice_abi_v1"},
		{"too large", append(bytes.Clone(wasm), make([]byte, 2000)...), rpcerr.ErrModuleTooLarge, "over the limit of 1024 bytes"},
	}
	for _, tt := range tests {
		_, _, err := f.d.UploadModule(ctx, DefaultTenant, tt.mod)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.msg) || rpcerr.CodeOf(err) != rpcerr.CodeInvalidArgument {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestSubmitRejectsBadJobsBeforeAskingForSlots(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	digest, _, err := f.d.UploadModule(ctx, DefaultTenant, wasm)
	if err != nil {
		t.Fatal(err)
	}
	// A savepoint taken with 64 key groups; the jobs declare 128.
	if err := checkpoint.WriteMetadata(ctx, f.store, "tenants/default/savepoints/sp-64/", &checkpoint.Metadata{
		JobID: "old", Tenant: DefaultTenant, ID: 3, Savepoint: true, MaxParallelism: 64,
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		sub  Submission
		is   error
		msg  string
	}{
		{"savepoint of other key groups", Submission{Args: []string{"ok"}, FromSavepoint: "sp-64"}, rpcerr.ErrInvalidArgument, "taken with max parallelism 64 but the job declares 128"},
		{"cycle", Submission{Args: []string{"cycle"}}, jobgraph.ErrInvalidGraph, "cycle through vertices"},
		{"dangling edge", Submission{Args: []string{"dangling"}}, jobgraph.ErrInvalidGraph, "edge 2->9: no vertex 9"},
		{"negative parallelism", Submission{Args: []string{"negative"}}, jobgraph.ErrInvalidGraph, "parallelism -1 is negative"},
		{"absurd parallelism", Submission{Args: []string{"absurd"}}, jobgraph.ErrInvalidGraph, "parallelism 1000000 is above the max parallelism 128"},
		{"absurd max parallelism", Submission{Args: []string{"huge-maxp"}}, jobgraph.ErrInvalidGraph, "above the cluster's limit 32768"},
		{"unknown kind", Submission{Args: []string{"unknown"}}, jobgraph.ErrInvalidGraph, `unknown kind "teleport"`},
		{"no operators", Submission{Args: []string{"empty"}}, jobgraph.ErrInvalidGraph, "no operators"},
		{"more slots than the cluster allows", Submission{Args: []string{"wide"}}, rpcerr.ErrInvalidArgument, "job needs 500 slots (its largest parallelism), above the cluster's limit of 256 per job"},
		{"default parallelism absurd", Submission{Args: []string{"ok"}, Parallelism: 1 << 20}, rpcerr.ErrInvalidArgument, "parallelism 1048576: must be in [1, 32768]"},
		{"default parallelism negative", Submission{Args: []string{"ok"}, Parallelism: -2}, rpcerr.ErrInvalidArgument, "parallelism -2"},
		{"plan trapped", Submission{}, rpcerr.ErrInvalidArgument, "guest plan trapped: index out of range\nwasm stack"},
		{"bad restart config", Submission{Args: []string{"ok"}, Config: map[string]string{"restart-strategy.fixed-delay.attempts": "lots"}}, rpcerr.ErrInvalidArgument, "attempts=\"lots\""},
		{"bad checkpoint interval", Submission{Args: []string{"ok"}, Config: map[string]string{"execution.checkpointing.interval": "often"}}, rpcerr.ErrInvalidArgument, `execution.checkpointing.interval="often"`},
		{"bad guest clock", Submission{Args: []string{"ok"}, Config: map[string]string{"sandbox.clock": "sundial"}}, rpcerr.ErrInvalidArgument, `sandbox.clock="sundial"`},
		{"unknown savepoint", Submission{Args: []string{"ok"}, FromSavepoint: "sp-nope"}, rpcerr.ErrNotFound, `savepoint "sp-nope" not found`},
		{"crafted savepoint id", Submission{Args: []string{"ok"}, FromSavepoint: "../b/savepoints/x"}, rpcerr.ErrInvalidArgument, "savepoint id"},
		{"bad digest", Submission{ModuleDigest: "sha1-abc", Args: []string{"ok"}}, rpcerr.ErrInvalidArgument, `module digest "sha1-abc"`},
		{"unknown module", Submission{ModuleDigest: blob.Digest([]byte("other")), Args: []string{"ok"}}, rpcerr.ErrModuleNotFound, "not found: upload it first"},
		{"missing input", Submission{Args: []string{"text"}}, rpcerr.ErrNotFound, `input "in/": no object`},
		{"foreign input", Submission{Args: []string{"text-other"}}, rpcerr.ErrPermissionDenied, "belongs to another tenant"},
		{"bad inputs map", Submission{Args: []string{"text"}, Config: map[string]string{"inputs": "[1]"}}, rpcerr.ErrInvalidArgument, "config inputs"},
		{"unknown config key", Submission{Args: []string{"ok"}, Config: map[string]string{"execution.checkpointing.intervall": "1s"}}, rpcerr.ErrInvalidArgument,
			`unknown config key "execution.checkpointing.intervall": did you mean "execution.checkpointing.interval"?`},
		{"max backoff below the default's initial", Submission{Args: []string{"ok"}, Config: map[string]string{"restart-strategy.exponential-delay.initial-backoff": "10m"}}, rpcerr.ErrInvalidArgument,
			"is below restart-strategy.exponential-delay.initial-backoff=10m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.sub.ModuleDigest == "" {
				tt.sub.ModuleDigest = digest
			}
			id, err := f.d.SubmitJob(ctx, DefaultTenant, tt.sub)
			if err == nil {
				t.Fatalf("submitted as %s", id)
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.is, tt.msg)
			}
			code := rpcerr.CodeOf(err)
			if tt.is == rpcerr.ErrModuleNotFound || tt.is == rpcerr.ErrNotFound {
				if code != rpcerr.CodeNotFound {
					t.Fatalf("code %v", code)
				}
			} else if tt.is != rpcerr.ErrPermissionDenied && code != rpcerr.CodeInvalidArgument {
				t.Fatalf("code %v, want INVALID_ARGUMENT", code)
			}
		})
	}
	if n := f.pool.count(); n != 0 {
		t.Fatalf("%d slot requests for rejected jobs", n)
	}
	if jobs := f.d.ListJobs(ctx, DefaultTenant); len(jobs) != 0 {
		t.Fatalf("rejected jobs listed: %v", jobs)
	}
}

func TestJobLifecycleAndRetention(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Retention = time.Hour })
	ctx := context.Background()
	digest, _, _ := f.d.UploadModule(ctx, DefaultTenant, wasm)
	id, err := f.d.SubmitJob(ctx, DefaultTenant, Submission{ModuleDigest: digest, Args: []string{"ok"}, Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	// The pool never has slots: the job fails with the slot error.
	r, err := f.d.WaitJob(ctx, DefaultTenant, id, 5*time.Second)
	if err != nil || r.State != jobmaster.Failed || !strings.Contains(r.Failure, "not enough slots: need 1, free 0") || r.Name != "mine" {
		t.Fatalf("wait: %+v %v", r.Details, err)
	}
	if jobs := f.d.ListJobs(ctx, DefaultTenant); len(jobs) != 1 || jobs[0].JobID != id {
		t.Fatalf("list: %+v", jobs)
	}
	if jobs := f.d.ListJobs(ctx, "acme"); len(jobs) != 0 {
		t.Fatal("another tenant sees the job")
	}
	if _, err := f.d.GetJob(ctx, "acme", id); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Fatalf("foreign GetJob: %v", err)
	}
	if o := f.d.Overview(ctx, DefaultTenant); o.JobsByState[jobmaster.Failed] != 1 || o.SlotsTotal != 4 {
		t.Fatalf("overview %+v", o)
	}
	if err := f.d.CancelJob(ctx, DefaultTenant, id); err != nil {
		t.Fatalf("cancel of an ended job: %v", err)
	}
	f.now.Add(59 * time.Minute)
	f.d.expire()
	if _, err := f.d.GetJob(ctx, DefaultTenant, id); err != nil {
		t.Fatalf("expired before the retention time: %v", err)
	}
	f.now.Add(2 * time.Minute)
	f.d.expire()
	if _, err := f.d.GetJob(ctx, DefaultTenant, id); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Fatalf("kept after the retention time: %v", err)
	}
}

func TestUnknownJob(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, rpcerr.ErrNotFound) || !errors.Is(err, rpcerr.ErrJobNotFound) || err.Error() != `job "x" not found` {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := f.d.GetJob(ctx, DefaultTenant, "x")
	check("get", err)
	check("cancel", f.d.CancelJob(ctx, DefaultTenant, "x"))
	_, err = f.d.WaitJob(ctx, DefaultTenant, "x", time.Second)
	check("wait", err)
	_, err = f.d.JobMaster("x")
	check("jobmaster", err)
}

func TestSplitSizeFor(t *testing.T) {
	const (
		KiB = 1 << 10
		MiB = 1 << 20
	)
	tests := []struct {
		total    int64
		subtasks int
		max      int64
		want     int64
	}{
		{4 * MiB, 2, 4 * MiB, 512 * KiB},   // a 4 MiB file at p=2: 8 splits, 4 per subtask
		{4 * MiB, 1, 4 * MiB, 1 * MiB},     // p=1: 4 splits
		{1 << 30, 4, 4 * MiB, 4 * MiB},     // large inputs: the maximum
		{1 * MiB, 8, 4 * MiB, 256 * KiB},   // small inputs: not below the minimum
		{100, 2, 4 * MiB, 256 * KiB},       // tiny input: one split of the minimum
		{0, 2, 4 * MiB, 256 * KiB},         // empty input
		{10 * MiB, 0, 4 * MiB, 2560 * KiB}, // parallelism 0 counts as 1
		{10, 1, 4, 4},                      // a maximum below the minimum wins
		{64 * MiB, 4, 8 * MiB, 4 * MiB},    // a larger configured maximum
	}
	for _, tt := range tests {
		if got := splitSizeFor(tt.total, tt.subtasks, tt.max); got != tt.want {
			t.Errorf("splitSizeFor(%d, %d, %d) = %d, want %d", tt.total, tt.subtasks, tt.max, got, tt.want)
		}
	}
}

func TestResolveSplitsAdapt(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	body := strings.Repeat("x", 4<<20)
	if err := store.Put(ctx, "tenants/default/in/big.txt", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{
		{ID: 1, Name: "src", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": `["in/big.txt"]`}},
		{ID: 2, Name: "src3", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Parallelism: 4, Config: map[string]string{"paths": `["in/big.txt"]`}},
	}}
	got, err := resolveSplits(ctx, store, DefaultTenant, g, nil, 2, DefaultSplitSize)
	if err != nil {
		t.Fatal(err)
	}
	// Vertex 1 runs at the job's parallelism 2: 8 splits of 512 KiB;
	// vertex 2 sets 4: 16 of 256 KiB.
	for id, want := range map[int]int{1: 8, 2: 16} {
		splits := got[id]
		if len(splits) != want {
			t.Fatalf("vertex %d: %d splits, want %d: %v", id, len(splits), want, splits)
		}
		var next int64
		for _, sp := range splits {
			if sp.Offset != next || sp.Length != int64(len(body))/int64(want) {
				t.Fatalf("vertex %d: split %v does not continue at %d with an even length", id, sp, next)
			}
			next += sp.Length
		}
		if next != int64(len(body)) {
			t.Fatalf("vertex %d: splits cover %d bytes, want %d", id, next, len(body))
		}
	}
}

func TestResolveSplits(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	put := func(key, body string) {
		if err := store.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	put("tenants/default/in/a.txt", "0123456789")       // 3 splits of 4
	put("tenants/default/in/b.txt", "abc")              // 1
	put("tenants/default/in/sub/c.log", "xy")           // 1
	put("tenants/default/in/empty.txt", "")             // none
	put("tenants/default/uploads/u1/data.txt", "hello") // 2
	text := func(paths string) *jobgraph.Graph {
		return &jobgraph.Graph{Vertices: []jobgraph.Vertex{{ID: 7, Name: "src", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": paths}}}}
	}
	tests := []struct {
		paths  string
		inputs map[string]string
		want   string
		err    string
	}{
		{`["in/a.txt"]`, nil, "[{tenants/default/in/a.txt 0 4} {tenants/default/in/a.txt 4 4} {tenants/default/in/a.txt 8 2}]", ""},
		{`["in"]`, nil, "[{tenants/default/in/a.txt 0 4} {tenants/default/in/a.txt 4 4} {tenants/default/in/a.txt 8 2} {tenants/default/in/b.txt 0 3} {tenants/default/in/sub/c.log 0 2}]", ""},
		{`["in/*.txt", "in/b.txt"]`, nil, "[{tenants/default/in/a.txt 0 4} {tenants/default/in/a.txt 4 4} {tenants/default/in/a.txt 8 2} {tenants/default/in/b.txt 0 3}]", ""},
		{`["tenants/default/in/sub/"]`, nil, "[{tenants/default/in/sub/c.log 0 2}]", ""},
		{`["/home/me/data.txt"]`, map[string]string{"/home/me/data.txt": "tenants/default/uploads/u1/data.txt"}, "[{tenants/default/uploads/u1/data.txt 0 4} {tenants/default/uploads/u1/data.txt 4 1}]", ""},
		{`["/home/me/data.txt"]`, nil, "", `input "/home/me/data.txt": no object tenants/default/home/me/data.txt`},
		{`["in/*.csv"]`, nil, "", "no object matches"},
		{`["in/[x"]`, nil, "", "bad pattern"},
		{`[]`, nil, "", "non-empty JSON list of paths"},
		{`[""]`, nil, "", "input path is empty"},
		{`["tenants/other/x"]`, nil, "", "belongs to another tenant"},
	}
	for _, tt := range tests {
		got, err := resolveSplits(ctx, store, DefaultTenant, text(tt.paths), tt.inputs, 1, 4)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.paths, err, tt.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got[7]) != tt.want {
			t.Errorf("%s: %v %v\nwant %s", tt.paths, got[7], err, tt.want)
		}
	}
}

// A nexmark source gets one split of event ids per subtask, keyed by its
// timeline; an unbounded one as well; a bad config is an invalid argument.
func TestResolveSplitsNexmark(t *testing.T) {
	ctx := context.Background()
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{
		{ID: 1, Name: "bounded", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorNexmark, Parallelism: 3, Config: map[string]string{"events": "10"}},
		{ID: 2, Name: "unbounded", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorNexmark},
	}}
	got, err := resolveSplits(ctx, nil, DefaultTenant, g, nil, 2, DefaultSplitSize)
	if err != nil {
		t.Fatal(err)
	}
	want := []checkpoint.Split{{Key: "nexmark/3/0", Offset: 0, Length: 3}, {Key: "nexmark/3/3", Offset: 3, Length: 3}, {Key: "nexmark/3/6", Offset: 6, Length: 4}}
	if !reflect.DeepEqual(got[1], want) {
		t.Fatalf("bounded: %+v, want %+v", got[1], want)
	}
	if u := got[2]; len(u) != 2 || u[0].Offset != 0 || u[1].Offset != u[0].Length || u[0].Length < 1<<40 {
		t.Fatalf("unbounded: %+v, want two long timelines", u)
	}
	g.Vertices[0].Config["events"] = "-1"
	if _, err := resolveSplits(ctx, nil, DefaultTenant, g, nil, 2, DefaultSplitSize); !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), `events "-1"`) {
		t.Fatalf("a negative count: %v", err)
	}
}

// A tenant over its submission rate is refused with RESOURCE_EXHAUSTED
// saying when to submit again, before its job is planned; its bucket
// refills at the rate; other tenants are not bound by it.
func TestSubmitRateQuota(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Quotas = func(tenant string) Quotas {
			if tenant == "b" {
				return Quotas{SubmitsPerMinute: 12} // a bucket of 2, one more every 5 s
			}
			return Quotas{}
		}
	})
	ctx := context.Background()
	planner := f.d.cfg.Planner.(*fakePlanner)
	upload := func(tenant string) string {
		digest, _, err := f.d.UploadModule(ctx, tenant, wasm)
		if err != nil {
			t.Fatal(err)
		}
		return digest
	}
	digestB := upload("b")
	submit := func() error {
		_, err := f.d.SubmitJob(ctx, "b", Submission{ModuleDigest: digestB, Args: []string{"ok"}})
		return err
	}
	for i := range 2 {
		if err := submit(); err != nil {
			t.Fatalf("b's submission %d, within its bucket: %v", i+1, err)
		}
	}
	plans := planner.plans.Load()
	err := submit()
	if !errors.Is(err, rpcerr.ErrResourceExhausted) || !strings.Contains(err.Error(), `tenant "b": submission quota of 12 jobs per minute reached: submit again in 5s`) {
		t.Fatalf("b's third submission at once: %v, want RESOURCE_EXHAUSTED saying to wait 5s", err)
	}
	if planner.plans.Load() != plans {
		t.Fatal("a refused submission was planned")
	}
	digestA := upload("a")
	for range 5 {
		if _, err := f.d.SubmitJob(ctx, "a", Submission{ModuleDigest: digestA, Args: []string{"ok"}}); err != nil {
			t.Fatalf("a has no submission quota: %v", err)
		}
	}
	f.now.Add(4 * time.Second)
	if err := submit(); err == nil || !strings.Contains(err.Error(), "submit again in 1s") {
		t.Fatalf("b after 4 s: %v, want to wait 1 s more", err)
	}
	f.now.Add(time.Second)
	if err := submit(); err != nil {
		t.Fatalf("b after 5 s: %v", err)
	}
}
