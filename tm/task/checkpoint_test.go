package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/blob/blobtest"
	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tm/exchange"
)

// fakeAcks is the JobMaster's checkpoint coordinator as a task sees it.
type fakeAcks struct {
	mu       sync.Mutex
	acks     []checkpoint.Ack
	declines []checkpoint.Decline
}

func (f *fakeAcks) Ack(_ context.Context, a checkpoint.Ack) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, a)
	return nil
}

func (f *fakeAcks) Decline(_ context.Context, d checkpoint.Decline) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.declines = append(f.declines, d)
	return nil
}

func (f *fakeAcks) ack(id int64) (checkpoint.Ack, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.acks {
		if a.CheckpointID == id {
			return a, true
		}
	}
	return checkpoint.Ack{}, false
}

// answers lists the checkpoints acknowledged and declined so far.
func (f *fakeAcks) answers() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var a, d []int64
	for _, x := range f.acks {
		a = append(a, x.CheckpointID)
	}
	for _, x := range f.declines {
		d = append(d, x.CheckpointID)
	}
	return fmt.Sprintf("acknowledged %v, declined %v", a, d)
}

// acked says whether checkpoint id was acknowledged.
func (f *fakeAcks) acked(id int64) error {
	if _, ok := f.ack(id); !ok {
		return fmt.Errorf("checkpoint %d not acknowledged (%s)", id, f.answers())
	}
	return nil
}

// declined says whether checkpoint id was declined.
func (f *fakeAcks) declined(id int64) error {
	if _, ok := f.decline(id); !ok {
		return fmt.Errorf("checkpoint %d not declined (%s)", id, f.answers())
	}
	return nil
}

func (f *fakeAcks) decline(id int64) (checkpoint.Decline, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.declines {
		if d.CheckpointID == id {
			return d, true
		}
	}
	return checkpoint.Decline{}, false
}

func (f *fakeAcks) answered() (acks, declines []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.acks {
		acks = append(acks, a.CheckpointID)
	}
	for _, d := range f.declines {
		declines = append(declines, d.CheckpointID)
	}
	return acks, declines
}

// chainOf returns the vertices of the chain (at parallelism p) that holds
// the vertex named name.
func chainOf(t *testing.T, g *jobgraph.Graph, name string) []jobgraph.Vertex {
	t.Helper()
	byID := map[int]jobgraph.Vertex{}
	for _, v := range g.Vertices {
		byID[v.ID] = v
	}
	for _, c := range jobgraph.Chains(g, 1) {
		var vs []jobgraph.Vertex
		found := false
		for _, id := range c.Vertices {
			vs = append(vs, byID[id])
			found = found || byID[id].Name == name
		}
		if found {
			return vs
		}
	}
	t.Fatalf("no vertex %q", name)
	return nil
}

func vertexNamed(t *testing.T, g *jobgraph.Graph, name string) jobgraph.Vertex {
	t.Helper()
	for _, v := range g.Vertices {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no vertex %q", name)
	return jobgraph.Vertex{}
}

// started is a task running in the background.
type started struct {
	done chan struct{}
	res  Result
	err  error
}

func start(ctx context.Context, spec Spec, deps Deps) *started {
	s := &started{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.res, s.err = Run(ctx, spec, deps)
	}()
	return s
}

func (s *started) wait(t *testing.T) Result {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("task did not end")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.res
}

func writer(t *testing.T, m *exchange.Manager, rid string, producer, consumers int, part jobgraph.Partitioner) *exchange.ResultWriter {
	t.Helper()
	targets := make([]string, consumers)
	for i := range targets {
		targets[i] = m.Addr()
	}
	w, err := m.OpenOutput(context.Background(), control.OutputSpec{ResultID: rid, Partitioner: part, Targets: targets}, producer, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// keyed returns records whose key is their value.
func keyed(vals ...string) []abi.Record {
	recs := make([]abi.Record, len(vals))
	for i, v := range vals {
		recs[i] = abi.Record{Key: []byte(v), HasKey: true, Value: []byte(v)}
	}
	return recs
}

func ids(chain []jobgraph.Vertex) []int {
	var out []int
	for _, v := range chain {
		out = append(out, v.ID)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// collected returns the collect sink's records: those the acks carried
// and the result's, sorted.
func collected(r Result, acks ...checkpoint.Ack) []string {
	var out []string
	for _, a := range acks {
		for _, v := range a.Collected {
			out = append(out, string(v))
		}
	}
	for _, v := range r.Collected {
		out = append(out, string(v))
	}
	sort.Strings(out)
	return out
}

// lastCount returns the highest count the "sum" guest emitted for key.
func lastCount(lines []string, key string) int {
	n := 0
	for _, l := range lines {
		k, c, _ := strings.Cut(l, "\t")
		if k == key {
			v, _ := strconv.Atoi(c)
			n = max(n, v)
		}
	}
	return n
}

// Two inputs, one producer slow to send its barrier: the fast channel is
// held back after its barrier, so the snapshot counts exactly the records
// before the barriers; restored into a new task, the count goes on from
// there.
func TestAlignmentSnapshotAndRestore(t *testing.T) {
	mod := testGuest(t)
	g := plan(t, mod, "sum")
	chain := chainOf(t, g, "count")
	for _, gates := range []int{1, 2} {
		t.Run(fmt.Sprint(gates, " gates"), func(t *testing.T) {
			store := openStore(t)
			m := newManager(t)
			ctx := context.Background()
			acks := &fakeAcks{}
			ctl := NewControl()
			spec := Spec{
				ExecutionID: "sum-0", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"sum"},
				Chain: chain, Parallelism: 1, MaxParallelism: 128,
			}
			if gates == 1 {
				spec.Inputs = []control.InputSpec{{ResultID: "in", Producers: 2}}
			} else {
				spec.Inputs = []control.InputSpec{{ResultID: "left", Producers: 1}, {ResultID: "right", Producers: 1}}
			}
			deps := Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Control: ctl, Checkpoints: acks, Metrics: NewMetrics()}
			run := start(ctx, spec, deps)
			var fast, slow *exchange.ResultWriter
			if gates == 1 {
				fast = writer(t, m, "in", 0, 1, jobgraph.Rebalance)
				slow = writer(t, m, "in", 1, 1, jobgraph.Rebalance)
			} else {
				fast = writer(t, m, "left", 0, 1, jobgraph.Forward)
				slow = writer(t, m, "right", 0, 1, jobgraph.Forward)
			}
			must(t, fast.Write(ctx, keyed("a", "a", "a")))
			must(t, fast.EmitBarrier(ctx, 1))
			// After its barrier, in the task's queue before the slow barrier
			// comes: these must not reach the snapshot.
			must(t, fast.Write(ctx, keyed("a", "a", "a", "a", "a")))
			must(t, fast.Flush(ctx))
			must(t, slow.Write(ctx, keyed("b", "b")))
			must(t, slow.EmitBarrier(ctx, 1))
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.acked(1) })
			if d := deps.Metrics.Sample().LastAlignment; d <= 0 {
				t.Errorf("alignment time %v after an aligned checkpoint", d)
			}
			must(t, slow.Write(ctx, keyed("b")))
			must(t, fast.Finish(ctx))
			must(t, slow.Finish(ctx))
			res := run.wait(t)
			ack, _ := acks.ack(1)
			out := collected(res, ack)
			if lastCount(out, "a") != 8 || lastCount(out, "b") != 3 {
				t.Fatalf("counts a=%d b=%d, want 8 and 3", lastCount(out, "a"), lastCount(out, "b"))
			}
			// The records before the barrier travel with its ack (the
			// JobMaster releases them when the checkpoint completes), the
			// rest with the result.
			if got, want := collected(Result{}, ack), []string{"a\t1", "a\t2", "a\t3", "b\t1", "b\t2"}; !slices.Equal(got, want) || ack.CollectedFrom != 0 {
				t.Fatalf("ack 1 carries records %q from %d, want %q from 0", got, ack.CollectedFrom, want)
			}
			if res.CollectedFrom != 5 {
				t.Fatalf("the result's records start at index %d, want 5 (after the ack's)", res.CollectedFrom)
			}
			wantKey := "tenants/acme/jobs/job1/checkpoints/00000000000000000001/" + checkpoint.StateObject(ids(chain), 0)
			if ack.State == nil || ack.State.Key != wantKey || ack.State.KeyGroupStart != 0 || ack.State.KeyGroupEnd != 127 || ack.ExecutionID != "sum-0" {
				t.Fatalf("ack %+v state %+v, want the state at %s for key groups 0..127", ack, ack.State, wantKey)
			}
			if got := int64(len(blobtest.GetBytes(t, store, wantKey))); got != ack.State.Size {
				t.Fatalf("state object has %d bytes, the ack says %d", got, ack.State.Size)
			}

			// Restore into a new task: a=3 and b=2 were counted before the
			// barrier.
			spec2 := spec
			spec2.ExecutionID = "sum-restored"
			spec2.Inputs = []control.InputSpec{{ResultID: "in2", Producers: 1}}
			spec2.Restore = &checkpoint.TaskRestore{CheckpointID: 1, States: []checkpoint.StateHandle{*ack.State}}
			run2 := start(ctx, spec2, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m})
			w := writer(t, m, "in2", 0, 1, jobgraph.Forward)
			must(t, w.Write(ctx, keyed("a", "b", "c")))
			must(t, w.Finish(ctx))
			// The restored task collects only what follows the barrier:
			// with ack 1's records, the output is an uninterrupted run's,
			// each record once.
			if got, want := collected(run2.wait(t), ack), []string{"a\t1", "a\t2", "a\t3", "a\t4", "b\t1", "b\t2", "b\t3", "c\t1"}; !slices.Equal(got, want) {
				t.Fatalf("after restore: %q, want %q", got, want)
			}
		})
	}
}

// failed waits for the task and returns its error.
func (s *started) failed() error {
	<-s.done
	return s.err
}

// Two subtasks' snapshots merge into one subtask at parallelism 1.
func TestRescaleRestore(t *testing.T) {
	mod := testGuest(t)
	g := plan(t, mod, "sum")
	chain := chainOf(t, g, "count")
	store := openStore(t)
	m := newManager(t)
	ctx := context.Background()
	acks := &fakeAcks{}
	var runs []*started
	for sub := 0; sub < 2; sub++ {
		runs = append(runs, start(ctx, Spec{
			ExecutionID: fmt.Sprint("sum-", sub), JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"sum"},
			Chain: chain, Subtask: sub, Parallelism: 2, MaxParallelism: 128,
			Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
		}, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Checkpoints: acks}))
	}
	w := writer(t, m, "in", 0, 2, jobgraph.Hash)
	want := map[string]int{}
	var recs []abi.Record
	for i := 0; i < 40; i++ {
		k := fmt.Sprint("k", i)
		for n := 0; n <= i%3; n++ {
			recs = append(recs, keyed(k)...)
			want[k]++
		}
	}
	must(t, w.Write(ctx, recs))
	must(t, w.EmitBarrier(ctx, 1))
	must(t, w.Write(ctx, keyed("k0", "k1"))) // after the barrier: not in the snapshots
	must(t, w.Finish(ctx))
	for _, r := range runs {
		r.wait(t)
	}
	acks.mu.Lock()
	var states []checkpoint.StateHandle
	for _, a := range acks.acks {
		states = append(states, *a.State)
	}
	acks.mu.Unlock()
	if len(states) != 2 || states[0].KeyGroupStart == states[1].KeyGroupStart {
		t.Fatalf("states %+v, want one per subtask", states)
	}

	run := start(ctx, Spec{
		ExecutionID: "sum-merged", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"sum"},
		Chain: chain, Parallelism: 1, MaxParallelism: 128,
		Inputs:  []control.InputSpec{{ResultID: "merged", Producers: 1}},
		Restore: &checkpoint.TaskRestore{CheckpointID: 1, States: states},
	}, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m})
	w2 := writer(t, m, "merged", 0, 1, jobgraph.Forward)
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	must(t, w2.Write(ctx, keyed(keys...)))
	must(t, w2.Finish(ctx))
	out := collected(run.wait(t))
	for k, n := range want {
		if got := lastCount(out, k); got != n+1 {
			t.Errorf("key %s counted %d after the restore, want %d", k, got, n+1)
		}
	}
}

// A restore that cannot read its state fails the task, naming the
// checkpoint and the object.
func TestRestoreFailureNamesTheObject(t *testing.T) {
	mod := testGuest(t)
	chain := chainOf(t, plan(t, mod, "sum"), "count")
	store := openStore(t)
	put(t, store, "tenants/acme/jobs/job1/checkpoints/00000000000000000004/bad.state", []byte("not a snapshot"))
	for _, key := range []string{"tenants/acme/jobs/job1/checkpoints/00000000000000000004/missing.state", "tenants/acme/jobs/job1/checkpoints/00000000000000000004/bad.state"} {
		_, err := Run(context.Background(), Spec{
			ExecutionID: "r", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"sum"},
			Chain: chain, Parallelism: 1, Inputs: []control.InputSpec{{ResultID: "x", Producers: 1}},
			Restore: &checkpoint.TaskRestore{CheckpointID: 4, States: []checkpoint.StateHandle{{Key: key, KeyGroupEnd: 127}}},
		}, Deps{Modules: oneModule{mod}, Blob: store, Exchange: newManager(t)})
		if err == nil || !strings.Contains(err.Error(), "checkpoint 4") || !strings.Contains(err.Error(), key) {
			t.Fatalf("err = %v; want it to name checkpoint 4 and %s", err, key)
		}
	}
}

// logWatch records the messages of a task's logger.
type logWatch struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l *logWatch) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "checkpoint" {
			msg += " " + a.Value.String()
		}
		return true
	})
	l.msgs = append(l.msgs, msg)
	return nil
}
func (l *logWatch) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logWatch) WithGroup(string) slog.Handler      { return l }
func (l *logWatch) saw(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.msgs, msg)
}

// readOut reads a test's output gate in the background: records' values
// and barriers ("|<id>") in order.
type readOut struct {
	mu   sync.Mutex
	got  []string
	err  error
	done chan struct{}
}

func readGate(ctx context.Context, g *exchange.InputGate) *readOut {
	r := &readOut{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			b, err := g.Next(ctx)
			r.mu.Lock()
			if err != nil {
				if err != io.EOF {
					r.err = err
				}
				r.mu.Unlock()
				return
			}
			if b.Event.Type == exchange.CheckpointBarrier {
				r.got = append(r.got, fmt.Sprint("|", b.Event.CheckpointID))
			}
			for _, rec := range b.Records {
				r.got = append(r.got, string(rec.Value))
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *readOut) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// shows says whether the output so far holds every one of want.
func (r *readOut) shows(want ...string) error {
	got := r.snapshot()
	for _, w := range want {
		if !slices.Contains(got, w) {
			return fmt.Errorf("output of %d items lacks %q (last ones %q)", len(got), w, got[max(0, len(got)-10):])
		}
	}
	return nil
}

// A barrier M while aligning N gives N up (declined, superseded) and
// aligns M; NotifyCheckpoint(aborted) for the checkpoint being aligned
// releases the blocked channel at once.
func TestAlignmentSupersededAndAborted(t *testing.T) {
	mod := testGuest(t)
	upper := vertexNamed(t, plan(t, mod, "upper"), "upper")
	for _, gates := range []int{1, 2} {
		t.Run(fmt.Sprint(gates, " gates"), func(t *testing.T) {
			m := newManager(t)
			store := openStore(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := m.OpenInput(ctx, control.InputSpec{ResultID: "out", Producers: 1}, 0)
			must(t, err)
			defer out.Close()
			acks := &fakeAcks{}
			ctl := NewControl()
			logs := &logWatch{}
			spec := Spec{
				ExecutionID: "up", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"upper"},
				Chain: []jobgraph.Vertex{upper}, Parallelism: 1,
				Outputs: []control.OutputSpec{{ResultID: "out", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}},
			}
			open := func(name string) (a, b *exchange.ResultWriter) {
				if gates == 1 {
					spec.Inputs = []control.InputSpec{{ResultID: name, Producers: 2}}
					run := start(ctx, spec, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Control: ctl, Checkpoints: acks, Logger: slog.New(logs)})
					t.Cleanup(func() { <-run.done })
					return writer(t, m, name, 0, 1, jobgraph.Rebalance), writer(t, m, name, 1, 1, jobgraph.Rebalance)
				}
				spec.Inputs = []control.InputSpec{{ResultID: name + "-a", Producers: 1}, {ResultID: name + "-b", Producers: 1}}
				run := start(ctx, spec, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Control: ctl, Checkpoints: acks, Logger: slog.New(logs)})
				t.Cleanup(func() { <-run.done })
				return writer(t, m, name+"-a", 0, 1, jobgraph.Forward), writer(t, m, name+"-b", 0, 1, jobgraph.Forward)
			}
			a, b := open("in")
			r := readGate(ctx, out)

			// Superseded: A delivers barrier 1 and blocks; B skipped 1 and
			// delivers 2.
			must(t, a.Write(ctx, []abi.Record{{Value: []byte("a1")}}))
			must(t, a.EmitBarrier(ctx, 1))
			must(t, a.Write(ctx, []abi.Record{{Value: []byte("a2")}}))
			must(t, a.EmitBarrier(ctx, 2))
			must(t, a.Write(ctx, []abi.Record{{Value: []byte("a3")}}))
			must(t, a.Flush(ctx))
			must(t, b.Write(ctx, []abi.Record{{Value: []byte("b1")}}))
			must(t, b.EmitBarrier(ctx, 2))
			must(t, b.Write(ctx, []abi.Record{{Value: []byte("b2")}}))
			must(t, b.Flush(ctx))
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return r.shows("A3", "B2") })
			got := r.snapshot()
			at := func(s string) int { return slices.Index(got, s) }
			if at("|1") >= 0 || at("|2") < 0 || at("A2") > at("|2") || at("B1") > at("|2") || at("A3") < at("|2") || at("B2") < at("|2") {
				t.Fatalf("output %q: want A1 B1 A2 before barrier 2 (and no barrier 1), A3 B2 after", got)
			}
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				if err := acks.declined(1); err != nil {
					return err
				}
				return acks.acked(2)
			})
			if d, ok := acks.decline(1); !ok || !strings.Contains(d.Reason, "superseded") {
				t.Fatalf("checkpoint 1: decline %+v, want one saying it was superseded", d)
			}
			if _, ok := acks.ack(2); !ok {
				t.Fatal("no ack of checkpoint 2")
			}

			// Aborted: A delivers barrier 3 and blocks; B never sends it.
			must(t, a.EmitBarrier(ctx, 3))
			must(t, a.Write(ctx, []abi.Record{{Value: []byte("a4")}}))
			must(t, a.Flush(ctx))
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				if !logs.saw("aligning barriers 3") {
					return errors.New(`alignment of checkpoint 3 not started: no "aligning barriers 3" logged`)
				}
				return nil
			})
			must(t, ctl.Notify(3, false))
			// The aborted checkpoint must not keep A blocked.
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return r.shows("A4") })
			must(t, b.EmitBarrier(ctx, 3)) // late: ignored
			must(t, b.Write(ctx, []abi.Record{{Value: []byte("b3")}}))
			must(t, a.Finish(ctx))
			must(t, b.Finish(ctx))
			<-r.done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := r.snapshot(); slices.Contains(got, "|3") || !slices.Contains(got, "B3") {
				t.Fatalf("output %q: want B3 and no barrier 3", got)
			}
			ackd, declined := acks.answered()
			if !slices.Equal(ackd, []int64{2}) || !slices.Equal(declined, []int64{1}) {
				t.Fatalf("acks %v, declines %v; want ack 2, decline 1", ackd, declined)
			}
		})
	}
}

// A guest source takes a trigger between polls; with Stop it emits nothing
// after the barrier and waits to be canceled. Its position, kept in
// operator state, survives a restore.
func TestGuestSourceTriggerStopAndRestore(t *testing.T) {
	mod := testGuest(t)
	g := plan(t, mod, "counter", "1000000000")
	counter := vertexNamed(t, g, "counter")
	store := openStore(t)
	m := newManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := m.OpenInput(ctx, control.InputSpec{ResultID: "out", Producers: 1}, 0)
	must(t, err)
	defer out.Close()
	acks := &fakeAcks{}
	ctl := NewControl()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	run := start(rctx, Spec{
		ExecutionID: "src", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"counter", "1000000000"},
		Chain: []jobgraph.Vertex{counter}, Parallelism: 1,
		Outputs: []control.OutputSpec{{ResultID: "out", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}},
	}, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Control: ctl, Checkpoints: acks})
	r := readGate(ctx, out)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := len(r.snapshot()); n <= 3000 {
			return fmt.Errorf("the source emitted %d items, want over 3000", n)
		}
		return nil
	})
	must(t, ctl.Trigger(checkpoint.Trigger{ID: 1, Savepoint: true, Stop: true}))
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.acked(1) })
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return r.shows("|1") })
	// Nothing follows the barrier (given time to show up), and the task
	// has not finished.
	select {
	case <-run.done:
		t.Fatalf("the stopped source ended: %v", run.err)
	case <-r.done:
		t.Fatalf("the output ended: %v", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	got := r.snapshot()
	if got[len(got)-1] != "|1" {
		t.Fatalf("records after the stop barrier: %q", got[slices.Index(got, "|1"):])
	}
	k := len(got) - 1
	for i, v := range got[:k] {
		if v != strconv.Itoa(i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
	// A trigger while stopped is declined.
	must(t, ctl.Trigger(checkpoint.Trigger{ID: 2}))
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.declined(2) })
	stop()
	if err := run.failed(); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if err := ctl.Trigger(checkpoint.Trigger{ID: 3}); !errors.Is(err, ErrEnded) {
		t.Fatalf("trigger after the end: %v, want ErrEnded", err)
	}
	ack, _ := acks.ack(1)

	// Restored, it goes on from k.
	n := k + 500
	g2 := plan(t, mod, "counter", strconv.Itoa(n))
	res, err := Run(ctx, Spec{
		ExecutionID: "src2", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"counter", strconv.Itoa(n)},
		Chain: chainOf(t, g2, "counter"), Parallelism: 1,
		Restore: &checkpoint.TaskRestore{CheckpointID: 1, States: []checkpoint.StateHandle{*ack.State}},
	}, Deps{Modules: oneModule{mod}, Blob: store})
	must(t, err)
	if len(res.Collected) != 500 || string(res.Collected[0]) != strconv.Itoa(k) || string(res.Collected[499]) != strconv.Itoa(n-1) {
		t.Fatalf("restored source emitted %d records from %q, want %d..%d", len(res.Collected), res.Collected[0], k, n-1)
	}
}

// A split cut at any recorded position reads exactly the lines not read
// yet: no loss, no duplicate, whatever the line lengths (empty lines,
// "\r\n") and wherever the position falls relative to the split's ends.
func TestRestOfSplitReadsTheUnreadLines(t *testing.T) {
	s := openStore(t)
	contents := []string{
		"a\n\nb\n",
		"\n\n\n\n",
		"one\r\ntwo\r\n\r\nthree",
		"xx\nyy\nzz\n",
		"a\nbb\n\n\nccc\ndddd\n\ne",
	}
	for i := 0; i < 10; i++ {
		var b strings.Builder
		for j := 0; j < 20; j++ {
			b.WriteString(strings.Repeat("x", (i*7+j*3)%6))
			b.WriteString("\n")
		}
		contents = append(contents, b.String())
	}
	for ci, c := range contents {
		key := fmt.Sprintf("in/%d.txt", ci)
		put(t, s, key, []byte(c))
		for _, n := range []int64{1, 2, 3, 4, 7, 100} {
			for _, sp := range cut(key, int64(len(c)), n) {
				type line struct {
					text string
					next int64
				}
				var lines []line
				must(t, readSplit(context.Background(), s, sp, func(b []byte, next int64) error {
					lines = append(lines, line{string(b), next})
					return nil
				}))
				for read := 0; read <= len(lines); read++ {
					next := sp.Offset
					if read > 0 {
						next = lines[read-1].next
					}
					var want []string
					for _, l := range lines[read:] {
						want = append(want, l.text)
					}
					rest, ok := sp.Rest(next)
					if !ok {
						if len(want) > 0 {
							t.Fatalf("%q split %+v after %d lines: nothing left, want %q", c, sp, read, want)
						}
						continue
					}
					if rest.ID() != sp.ID() {
						t.Fatalf("rest %+v has ID %s, the split %s", rest, rest.ID(), sp.ID())
					}
					var got []string
					must(t, readSplit(context.Background(), s, rest, func(b []byte, _ int64) error {
						got = append(got, string(b))
						return nil
					}))
					if !slices.Equal(got, want) {
						t.Fatalf("%q split %+v after %d lines (next %d): rest %+v reads %q, want %q", c, sp, read, next, rest, got, want)
					}
				}
			}
		}
	}
}

// A text source records its position at a trigger: the lines before the
// barrier plus the splits left (checkpoint.RemainingSplits) are every line
// exactly once.
func TestTextSourcePosition(t *testing.T) {
	store := openStore(t)
	var b strings.Builder
	for i := 0; i < 200000; i++ {
		if i%17 == 0 {
			b.WriteString("\n") // empty lines too
		}
		fmt.Fprintf(&b, "line %d\n", i)
	}
	data := b.String()
	put(t, store, "in/a.txt", []byte(data))
	splits := cut("in/a.txt", int64(len(data)), 70000)
	m := newManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := m.OpenInput(ctx, control.InputSpec{ResultID: "out", Producers: 1}, 0)
	must(t, err)
	defer out.Close()
	acks := &fakeAcks{}
	ctl := NewControl()
	run := start(ctx, Spec{
		ExecutionID: "text", JobID: "job1", Tenant: "acme", Parallelism: 1,
		Chain:   []jobgraph.Vertex{{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText}},
		Outputs: []control.OutputSpec{{ResultID: "out", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}},
	}, Deps{Blob: store, Exchange: m, Splits: &splitQueue{sps: slices.Clone(splits)}, Control: ctl, Checkpoints: acks})
	// Read some, trigger while the source is held back by the unread
	// output (megabytes ahead of the exchange's window), read the rest.
	var got []string
	for triggered := false; ; {
		bt, err := out.Next(ctx)
		if err == io.EOF {
			break
		}
		must(t, err)
		if bt.Event.Type == exchange.CheckpointBarrier {
			got = append(got, fmt.Sprint("|", bt.Event.CheckpointID))
		}
		for _, r := range bt.Records {
			got = append(got, string(r.Value))
		}
		if !triggered && len(got) > 1500 {
			must(t, ctl.Trigger(checkpoint.Trigger{ID: 1}))
			triggered = true
		}
	}
	run.wait(t)
	ack, ok := acks.ack(1)
	if !ok || ack.Source == nil || ack.State != nil {
		t.Fatalf("ack %+v: want a source position and no state", ack)
	}
	cutAt := slices.Index(got, "|1")
	if cutAt < 0 {
		t.Fatal("no barrier in the output")
	}
	if len(ack.Source.Finished) == 0 && ack.Source.Current == nil {
		t.Fatalf("empty position %+v", ack.Source)
	}
	before := got[:cutAt]
	rest := readAll(t, store, checkpoint.RemainingSplits(splits, []checkpoint.SourcePosition{*ack.Source}))
	if all := append(slices.Clone(before), rest...); !slices.Equal(all, wantLines([]byte(data))) {
		t.Fatalf("%d lines before the barrier + %d left = %d, want the %d lines once each, in order (position %+v)",
			len(before), len(rest), len(all), len(wantLines([]byte(data))), ack.Source)
	}
	if slices.Equal(append(slices.Clone(got[:cutAt]), got[cutAt+1:]...), wantLines([]byte(data))) == false {
		t.Fatal("the task's own output lost or repeated lines")
	}
}

// failingStore fails the Puts fail picks.
type failingStore struct {
	blob.Store
	fail func(key string) bool
}

func (f failingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.fail(key) {
		return fmt.Errorf("put %s: %w: injected outage", key, blob.ErrUnavailable)
	}
	return f.Store.Put(ctx, key, r, size)
}

// The file sink closes a part at each barrier, uploads it under its pending
// key and lists it in acks until a completed checkpoint covers it; the
// last part and the uncovered ones come back in the Result. It never
// writes a final key. A part whose upload fails declines the checkpoint
// and is retried at the next one.
func TestFileSinkParts(t *testing.T) {
	base := openStore(t)
	var outage atomic.Bool
	store := failingStore{Store: base, fail: func(key string) bool { return outage.Load() && strings.Contains(key, "/pending/") }}
	m := newManager(t)
	ctx := context.Background()
	acks := &fakeAcks{}
	ctl := NewControl()
	sink := jobgraph.Vertex{ID: 5, Name: "files", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorFile, Config: map[string]string{"path": "out/data/"}}
	run := start(ctx, Spec{
		ExecutionID: "sink", JobID: "job1", Tenant: "acme", Parallelism: 1, Attempt: 3,
		Chain: []jobgraph.Vertex{sink}, Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
	}, Deps{Blob: store, Exchange: m, Control: ctl, Checkpoints: acks})
	w := writer(t, m, "in", 0, 1, jobgraph.Forward)
	recs := func(from, to int) []abi.Record {
		var rs []abi.Record
		for i := from; i < to; i++ {
			rs = append(rs, abi.Record{Value: []byte(fmt.Sprint("r", i))})
		}
		return rs
	}
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "r%d\n", i)
		}
		return b.String()
	}
	part := func(seq int) checkpoint.SinkPart {
		return checkpoint.SinkPart{
			Pending: fmt.Sprintf("tenants/acme/jobs/job1/pending/5-0-a3-%08d", seq),
			Final:   fmt.Sprintf("tenants/acme/files/out/data/part-job1-5-0-a3-%08d", seq),
		}
	}
	names := func(ps []checkpoint.SinkPart) []checkpoint.SinkPart {
		out := make([]checkpoint.SinkPart, len(ps))
		for i, p := range ps {
			out[i] = checkpoint.SinkPart{Pending: p.Pending, Final: p.Final}
		}
		return out
	}

	must(t, w.Write(ctx, recs(0, 10)))
	must(t, w.EmitBarrier(ctx, 1))
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.acked(1) })
	a1, _ := acks.ack(1)
	if !slices.Equal(names(a1.SinkParts), []checkpoint.SinkPart{part(0)}) || a1.SinkParts[0].Size != int64(len(lines(0, 10))) {
		t.Fatalf("ack 1 parts %+v, want part 0 of %d bytes", a1.SinkParts, len(lines(0, 10)))
	}
	if got := string(blobtest.GetBytes(t, base, part(0).Pending)); got != lines(0, 10) {
		t.Fatalf("part 0 holds %q", got)
	}

	// Checkpoint 2 is declined: its part cannot be uploaded.
	outage.Store(true)
	must(t, w.Write(ctx, recs(10, 15)))
	must(t, w.EmitBarrier(ctx, 2))
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.declined(2) })
	if d, _ := acks.decline(2); !strings.Contains(d.Reason, "injected outage") || !strings.Contains(d.Reason, part(1).Pending) {
		t.Fatalf("decline reason %q: want the part and the store's error", d.Reason)
	}
	// Checkpoint 1 completes; 3 lists part 1 (retried) and 2, not 0.
	must(t, ctl.Notify(1, true))
	outage.Store(false)
	must(t, w.Write(ctx, recs(15, 20)))
	must(t, w.EmitBarrier(ctx, 3))
	must(t, w.EmitBarrier(ctx, 4)) // nothing new: no empty part
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.acked(4) })
	a3, _ := acks.ack(3)
	if !slices.Equal(names(a3.SinkParts), []checkpoint.SinkPart{part(1), part(2)}) {
		t.Fatalf("ack 3 parts %+v, want parts 1 and 2", a3.SinkParts)
	}
	a4, _ := acks.ack(4)
	if !slices.Equal(names(a4.SinkParts), []checkpoint.SinkPart{part(1), part(2)}) {
		t.Fatalf("ack 4 parts %+v, want parts 1 and 2 (not covered yet)", a4.SinkParts)
	}
	must(t, ctl.Notify(3, true))
	must(t, w.Write(ctx, recs(20, 23)))
	must(t, w.Finish(ctx))
	res := run.wait(t)
	if !slices.Equal(names(res.SinkParts), []checkpoint.SinkPart{part(3)}) {
		t.Fatalf("result parts %+v, want part 3 only", res.SinkParts)
	}
	for o, err := range blob.All(ctx, base, "tenants/acme/files/") {
		must(t, err)
		t.Fatalf("the task wrote a final key: %s", o.Key)
	}
	// What the JobMaster commits is every record once, in order.
	all := []checkpoint.SinkPart{part(0), part(1), part(2), part(3)}
	must(t, checkpoint.Commit(ctx, base, all))
	var got strings.Builder
	for _, p := range all {
		got.Write(blobtest.GetBytes(t, base, p.Final))
	}
	if got.String() != lines(0, 23) {
		t.Fatalf("committed files hold %q", got.String())
	}
}

// The state upload fails: the checkpoint is declined with a reason naming
// the object and the store's error; processing goes on.
func TestStateUploadFailureDeclines(t *testing.T) {
	mod := testGuest(t)
	chain := chainOf(t, plan(t, mod, "sum"), "count")
	store := failingStore{Store: openStore(t), fail: func(key string) bool { return strings.Contains(key, "/checkpoints/") }}
	m := newManager(t)
	ctx := context.Background()
	acks := &fakeAcks{}
	run := start(ctx, Spec{
		ExecutionID: "sum", JobID: "job1", Tenant: "acme", ModuleDigest: mod.Digest(), Args: []string{"sum"},
		Chain: chain, Parallelism: 1, Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
	}, Deps{Modules: oneModule{mod}, Blob: store, Exchange: m, Checkpoints: acks})
	w := writer(t, m, "in", 0, 1, jobgraph.Forward)
	must(t, w.Write(ctx, keyed("a")))
	must(t, w.EmitBarrier(ctx, 1))
	must(t, w.Write(ctx, keyed("a")))
	must(t, w.Finish(ctx))
	res := run.wait(t)
	d, ok := acks.decline(1)
	if !ok || !strings.Contains(d.Reason, "checkpoints/00000000000000000001/task-") || !strings.Contains(d.Reason, "injected outage") || d.ExecutionID != "sum" {
		t.Fatalf("decline %+v: want one naming the state object and the error", d)
	}
	if _, ok := acks.ack(1); ok {
		t.Fatal("acked a checkpoint whose state was not uploaded")
	}
	if lastCount(collected(res), "a") != 2 {
		t.Fatalf("collected %q", collected(res))
	}
}

// blockingSplits hands out the splits sent on its channel; closing it
// means no more.
type blockingSplits struct {
	ch    chan checkpoint.Split
	calls atomic.Int32
}

func (b *blockingSplits) NextSplit(ctx context.Context) (checkpoint.Split, bool, error) {
	b.calls.Add(1)
	select {
	case sp, ok := <-b.ch:
		return sp, !ok, nil
	case <-ctx.Done():
		return checkpoint.Split{}, false, ctx.Err()
	}
}

// A trigger queued before the task runs is taken at its first safe point,
// one that arrives while the source waits for a split is taken there, and
// a task that is not a source declines triggers.
func TestTriggersAtTheEdges(t *testing.T) {
	store := openStore(t)
	put(t, store, "in/a.txt", []byte("x\ny\n"))
	acks := &fakeAcks{}
	ctl := NewControl()
	must(t, ctl.Trigger(checkpoint.Trigger{ID: 1}))
	m := newManager(t)
	splits := &blockingSplits{ch: make(chan checkpoint.Split)}
	run := start(context.Background(), Spec{
		ExecutionID: "t", JobID: "job1", Tenant: "acme", Parallelism: 1,
		Chain: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText},
			{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect},
		},
	}, Deps{Blob: store, Exchange: m, Splits: splits, Control: ctl, Checkpoints: acks})
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.acked(1) })
	if a, _ := acks.ack(1); a.Source == nil || a.Source.Current != nil || len(a.Source.Finished) != 0 || a.State != nil {
		t.Fatalf("ack 1 = %+v, want the position before any split", a)
	}
	splits.ch <- checkpoint.Split{Key: "in/a.txt", Length: 4}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := splits.calls.Load(); n != 2 {
			return fmt.Errorf("%d split requests, want 2", n)
		}
		return nil
	})
	must(t, ctl.Trigger(checkpoint.Trigger{ID: 2}))
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return acks.acked(2) })
	if a, _ := acks.ack(2); a.Source == nil || !slices.Equal(a.Source.Finished, []string{"in/a.txt@4"}) || a.Source.Current != nil {
		t.Fatalf("ack 2 position %+v", a.Source)
	}
	close(splits.ch)
	a2, _ := acks.ack(2)
	if got := collected(run.wait(t), a2); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("collected %q", got)
	}
	if err := ctl.Trigger(checkpoint.Trigger{ID: 3}); !errors.Is(err, ErrEnded) {
		t.Fatalf("trigger after the end: %v", err)
	}

	ctl2 := NewControl()
	run2 := start(context.Background(), Spec{
		ExecutionID: "sink", JobID: "job1", Tenant: "acme", Parallelism: 1,
		Chain:  []jobgraph.Vertex{{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}},
		Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
	}, Deps{Exchange: m, Control: ctl2, Checkpoints: acks})
	w := writer(t, m, "in", 0, 1, jobgraph.Forward)
	must(t, ctl2.Trigger(checkpoint.Trigger{ID: 5}))
	must(t, w.Write(context.Background(), []abi.Record{{Value: []byte("v")}}))
	must(t, w.Finish(context.Background()))
	run2.wait(t)
	if d, ok := acks.decline(5); !ok || !strings.Contains(d.Reason, "not a source") {
		t.Fatalf("trigger of a task with inputs: %+v, want a decline", d)
	}
}

// Every trigger a Control accepts is answered exactly once before Run
// returns, however it races with the end of the task (triggers still
// queued when it finishes are declined).
func TestEveryAcceptedTriggerIsAnswered(t *testing.T) {
	store := openStore(t)
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "l%d\n", i)
	}
	put(t, store, "in/a.txt", []byte(b.String()))
	for round := 0; round < 20; round++ {
		acks := &fakeAcks{}
		ctl := NewControl()
		stop := make(chan struct{})
		accepted := make(chan []int64, 1)
		go func() {
			var ids []int64
			defer func() { accepted <- ids }()
			for id := int64(1); ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				if ctl.pending() {
					runtime.Gosched() // one at a time: the task takes them between lines
					id--
					continue
				}
				err := ctl.Trigger(checkpoint.Trigger{ID: id})
				if errors.Is(err, ErrEnded) {
					return
				}
				if err == nil {
					ids = append(ids, id)
				}
			}
		}()
		_, err := Run(context.Background(), Spec{
			ExecutionID: "t", JobID: "job1", Tenant: "acme", Parallelism: 1,
			Chain: []jobgraph.Vertex{
				{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText},
				{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect},
			},
		}, Deps{Blob: store, Exchange: newManager(t), Splits: &splitQueue{sps: cut("in/a.txt", int64(b.Len()), 500)}, Control: ctl, Checkpoints: acks,
			Logger: slog.New(slog.DiscardHandler)})
		close(stop)
		ids := <-accepted
		must(t, err)
		ackd, declined := acks.answered()
		answered := append(ackd, declined...)
		slices.Sort(answered)
		if !slices.Equal(answered, ids) {
			t.Fatalf("accepted %d triggers, answered %d (acks %v, declines %v)", len(ids), len(answered), ackd, declined)
		}
	}
}

// Invalid file sink paths are refused before the task runs.
func TestFileSinkPathRules(t *testing.T) {
	for _, p := range []string{"", "/abs/path", "a/../b", "..", "a//b", "a/./b", "bad\\name"} {
		_, err := Run(context.Background(), Spec{
			ExecutionID: "s", JobID: "job1", Tenant: "acme", Parallelism: 1,
			Chain:  []jobgraph.Vertex{{ID: 5, Name: "files", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorFile, Config: map[string]string{"path": p}}},
			Inputs: []control.InputSpec{{ResultID: "in", Producers: 1}},
		}, Deps{Blob: openStore(t), Exchange: newManager(t)})
		if err == nil || !strings.Contains(err.Error(), "file sink path") {
			t.Errorf("path %q: err = %v, want a file sink path error", p, err)
		}
	}
}
