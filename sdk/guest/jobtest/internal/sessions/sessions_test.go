//go:build !wasip1

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/guest/jobtest"
	"github.com/sluicehq/sluice/wasmhost"
)

// batches are the session operator's input: batch b arrives at processing
// time 5b and holds key kj when (b/(j+1)) is even, so k0 is in every other
// batch (its gap of 10 ms never ends a session), k1 in two of every four
// (15 ms gaps end its sessions) and so on.
func batches(n int) [][]string {
	var out [][]string
	for b := 0; b < n; b++ {
		var kv []string
		for j := 0; j < 4; j++ {
			if (b/(j+1))%2 == 0 {
				kv = append(kv, fmt.Sprintf("k%d", j), string(rune('a'+b%26)))
			}
		}
		out = append(out, kv)
	}
	return out
}

// observed is what a test of the session operator sees.
type observed struct {
	Output   []string
	Counters map[string]int64
}

// sessionOp runs the session operator over the batches, with a snapshot
// after batch cut (when cut ≥ 0) restored into parallelism restoreP, its
// subtasks run one after another; first and second are the modes before
// and after the snapshot. The processing time is 5b at batch b and 1000
// at the end, which fires every session left.
func sessionOp(t testing.TB, first, second *jobtest.Mode, cut, restoreP int) observed {
	t.Helper()
	ctx := context.Background()
	args := []string{"--gap", "10"}
	in := batches(24)
	obs := observed{Counters: map[string]int64{}}
	collect := func(task *jobtest.Task) {
		for _, r := range task.TakeOutput() {
			obs.Output = append(obs.Output, string(r.Value))
		}
		for k, v := range task.Counters() {
			obs.Counters[k] += v
		}
	}
	feed := func(task *jobtest.Task, from int, owned func(key string) bool) {
		for b := from; b < len(in); b++ {
			if err := task.SetProcessingTime(int64(5 * b)); err != nil {
				t.Fatal(err)
			}
			var kv []string
			for i := 0; i < len(in[b]); i += 2 {
				if owned(in[b][i]) {
					kv = append(kv, in[b][i], in[b][i+1])
				}
			}
			if err := task.ProcessKeyed(kv...); err != nil {
				t.Fatal(err)
			}
			if b == cut {
				return
			}
		}
		if err := task.SetProcessingTime(1000); err != nil {
			t.Fatal(err)
		}
		if err := task.EndInput(); err != nil {
			t.Fatal(err)
		}
	}
	all := func(string) bool { return true }
	task, err := first.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"session", "format"}})
	if err != nil {
		t.Fatal(err)
	}
	feed(task, 0, all)
	if cut < 0 {
		collect(task)
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
		return obs
	}
	snap, err := task.Barrier(1)
	if err != nil {
		t.Fatal(err)
	}
	collect(task)
	if err := task.Close(); err != nil {
		t.Fatal(err)
	}
	for s := 0; s < restoreP; s++ {
		task, err := second.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"session", "format"},
			Subtask: s, Parallelism: restoreP, Restore: [][]byte{snap}})
		if err != nil {
			t.Fatal(err)
		}
		feed(task, cut+1, func(k string) bool { return task.Owns([]byte(k)) })
		collect(task)
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return obs
}

func TestSessionsSameNativeAndWasm(t *testing.T) {
	obs := jobtest.Identical(t, ".", func(t testing.TB, m *jobtest.Mode) observed { return sessionOp(t, m, m, -1, 1) })
	// Not a vacuous equality: sessions ended by timers during the run,
	// and the rest at the end.
	if obs.Counters["events"] == 0 || obs.Counters["sessions"] != int64(len(obs.Output)) || len(obs.Output) < 8 {
		t.Fatalf("counters %v, %d lines: %q", obs.Counters, len(obs.Output), obs.Output)
	}
	// Every event is in exactly one session.
	var count int64
	for _, line := range obs.Output {
		var k string
		var sum, n int64
		if _, err := fmt.Sscanf(line, "%s\t%d\t%d", &k, &sum, &n); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		count += n
	}
	if count != obs.Counters["events"] {
		t.Errorf("sessions hold %d events, the operator saw %d", count, obs.Counters["events"])
	}
}

// A snapshot taken mid-stream and restored, at the same parallelism or
// rescaled (keyed state and timers by key group), gives the output of the
// uninterrupted run; the snapshot of one mode restores in the other.
func TestSessionsRestoreGivesTheUninterruptedOutput(t *testing.T) {
	native, wasm := jobtest.Native(), jobtest.Wasm(t, ".")
	want := sessionOp(t, native, native, -1, 1)
	sort := func(o observed) observed { o.Output = slices.Sorted(slices.Values(o.Output)); return o }
	for _, tc := range []struct {
		name          string
		first, second *jobtest.Mode
		restoreP      int
	}{
		{"native", native, native, 1},
		{"wasm", wasm, wasm, 1},
		{"native to wasm", native, wasm, 1},
		{"wasm to native", wasm, native, 1},
		{"native rescaled to 2", native, native, 2},
		{"wasm rescaled to 3", wasm, wasm, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cut := range []int{0, 7, 13} {
				got := sessionOp(t, tc.first, tc.second, cut, tc.restoreP)
				if tc.restoreP == 1 {
					// One subtask: the very same sequence.
					if !slices.Equal(got.Output, want.Output) || fmt.Sprint(got.Counters) != fmt.Sprint(want.Counters) {
						t.Fatalf("cut after batch %d:\ngot  %v %q\nwant %v %q", cut, got.Counters, got.Output, want.Counters, want.Output)
					}
					continue
				}
				if g, w := sort(got), sort(want); !slices.Equal(g.Output, w.Output) || fmt.Sprint(g.Counters) != fmt.Sprint(w.Counters) {
					t.Fatalf("cut after batch %d:\ngot  %v %q\nwant %v %q", cut, g.Counters, g.Output, w.Counters, w.Output)
				}
			}
		})
	}
}

// The source keeps its position in operator state: polled, snapshotted
// and restored, it emits every event exactly once.
func TestSourceResumesFromOperatorState(t *testing.T) {
	got := jobtest.Identical(t, ".", func(t testing.TB, m *jobtest.Mode) []string {
		ctx := context.Background()
		cfg := jobtest.TaskConfig{Args: []string{"--events", "20", "--keys", "3"}, Operators: []string{"events", "key"}}
		task, err := m.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if done, err := task.Poll(4); err != nil || done {
				t.Fatalf("poll: done %v, %v", done, err)
			}
		}
		snap, err := task.Barrier(1)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := task.OperatorState("events", "next"); !ok || len(v) != 8 || v[0] != 8 {
			t.Fatalf("operator state %v %v, want position 8", v, ok)
		}
		// Records after the snapshot are lost with the task.
		if _, err := task.Poll(4); err != nil {
			t.Fatal(err)
		}
		out := task.TakeOutput()[:8]
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}

		cfg.Restore = [][]byte{snap}
		task, err = m.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		for done := false; !done; {
			if done, err = task.Poll(5); err != nil {
				t.Fatal(err)
			}
		}
		var lines []string
		for _, r := range append(out, task.Output()...) {
			lines = append(lines, fmt.Sprintf("%s=%d", r.Key, r.Value[0]))
		}
		return lines
	})
	if len(got) != 20 || got[0] != "k0=1" || got[19] != "k1=20" {
		t.Errorf("events %q", got)
	}
}

// A whole-job run (source, hash edge, session operator, collect) gives the
// same result in both modes, at several parallelisms.
func TestRunJobSameNativeAndWasm(t *testing.T) {
	for _, p := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			res := jobtest.Identical(t, ".", func(t testing.TB, m *jobtest.Mode) *jobtest.Result {
				res, err := m.RunJob(context.Background(), jobtest.JobConfig{
					Args:        []string{"--events", "60", "--keys", "5", "--gap", "2"},
					Parallelism: p, BatchRecords: 2, ProcessingTimeStep: 1,
				})
				if err != nil {
					t.Fatal(err)
				}
				return res
			})
			if res.Counters["events"] != 60 || res.Counters["sessions"] == 0 || int64(len(res.Collected)) != res.Counters["sessions"] {
				t.Errorf("counters %v, %d collected", res.Counters, len(res.Collected))
			}
		})
	}
}

// The file sink receives what the collect sink would.
func TestRunJobFileSink(t *testing.T) {
	args := []string{"--events", "40", "--keys", "5", "--gap", "2"}
	run := func(t testing.TB, m *jobtest.Mode, args []string) *jobtest.Result {
		res, err := m.RunJob(context.Background(), jobtest.JobConfig{Args: args, Parallelism: 2, BatchRecords: 2, ProcessingTimeStep: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	files := jobtest.Identical(t, ".", func(t testing.TB, m *jobtest.Mode) []string {
		return run(t, m, append(args, "--files", "sessions/out")).Files["sessions/out"]
	})
	collected := run(t, jobtest.Native(), args).Collected
	if len(files) == 0 || !slices.Equal(files, collected) {
		t.Errorf("file sink %q, collect sink %q", files, collected)
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	*testing.T
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Identical notices a job that behaves differently natively and in Wasm.
func TestIdenticalDetectsADifference(t *testing.T) {
	for _, mark := range []bool{false, true} {
		rec := &recorder{T: t}
		jobtest.Identical(rec, ".", func(t testing.TB, m *jobtest.Mode) []string {
			args := []string{"--events", "6", "--keys", "2"}
			if mark {
				args = append(args, "--mark-platform")
			}
			res, err := m.RunJob(context.Background(), jobtest.JobConfig{Args: args, ProcessingTimeStep: 100})
			if err != nil {
				t.Fatal(err)
			}
			return res.Collected
		})
		switch {
		case mark && (len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "differently natively and in wasm")):
			t.Errorf("a platform-dependent job: errors %q, want one naming the difference", rec.errs)
		case !mark && len(rec.errs) != 0:
			t.Errorf("a deterministic job: errors %q", rec.errs)
		}
	}
}

// failure is what a test sees of a guest failure.
type failure struct {
	Function, Cause, Message string
}

func failureOf(t testing.TB, err error) failure {
	t.Helper()
	var ge *wasmhost.GuestError
	if !errors.As(err, &ge) {
		t.Fatalf("error %v (%T), want a *wasmhost.GuestError", err, err)
	}
	return failure{ge.Function, ge.Cause.Error(), ge.Message}
}

// Misuse of the ABI fails the same way in both modes: a key outside the
// subtask's key groups traps, and bad arguments fail the plan with the
// job's message.
func TestFailuresSameNativeAndWasm(t *testing.T) {
	fails := jobtest.Identical(t, ".", func(t testing.TB, m *jobtest.Mode) []failure {
		ctx := context.Background()
		var out []failure
		_, err := m.Plan(ctx, []string{"--keys", "0"})
		out = append(out, failureOf(t, err))
		task, err := m.Open(ctx, jobtest.TaskConfig{Operators: []string{"session"}, Subtask: 0, Parallelism: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		key := "k0"
		for i := 1; task.Owns([]byte(key)); i++ {
			key = fmt.Sprint("k", i)
		}
		err = task.ProcessKeyed(key, "x")
		out = append(out, failureOf(t, err))
		if !errors.Is(err, wasmhost.ErrTrap) {
			t.Errorf("error %v, want a trap", err)
		}
		// The task is unusable afterwards.
		if err2 := task.ProcessKeyed(key, "y"); !errors.Is(err2, wasmhost.ErrTrap) {
			t.Errorf("after a failure: %v", err2)
		}
		return out
	})
	if !strings.Contains(fails[0].Message, "want --keys") || !strings.Contains(fails[1].Message, "which this subtask does not hold") {
		t.Errorf("failures %+v", fails)
	}
}

// A timer fires when processing time reaches it, not before, and the
// operator's keyed state is the host's to inspect.
func TestTimerFiresAtItsTime(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		task, err := m.Open(context.Background(), jobtest.TaskConfig{Args: []string{"--gap", "10"}, Operators: []string{"session"}})
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		if err := task.AdvanceProcessingTime(5); err != nil {
			t.Fatal(err)
		}
		if err := task.Process(jobtest.Record{Key: []byte("k0"), HasKey: true, Value: []byte{7, 0, 0, 0, 0, 0, 0, 0}}); err != nil {
			t.Fatal(err)
		}
		if at, ok := task.NextTimer(); !ok || at != 15 {
			t.Fatalf("next timer %d %v, want 15", at, ok)
		}
		if v, ok, err := task.KeyedState("session", "sum", []byte("k0")); err != nil || !ok || v[0] != 7 {
			t.Fatalf("keyed state %v %v %v", v, ok, err)
		}
		if err := task.AdvanceProcessingTime(9); err != nil || len(task.Output()) != 0 {
			t.Fatalf("at 14: %v, output %q", err, task.OutputValues())
		}
		if err := task.AdvanceProcessingTime(1); err != nil {
			t.Fatal(err)
		}
		if got := task.OutputValues(); task.ProcessingTime() != 15 || len(got) != 1 || got[0] != "k0\t7\t1" {
			t.Fatalf("at %d: output %q", task.ProcessingTime(), got)
		}
		if _, ok, _ := task.KeyedState("session", "sum", []byte("k0")); ok {
			t.Error("the session's state is left after its timer")
		}
		if _, ok := task.NextTimer(); ok {
			t.Error("a timer is left")
		}
	})
}
