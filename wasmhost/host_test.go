package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
)

func TestPlan(t *testing.T) {
	_, mod := testGuest(t)
	g, err := mod.Plan(context.Background(), []string{"reduce"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := jobgraph.Validate(g, 2, 0); err != nil {
		t.Fatalf("the guest's graph is invalid: %v\n%+v", err, g)
	}
	kinds := []jobgraph.Kind{}
	for _, v := range g.Vertices {
		kinds = append(kinds, v.Kind)
	}
	want := []jobgraph.Kind{jobgraph.KindSource, jobgraph.KindFlatMap, jobgraph.KindKeyBy, jobgraph.KindReduce, jobgraph.KindMap, jobgraph.KindSink}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	if g.Vertices[0].Connector != jobgraph.ConnectorText || g.Vertices[0].Config["paths"] != `["input.txt"]` {
		t.Errorf("source vertex %+v", g.Vertices[0])
	}
	if g.Edges[2].Partitioner != jobgraph.Hash {
		t.Errorf("key_by -> reduce edge is %s, want hash", g.Edges[2].Partitioner)
	}
}

func TestIdentityRoundTrip(t *testing.T) {
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{})
	recs := []abi.Record{
		{Value: []byte("plain")},
		{Key: []byte("k"), HasKey: true, Value: []byte("keyed")},
		{Key: []byte{}, HasKey: true, Value: nil},
		{Time: -5, HasTime: true, Value: []byte{0, 1, 2, 255}},
		{Key: []byte("both"), HasKey: true, Time: 1 << 40, HasTime: true, Value: bytes.Repeat([]byte("x"), 100000)},
	}
	for round := 0; round < 3; round++ {
		tt.out = nil
		if err := tt.in.Process(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
		if got, want := abi.AppendBatch(nil, tt.out), abi.AppendBatch(nil, recs); !bytes.Equal(got, want) {
			t.Fatalf("round %d: output batch differs from input (%d vs %d bytes)", round, len(got), len(want))
		}
	}
}

func TestKeyedStateTimersBarrierSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	keyed := func(vals ...string) []abi.Record {
		recs := textRecords(vals...)
		for i := range recs {
			recs[i].Key, recs[i].HasKey = recs[i].Value, true
		}
		return recs
	}
	// Chain: process "count" (vertex 3), fed by hash from key_by (vertex 2).
	tt := openTask(t, []string{"keyed"}, []int{3}, TaskConfig{JobID: "j", TaskName: "count"})
	step := func(tt *testTask, vals ...string) []string {
		t.Helper()
		tt.out = nil
		if err := tt.in.Process(ctx, keyed(vals...)); err != nil {
			t.Fatal(err)
		}
		return values(tt.out)
	}
	if got := step(tt, "a", "b", "a"); strings.Join(got, ",") != "a=1,b=1,a=2" {
		t.Fatalf("first batch: %q", got)
	}
	if got := step(tt, "a"); strings.Join(got, ",") != "a=3" {
		t.Fatalf("state did not persist across calls: %q", got)
	}
	// Timers are set at now+10 on the virtual clock, which starts at 0.
	if at, ok := tt.in.NextTimer(); !ok || at != 10 {
		t.Fatalf("next timer %d %v, want 10", at, ok)
	}

	if err := tt.in.Barrier(ctx, 7); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := tt.in.State().snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if c := tt.in.Counters(); c["records"] != 4 || c["barriers"] != 1 {
		t.Errorf("counters %v, want records=4 barriers=1", c)
	}

	// A fresh instance restored from the snapshot behaves as the original.
	st := NewState(jobgraph.DefaultMaxParallelism, 0, jobgraph.DefaultMaxParallelism-1)
	if err := st.Restore(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	tt2 := openTask(t, []string{"keyed"}, []int{3}, TaskConfig{JobID: "j", TaskName: "count", State: st})
	for _, task := range []*testTask{tt, tt2} {
		if got := step(task, "b", "a", "c"); strings.Join(got, ",") != "b=2,a=4,c=1" {
			t.Fatalf("after the barrier: %q", got)
		}
		task.out = nil
		if err := task.in.FireTimers(ctx, 10); err != nil {
			t.Fatal(err)
		}
		got := values(task.out)
		if strings.Join(got, ",") != "timer a@10 n=4,timer b@10 n=2,timer c@10 n=1" {
			t.Fatalf("timers: %q", got)
		}
		if _, ok := task.in.NextTimer(); ok {
			t.Error("timers left after firing them all")
		}
		// Operator state carried the barrier count into the restored instance.
		if err := task.in.Barrier(ctx, 8); err != nil {
			t.Fatal(err)
		}
	}
	var s1, s2 bytes.Buffer
	tt.in.State().snapshot(&s1)
	tt2.in.State().snapshot(&s2)
	if content(t, s1.Bytes()) != content(t, s2.Bytes()) {
		t.Error("the original and the restored instance ended in different states")
	}
	if !bytes.Contains(s2.Bytes(), []byte("barriers")) || !bytes.Contains(s2.Bytes(), []byte{'2'}) {
		t.Error("operator state missing from the snapshot")
	}
}

func TestReduceEmitsFinalResultsAtEndOfInput(t *testing.T) {
	ctx := context.Background()
	tt := openTask(t, []string{"reduce"}, []int{4, 5}, TaskConfig{})
	words := strings.Fields("the cat and the hat and the bat")
	for i := 0; i < 3; i++ {
		recs := textRecords(words...)
		for i := range recs {
			recs[i].Key, recs[i].HasKey = recs[i].Value, true
		}
		if err := tt.in.Process(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	if len(tt.out) != 0 {
		t.Fatalf("a final reduce emitted before the end of input: %q", values(tt.out))
	}
	if err := tt.in.EndInput(ctx); err != nil {
		t.Fatal(err)
	}
	got := values(tt.out)
	sort.Strings(got)
	want := []string{"and\t6", "bat\t3", "cat\t3", "hat\t3", "the\t9"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("final results %q, want %q", got, want)
	}
}

// TestReduceBarrierSnapshotRestoreIsExactlyOnce checks that a Reduce, which
// keeps accumulators in guest memory between barriers, hands all of them to
// the host at a barrier: a run interrupted right after a checkpoint and
// restored from it into a fresh instance ends with the same result as an
// uninterrupted one, in both emit modes.
func TestReduceBarrierSnapshotRestoreIsExactlyOnce(t *testing.T) {
	ctx := context.Background()
	keyed := func(text string) []abi.Record {
		recs := textRecords(strings.Fields(text)...)
		for i := range recs {
			recs[i].Key, recs[i].HasKey = recs[i].Value, true
		}
		return recs
	}
	before := keyed("the cat and the hat and the bat")
	after := keyed("the bat sat and the cat ran")
	for _, mode := range []string{"reduce", "reduce-each"} {
		t.Run(mode, func(t *testing.T) {
			run := func(tt *testTask, batches ...[]abi.Record) {
				t.Helper()
				for _, b := range batches {
					if err := tt.in.Process(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
			}
			end := func(tt *testTask) []string {
				t.Helper()
				if err := tt.in.EndInput(ctx); err != nil {
					t.Fatal(err)
				}
				got := values(tt.out)
				if mode == "reduce" {
					sort.Strings(got)
				}
				return got
			}
			restore := func(snap []byte) *State {
				t.Helper()
				st := NewState(jobgraph.DefaultMaxParallelism, 0, jobgraph.DefaultMaxParallelism-1)
				if err := st.Restore(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				return st
			}

			// Uninterrupted, with a barrier between the batches.
			whole := openTask(t, []string{mode}, []int{4, 5}, TaskConfig{})
			run(whole, before)
			if err := whole.in.Barrier(ctx, 1); err != nil {
				t.Fatal(err)
			}
			run(whole, after)
			want := end(whole)

			// Interrupted right after the checkpoint: the snapshot taken
			// after the barrier must hold every record before it.
			first := openTask(t, []string{mode}, []int{4, 5}, TaskConfig{})
			run(first, before)
			if err := first.in.Barrier(ctx, 1); err != nil {
				t.Fatal(err)
			}
			var snap bytes.Buffer
			if err := first.in.State().snapshot(&snap); err != nil {
				t.Fatal(err)
			}
			emittedBefore := len(first.out)
			first.in.Close(ctx)

			// Only the checkpointed part, ended at once.
			onlyBefore := openTask(t, []string{mode}, []int{4, 5}, TaskConfig{State: restore(snap.Bytes())})
			if got := end(onlyBefore); mode == "reduce" && strings.Join(got, ",") != "and\t2,bat\t1,cat\t1,hat\t1,the\t3" {
				t.Fatalf("the checkpoint holds %q, want the counts of the records before the barrier", got)
			}

			restored := openTask(t, []string{mode}, []int{4, 5}, TaskConfig{State: restore(snap.Bytes())})
			run(restored, after)
			got := end(restored)
			if mode == "reduce-each" {
				// The uninterrupted run emitted the first part's updates
				// before the barrier; the restored one continues from them.
				got = append(values(first.out[:emittedBefore]), got...)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("restored run gave %q,\nuninterrupted %q", got, want)
			}
		})
	}
}

func TestGuestSourceResumesFromOperatorState(t *testing.T) {
	ctx := context.Background()
	args := []string{"source", "10"}
	tt := openTask(t, args, []int{1, 2}, TaskConfig{})
	done, err := tt.in.SourcePoll(ctx, 4)
	if err != nil || done {
		t.Fatalf("poll: %v %v", done, err)
	}
	if err := tt.in.Barrier(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	tt.in.State().snapshot(&snap)

	st := NewState(jobgraph.DefaultMaxParallelism, 0, jobgraph.DefaultMaxParallelism-1)
	if err := st.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	tt2 := openTask(t, args, []int{1, 2}, TaskConfig{State: st})
	for !done {
		if done, err = tt2.in.SourcePoll(ctx, 4); err != nil {
			t.Fatal(err)
		}
	}
	got := append(values(tt.out), values(tt2.out)...)
	if strings.Join(got, ",") != "00,11,22,33,44,55,66,77,88,99" {
		t.Fatalf("source output %q", got)
	}
}

func TestOneCallInAndOneEmitOutPerBatch(t *testing.T) {
	ctx := context.Background()
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{})
	batch := make([]abi.Record, 1000)
	for i := range batch {
		batch[i].Value = bytes.Repeat([]byte{byte(i)}, 100)
	}
	if err := tt.in.Process(ctx, batch); err != nil { // sizes the input region
		t.Fatal(err)
	}
	before := tt.in.callStats()
	const batches = 50
	for i := 0; i < batches; i++ {
		if err := tt.in.Process(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	d := tt.in.callStats()
	calls, emits, allocs, host := d.Calls-before.Calls, d.Emits-before.Emits, d.Allocs-before.Allocs, d.HostCalls-before.HostCalls
	t.Logf("%d batches of %d records: %d calls in, %d emits out, %d allocs, %d host calls", batches, len(batch), calls, emits, allocs, host)
	if calls != batches || emits != batches || allocs != 0 || host != batches {
		t.Errorf("crossings per batch: %d calls, %d emits, %d allocs, %d host calls; want exactly 1, 1, 0, 1",
			calls/batches, emits/batches, allocs, host/batches)
	}
	if len(tt.out) != (batches+1)*len(batch) {
		t.Errorf("%d records out, want %d", len(tt.out), (batches+1)*len(batch))
	}
}

func TestKeyOutsideTheSubtasksKeyGroupsTraps(t *testing.T) {
	// Subtask 0 of 2 holds key groups 0..63; find a key in 64..127.
	var key []byte
	for i := 0; ; i++ {
		key = []byte(fmt.Sprint("k", i))
		if keygroup.Of(key, jobgraph.DefaultMaxParallelism) >= 64 {
			break
		}
	}
	tt := openTask(t, []string{"keyed"}, []int{3}, TaskConfig{Subtask: 0, Parallelism: 2})
	err := tt.in.Process(context.Background(), []abi.Record{{Key: key, HasKey: true, Value: key}})
	ge := requireGuestError(t, err, ErrTrap)
	if !strings.Contains(ge.Message, "does not hold") {
		t.Errorf("message %q", ge.Message)
	}
}

func TestEmitErrorAbortsTheCall(t *testing.T) {
	boom := errors.New("downstream is gone")
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{Emit: func([]abi.Record) error { return boom }})
	err := tt.in.Process(context.Background(), textRecords("x"))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	var ge *GuestError
	if errors.As(err, &ge) {
		t.Errorf("a host error came back as a guest error: %v", err)
	}
}

func TestInstantiateRejectsBadTaskConfig(t *testing.T) {
	_, mod := testGuest(t)
	ctx := context.Background()
	m := jobgraph.Vertex{ID: 2, Kind: jobgraph.KindMap}
	for name, cfg := range map[string]TaskConfig{
		"empty chain":    {Parallelism: 1},
		"bad subtask":    {Parallelism: 2, Subtask: 2, Chain: []jobgraph.Vertex{m}},
		"host connector": {Parallelism: 1, Chain: []jobgraph.Vertex{{ID: 1, Kind: jobgraph.KindSource, Connector: "text"}}},
		"p above max":    {Parallelism: 8, MaxParallelism: 4, Chain: []jobgraph.Vertex{m}},
		"state range":    {Parallelism: 2, Chain: []jobgraph.Vertex{m}, State: NewState(128, 0, 127)},
	} {
		if in, err := mod.Instantiate(ctx, cfg); err == nil {
			in.Close(ctx)
			t.Errorf("%s: accepted", name)
		}
	}
}
