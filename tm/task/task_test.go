package task

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

var shared struct {
	once sync.Once
	rt   *wasmhost.Runtime
	mod  *wasmhost.Module
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.rt != nil {
		shared.rt.Close(context.Background())
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testGuest builds testdata/taskguest once per test binary.
func testGuest(t testing.TB) *wasmhost.Module {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		path, err := guestbuild.Build(ctx, "testdata/taskguest")
		if err != nil {
			shared.err = err
			return
		}
		wasm, err := os.ReadFile(path)
		if err != nil {
			shared.err = err
			return
		}
		if shared.rt, err = wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig()); err != nil {
			shared.err = err
			return
		}
		shared.mod, shared.err = shared.rt.Compile(ctx, wasm)
	})
	if shared.err != nil {
		t.Fatalf("test guest: %v", shared.err)
	}
	return shared.mod
}

type oneModule struct{ m *wasmhost.Module }

func (o oneModule) Module(_ context.Context, _, digest string) (*wasmhost.Module, func(), error) {
	if o.m == nil || digest != o.m.Digest() {
		return nil, nil, fmt.Errorf("no module %s", digest)
	}
	return o.m, func() {}, nil
}

// splitQueue is the JobMaster's split assigner, shared by a source's
// subtasks.
type splitQueue struct {
	mu  sync.Mutex
	sps []checkpoint.Split
}

func (q *splitQueue) NextSplit(ctx context.Context) (checkpoint.Split, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sps) == 0 {
		return checkpoint.Split{}, true, nil
	}
	sp := q.sps[0]
	q.sps = q.sps[1:]
	return sp, false, nil
}

func newManager(t testing.TB) *exchange.Manager {
	t.Helper()
	m, err := exchange.NewManager(context.Background(), exchange.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// job is a small stand-in for the JobMaster: it chains a graph, wires the
// chains' edges through the exchange (subtask i on mgrs[i%len(mgrs)]) and
// runs every subtask with task.Run.
type job struct {
	g      *jobgraph.Graph
	mod    *wasmhost.Module
	args   []string
	p      int
	mgrs   []*exchange.Manager
	store  blob.Store
	splits []checkpoint.Split // of every text source
	// noMetrics runs the tasks with metrics off.
	noMetrics bool
	// conf is the job's config; the zero value is the defaults.
	conf jobconfig.Config
}

type jobResult struct {
	collected []string
	accs      map[string]int64
	errs      []error
	// metrics are each task's final figures, by chain index.
	metrics map[int][]Sample
	// parts are the file-sink parts the tasks handed back.
	parts []checkpoint.SinkPart
}

func (j job) run(t testing.TB, ctx context.Context) jobResult {
	t.Helper()
	chains := jobgraph.Chains(j.g, j.p)
	chainOf := map[int]int{}
	vertex := map[int]jobgraph.Vertex{}
	for _, v := range j.g.Vertices {
		vertex[v.ID] = v
	}
	for ci, c := range chains {
		for _, id := range c.Vertices {
			chainOf[id] = ci
		}
	}
	addr := func(subtask int) string { return j.mgrs[subtask%len(j.mgrs)].Addr() }
	inputs := make([][]control.InputSpec, len(chains))
	outputs := make([][]control.OutputSpec, len(chains))
	for _, e := range j.g.Edges {
		sc, tc := chainOf[e.Source], chainOf[e.Target]
		if sc == tc {
			continue
		}
		rid := fmt.Sprintf("%d->%d", e.Source, e.Target)
		producers := chains[sc].Parallelism
		if e.Partitioner == jobgraph.Forward {
			producers = 1
		}
		inputs[tc] = append(inputs[tc], control.InputSpec{ResultID: rid, Producers: producers})
		var targets []string
		for i := 0; i < chains[tc].Parallelism; i++ {
			targets = append(targets, addr(i))
		}
		outputs[sc] = append(outputs[sc], control.OutputSpec{ResultID: rid, Partitioner: e.Partitioner, Targets: targets})
	}
	queue := &splitQueue{sps: slices.Clone(j.splits)}
	var mu sync.Mutex
	res := jobResult{accs: map[string]int64{}, metrics: map[int][]Sample{}}
	var wg sync.WaitGroup
	for ci, c := range chains {
		var chain []jobgraph.Vertex
		for _, id := range c.Vertices {
			chain = append(chain, vertex[id])
		}
		for sub := 0; sub < c.Parallelism; sub++ {
			spec := Spec{
				ExecutionID: fmt.Sprintf("c%d-%d", ci, sub), JobID: "job1", Tenant: "acme",
				ModuleDigest: j.mod.Digest(), Args: j.args, Chain: chain,
				Subtask: sub, Parallelism: c.Parallelism, MaxParallelism: jobgraph.DefaultMaxParallelism,
				Inputs: inputs[ci], Outputs: outputs[ci], Config: j.conf,
			}
			deps := Deps{Modules: oneModule{j.mod}, Blob: j.store, Exchange: j.mgrs[sub%len(j.mgrs)]}
			if !j.noMetrics {
				deps.Metrics = NewMetrics()
			}
			if chain[0].Connector == jobgraph.ConnectorText {
				deps.Splits = queue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := Run(ctx, spec, deps)
				mu.Lock()
				defer mu.Unlock()
				if deps.Metrics != nil {
					res.metrics[ci] = append(res.metrics[ci], deps.Metrics.Sample())
				}
				if err != nil {
					res.errs = append(res.errs, err)
					return
				}
				for _, v := range r.Collected {
					res.collected = append(res.collected, string(v))
				}
				for k, v := range r.Accumulators {
					res.accs[k] += v
				}
				res.parts = append(res.parts, r.SinkParts...)
			}()
		}
	}
	wg.Wait()
	sort.Strings(res.collected)
	return res
}

func plan(t testing.TB, mod *wasmhost.Module, args ...string) *jobgraph.Graph {
	t.Helper()
	g, err := mod.Plan(context.Background(), args, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestTextToCollectWithoutGuest(t *testing.T) {
	store := openStore(t)
	data := "alpha\nbeta\r\ngamma\n\ndelta"
	put(t, store, "in/a.txt", []byte(data))
	var running bool
	res, err := Run(context.Background(), Spec{
		ExecutionID: "e1", JobID: "j", Tenant: "acme", Parallelism: 1,
		Chain: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText},
			{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect},
		},
	}, Deps{Blob: store, Splits: &splitQueue{sps: cut("in/a.txt", int64(len(data)), 4)}, OnRunning: func() { running = true }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range res.Collected {
		got = append(got, string(v))
	}
	if want := wantLines([]byte(data)); !slices.Equal(got, want) {
		t.Fatalf("collected %q, want %q", got, want)
	}
	if !running || res.Accumulators == nil {
		t.Fatalf("OnRunning called: %v; accumulators %v", running, res.Accumulators)
	}
}

// Two chains without guest code: text sources at p=3 rebalance into a
// collect sink at p=1, across two Managers.
func TestExchangeBetweenTasksWithoutGuest(t *testing.T) {
	store := openStore(t)
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	data := b.String()
	put(t, store, "in/a.txt", []byte(data))
	g := &jobgraph.Graph{
		Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Parallelism: 3},
			{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect, Parallelism: 1},
		},
		Edges: []jobgraph.Edge{{Source: 1, Target: 2, Partitioner: jobgraph.Rebalance}},
	}
	j := job{g: g, mod: nilModule(), p: 1, mgrs: []*exchange.Manager{newManager(t), newManager(t)}, store: store, splits: cut("in/a.txt", int64(len(data)), 1000)}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	want := wantLines([]byte(data))
	sort.Strings(want)
	if !slices.Equal(res.collected, want) {
		t.Fatalf("collected %d lines, want %d", len(res.collected), len(want))
	}
}

// nilModule stands for "no guest code": jobs without guest operators never
// ask for it.
func nilModule() *wasmhost.Module { return new(wasmhost.Module) }

func TestWordCountAcrossManagers(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	var b strings.Builder
	want := map[string]int{}
	words := []string{"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Sluice", "wasm"}
	total := 0
	for i := 0; i < 3000; i++ {
		n := 1 + i%7
		for k := 0; k < n; k++ {
			w := words[(i*31+k*7)%len(words)]
			if k > 0 {
				b.WriteString(" ")
			}
			b.WriteString(w)
			want[w]++
			total++
		}
		b.WriteString("\n")
	}
	data := b.String()
	put(t, store, "in/words.txt", []byte(data))
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			j := job{
				g: plan(t, mod, "wordcount"), mod: mod, args: []string{"wordcount"}, p: p,
				mgrs: []*exchange.Manager{newManager(t), newManager(t)}, store: store,
				splits: cut("in/words.txt", int64(len(data)), 4096),
			}
			res := j.run(t, context.Background())
			if len(res.errs) > 0 {
				t.Fatal(res.errs)
			}
			var wantLines []string
			for w, n := range want {
				wantLines = append(wantLines, fmt.Sprintf("%s\t%d", w, n))
			}
			sort.Strings(wantLines)
			if !slices.Equal(res.collected, wantLines) {
				t.Fatalf("counts %q, want %q", res.collected, wantLines)
			}
			if res.accs["words"] != int64(total) {
				t.Fatalf("accumulator words = %d, want %d", res.accs["words"], total)
			}
		})
	}
}

func TestRebalanceIntoGuest(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	data := b.String()
	put(t, store, "in/rows.txt", []byte(data))
	g := plan(t, mod, "upper")
	for i := range g.Vertices {
		if g.Vertices[i].Name == "lines" {
			g.Vertices[i].Parallelism = 2
		}
	}
	j := job{g: g, mod: mod, args: []string{"upper"}, p: 3, mgrs: []*exchange.Manager{newManager(t), newManager(t)}, store: store, splits: cut("in/rows.txt", int64(len(data)), 512)}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	want := wantLines([]byte(strings.ToUpper(data)))
	sort.Strings(want)
	if !slices.Equal(res.collected, want) {
		t.Fatalf("collected %d lines, want %d", len(res.collected), len(want))
	}
}

func TestGuestSource(t *testing.T) {
	mod := testGuest(t)
	j := job{g: plan(t, mod, "source", "5000"), mod: mod, args: []string{"source", "5000"}, p: 1, mgrs: []*exchange.Manager{newManager(t)}}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	if len(res.collected) != 5000 {
		t.Fatalf("collected %d records", len(res.collected))
	}
}

func TestGuestErrorIsTyped(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	data := "fine\nboom\nfine\n"
	put(t, store, "in/x.txt", []byte(data))
	j := job{g: plan(t, mod, "panic"), mod: mod, args: []string{"panic"}, p: 1, mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/x.txt", int64(len(data)), 100)}
	res := j.run(t, context.Background())
	if len(res.errs) != 1 {
		t.Fatalf("errors %v, want one", res.errs)
	}
	var ge *wasmhost.GuestError
	if !errors.As(res.errs[0], &ge) || !errors.Is(res.errs[0], wasmhost.ErrGuestFailed) || !strings.Contains(ge.Message, "nil map") {
		t.Fatalf("error %v is not the guest's panic as a *wasmhost.GuestError", res.errs[0])
	}
	if ge.Digest != mod.Digest() {
		t.Fatalf("digest %s, want %s", ge.Digest, mod.Digest())
	}
}

func TestTimersFireBetweenBatches(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	data := "a\nb\na\n"
	put(t, store, "in/t.txt", []byte(data))
	j := job{g: plan(t, mod, "timer"), mod: mod, args: []string{"timer"}, p: 1, mgrs: []*exchange.Manager{newManager(t)}, store: store, splits: cut("in/t.txt", int64(len(data)), 100)}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	if !slices.Contains(res.collected, "timer a") || !slices.Contains(res.collected, "timer b") {
		t.Fatalf("collected %q, want timer firings for a and b", res.collected)
	}
}

// A task blocked on back-pressure (its consumer never reads) stops promptly
// when canceled, and returns an error wrapping context.Canceled.
func TestCancelWhileBackPressured(t *testing.T) {
	store := openStore(t)
	data := strings.Repeat("some line of text that fills buffers\n", 200000)
	put(t, store, "in/big.txt", []byte(data))
	m := newManager(t)
	ctx := context.Background()
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "stuck", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := Run(rctx, Spec{
			ExecutionID: "bp", Parallelism: 1,
			Chain:   []jobgraph.Vertex{{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText}},
			Outputs: []control.OutputSpec{{ResultID: "stuck", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}},
		}, Deps{Blob: store, Exchange: m, Splits: &splitQueue{sps: cut("in/big.txt", int64(len(data)), 1<<20)}, OnRunning: func() { close(running) }})
		done <- err
	}()
	<-running
	select {
	case err := <-done:
		t.Fatalf("task ended with %v though nobody reads its output", err)
	case <-time.After(50 * time.Millisecond):
	}
	start := time.Now()
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v to stop", d)
	}
}

// A task waiting for input stops promptly when canceled.
func TestCancelWhileWaitingForInput(t *testing.T) {
	m := newManager(t)
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	running := make(chan struct{})
	go func() {
		_, err := Run(rctx, Spec{
			ExecutionID: "wait", Parallelism: 1,
			Chain:  []jobgraph.Vertex{{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}},
			Inputs: []control.InputSpec{{ResultID: "never", Producers: 1}, {ResultID: "never2", Producers: 1}},
		}, Deps{Exchange: m, OnRunning: func() { close(running) }})
		done <- err
	}()
	<-running
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// Several inputs are merged; the task ends after END_OF_PARTITION from all.
func TestMergesSeveralInputs(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	type out struct {
		res Result
		err error
	}
	done := make(chan out)
	go func() {
		r, err := Run(ctx, Spec{
			ExecutionID: "merge", Parallelism: 1,
			Chain:  []jobgraph.Vertex{{ID: 3, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}},
			Inputs: []control.InputSpec{{ResultID: "left", Producers: 2}, {ResultID: "right", Producers: 1}},
		}, Deps{Exchange: m})
		done <- out{r, err}
	}()
	write := func(rid string, producer int, vals ...string) {
		w, err := m.OpenOutput(ctx, control.OutputSpec{ResultID: rid, Partitioner: jobgraph.Rebalance, Targets: []string{m.Addr()}}, producer, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		for _, v := range vals {
			if err := w.Write(ctx, []abi.Record{{Value: []byte(v)}}); err != nil {
				t.Error(err)
			}
		}
		if err := w.Finish(ctx); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	for _, f := range []func(){
		func() { write("left", 0, "l0a", "l0b") },
		func() { write("left", 1, "l1a") },
		func() { write("right", 0, "r0a", "r0b", "r0c") },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	var got []string
	for _, v := range o.res.Collected {
		got = append(got, string(v))
	}
	sort.Strings(got)
	if want := []string{"l0a", "l0b", "l1a", "r0a", "r0b", "r0c"}; !slices.Equal(got, want) {
		t.Fatalf("collected %q, want %q", got, want)
	}
}

func TestRejectsInvalidSpecs(t *testing.T) {
	text := jobgraph.Vertex{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText}
	coll := jobgraph.Vertex{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}
	for name, spec := range map[string]Spec{
		"empty chain":           {Parallelism: 1},
		"text without splits":   {Parallelism: 1, Chain: []jobgraph.Vertex{text, coll}},
		"collect in the middle": {Parallelism: 1, Chain: []jobgraph.Vertex{coll, text}},
		"file sink":             {Parallelism: 1, Chain: []jobgraph.Vertex{{ID: 3, Connector: jobgraph.ConnectorFile}}},
		"bad subtask":           {Parallelism: 1, Subtask: 1, Chain: []jobgraph.Vertex{coll}},
		"no input":              {Parallelism: 1, Chain: []jobgraph.Vertex{coll}},
	} {
		if _, err := Run(context.Background(), spec, Deps{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
