//go:build !wasip1

package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/guest/jobtest"
)

// step is one input of a window table test: a record ("key value time")
// or a watermark, and what the window operator emits after it.
type step struct {
	rec  string // "a a1 3": key a, value a1, time 3
	wm   int64  // when rec is ""
	out  []string
	late []string // late records' values
}

func rec(s string) jobtest.Record {
	f := strings.Fields(s)
	return jobtest.Record{Key: []byte(f[0]), HasKey: true, Value: []byte(f[1]), Time: atoi([]byte(f[2])), HasTime: true}
}

// runTable feeds steps to the window operator "win" (its own task: it has
// a main and a late output) and checks what it emits after each: main
// results tagged 0, late records tagged 1.
func runTable(t *testing.T, m *jobtest.Mode, args []string, steps []step) {
	t.Helper()
	ctx := context.Background()
	task, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"win"}})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	for i, s := range steps {
		what := s.rec
		if s.rec != "" {
			err = task.Process(rec(s.rec))
		} else {
			what = "watermark"
			err = task.SetWatermark(s.wm)
		}
		if err != nil {
			t.Fatalf("step %d (%s %d): %v", i, what, s.wm, err)
		}
		var out, late []string
		for _, r := range task.TakeOutput() {
			if len(r.Value) == 0 {
				t.Fatalf("step %d: an untagged output record %+v", i, r)
			}
			switch r.Value[0] {
			case 0:
				out = append(out, string(r.Value[1:]))
				if !r.HasTime {
					t.Errorf("step %d: result %q has no time", i, r.Value[1:])
				}
			case 1:
				late = append(late, string(r.Value[1:]))
			default:
				t.Fatalf("step %d: output tag %d", i, r.Value[0])
			}
		}
		if !slices.Equal(out, s.out) || !slices.Equal(late, s.late) {
			t.Errorf("step %d (%s %d): fired %q late %q, want fired %q late %q", i, what, s.wm, out, late, s.out, s.late)
		}
	}
}

const end = math.MaxInt64

// Over hand-made out-of-order streams: which window each record lands in
// (the process function lists a window's records), when windows fire,
// which records update a fired window within the allowed lateness (it
// fires again with them) and which are late and reach the late output.
func TestWindowTable(t *testing.T) {
	tables := []struct {
		name  string
		args  []string
		steps []step
	}{
		{"tumbling 10 lateness 5", []string{"--kind", "tumbling", "--size", "10", "--lateness", "5", "--fn", "process"}, []step{
			{rec: "a a1 1"},
			{rec: "a a2 12"},
			{rec: "a a3 3"}, // out of order, on time
			{wm: 9, out: []string{"a 0 10 a1,a3"}},
			{rec: "a a4 5", out: []string{"a 0 10 a1,a3,a4"}}, // within lateness: fires again
			{rec: "b b1 8", out: []string{"b 0 10 b1"}},       // a new window already due, within lateness
			{wm: 14},                              // lateness over: [0,10)'s state goes
			{rec: "a a5 7", late: []string{"a5"}}, // beyond lateness
			{rec: "a a6 19"},
			{wm: 19, out: []string{"a 10 20 a2,a6"}},
			{rec: "a a7 21"},
			{rec: "a a8 -3", late: []string{"a8"}}, // before the epoch: window [-10,0), long done
			{wm: end, out: []string{"a 20 30 a7"}},
		}},
		{"tumbling 10 no lateness", []string{"--kind", "tumbling", "--size", "10", "--fn", "process"}, []step{
			{rec: "a a1 1"},
			{wm: 9, out: []string{"a 0 10 a1"}},
			{rec: "a a2 9", late: []string{"a2"}}, // at the watermark: late
			{rec: "a a3 10"},
			{wm: end, out: []string{"a 10 20 a3"}},
		}},
		{"sliding 10 every 5", []string{"--kind", "sliding", "--size", "10", "--slide", "5", "--fn", "process"}, []step{
			{rec: "a a1 7"}, // in [0,10) and [5,15)
			{rec: "a a2 12"},
			{wm: 9, out: []string{"a 0 10 a1"}},
			{rec: "a a3 8"},                       // [0,10) is done, [5,15) is not: not late
			{rec: "a a4 3", late: []string{"a4"}}, // [-5,5) and [0,10) are done
			{wm: 14, out: []string{"a 5 15 a1,a2,a3"}},
			{wm: end, out: []string{"a 10 20 a2"}},
		}},
		{"session gap 10 lateness 5", []string{"--kind", "session", "--size", "10", "--lateness", "5", "--fn", "process"}, []step{
			{rec: "a a1 0"},
			{rec: "a a2 5"}, // merges: [0,15)
			{rec: "a a3 30"},
			{rec: "b b1 3"},
			{wm: 14, out: []string{"b 3 13 b1", "a 0 15 a1,a2"}}, // timers earliest first
			{rec: "a a4 12"}, // merges into the fired session, which grows past the watermark
			{wm: 21, out: []string{"a 0 22 a1,a2,a4"}},
			{rec: "a a5 20"}, // [0,30)
			{wm: 40, out: []string{"a 0 30 a1,a2,a4,a5", "a 30 40 a3"}},
			{rec: "a a6 32"},                       // [30,42)
			{rec: "a a7 10", late: []string{"a7"}}, // [0,30)'s lateness ended at 34
			{rec: "b b2 1", late: []string{"b2"}},
			{wm: end, out: []string{"a 30 42 a3,a6"}},
		}},
	}
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		for _, tb := range tables {
			t.Run(tb.name, func(t *testing.T) { runTable(t, m, tb.args, tb.steps) })
		}
	})
}

// windowRun feeds a generated out-of-order stream (3 keys, times going
// back up to 30 ms and every 13th 100 ms more, a pause of 100 ms every 50
// records, a watermark 25 ms behind the newest time every 4 records) to "win" and returns what it emits, sorted; with cut ≥ 0 it
// takes a snapshot after input cut, ends that task, and finishes the
// stream on restoreP subtasks restored from the snapshot (each fed the keys
// it owns).
func windowRun(t *testing.T, m *jobtest.Mode, args []string, cut, restoreP int) []string {
	t.Helper()
	ctx := context.Background()
	const n = 400
	type input struct {
		r  jobtest.Record
		wm int64 // after r; 0: none
	}
	var in []input
	newest := int64(0)
	for i := int64(0); i < n; i++ {
		ts := 10*i + 100*(i/50) - (i*7919)%31 // back by up to 30 ms, a pause every 50
		if i%13 == 12 {
			ts -= 100 // and now and then far back: late, or a late update
		}
		newest = max(newest, ts)
		x := input{r: jobtest.Record{Key: []byte("k" + string(rune('0'+i%3))), HasKey: true,
			Value: []byte(fmtInt(i)), Time: ts, HasTime: true}}
		if i%4 == 3 {
			x.wm = newest - 25
		}
		in = append(in, x)
	}
	var out []string
	take := func(task *jobtest.Task) {
		for _, r := range task.TakeOutput() {
			out = append(out, string(r.Value[:1])+" "+fmtInt(r.Time)+" "+string(r.Value[1:]))
		}
	}
	feed := func(task *jobtest.Task, from, to int, owned func([]byte) bool) {
		for _, x := range in[from:to] {
			if owned(x.r.Key) {
				if err := task.Process(x.r); err != nil {
					t.Fatal(err)
				}
			}
			if x.wm != 0 {
				if err := task.SetWatermark(x.wm); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	all := func([]byte) bool { return true }
	task, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"win"}})
	if err != nil {
		t.Fatal(err)
	}
	if cut < 0 {
		feed(task, 0, n, all)
		if err := task.SetWatermark(end); err != nil {
			t.Fatal(err)
		}
		take(task)
		must(t, task.Close())
		slices.Sort(out)
		return out
	}
	feed(task, 0, cut, all)
	var lastWM int64
	for _, x := range in[:cut] {
		if x.wm != 0 {
			lastWM = x.wm
		}
	}
	snap, err := task.Barrier(1)
	if err != nil {
		t.Fatal(err)
	}
	take(task)
	// Output after the snapshot is lost with the task, as a failure loses
	// what no checkpoint covers.
	feed(task, cut, n, all)
	task.TakeOutput()
	must(t, task.Close())
	for s := 0; s < restoreP; s++ {
		r, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"win"}, Subtask: s, Parallelism: restoreP, Restore: [][]byte{snap}})
		if err != nil {
			t.Fatal(err)
		}
		// Watermarks are not in snapshots: the restored task learns where
		// event time was first, as the job's source tells it on a cluster.
		if lastWM != 0 {
			must(t, r.SetWatermark(lastWM))
		}
		feed(r, cut, n, r.Owns)
		if err := r.SetWatermark(end); err != nil {
			t.Fatal(err)
		}
		take(r)
		must(t, r.Close())
	}
	slices.Sort(out)
	return out
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every window kind and function, over an out-of-order stream with late
// records and late updates: a snapshot in the middle restored at
// parallelism 2 gives exactly the output of the uninterrupted run, so no
// window fires twice or is lost across a restore and a rescale.
func TestWindowsRestoreAtAnotherParallelism(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		for _, kind := range [][]string{
			{"--kind", "tumbling", "--size", "40"},
			{"--kind", "sliding", "--size", "40", "--slide", "20"},
			{"--kind", "session", "--size", "35"},
		} {
			for _, fn := range []string{"aggregate", "reduce", "process"} {
				args := append([]string{"--fn", fn, "--lateness", "10"}, kind...)
				t.Run(kind[1]+" "+fn, func(t *testing.T) {
					want := windowRun(t, m, args, -1, 1)
					var late, fired int
					for _, l := range want {
						if l[0] == 1 {
							late++
						} else {
							fired++
						}
					}
					t.Logf("%d results, %d late records", fired, late)
					if late < 5 || fired < 10 {
						t.Fatalf("the stream gives %d results and %d late records: it tests nothing", fired, late)
					}
					for _, cut := range []int{101, 250, 312} {
						if got := windowRun(t, m, args, cut, 2); !slices.Equal(got, want) {
							t.Errorf("cut at %d, restored at p=2:\n%q\nwant\n%q", cut, got, want)
						}
					}
				})
			}
		}
	})
}

// BenchmarkWindowAggregate is the window operator's cost per record,
// natively and in the sandbox: tumbling 1 s windows of records 1 ms apart,
// a sum per key, batches of 1000 records each followed by a watermark (so
// windows fire as they go). With 10 keys a window holds 100 records of a
// key; with 1000 keys one, so every record opens a window and fires it.
func BenchmarkWindowAggregate(b *testing.B) {
	for _, bc := range []struct {
		mode string
		keys int
	}{{"native", 10}, {"wasm", 10}, {"native", 1000}, {"wasm", 1000}} {
		mode := bc.mode
		b.Run(fmt.Sprintf("%s/keys=%d", mode, bc.keys), func(b *testing.B) {
			m := jobtest.Native()
			if mode == "wasm" {
				m = jobtest.Wasm(b, ".")
			}
			task, err := m.Open(context.Background(), jobtest.TaskConfig{Args: []string{"--size", "1000"}, Operators: []string{"win"}})
			if err != nil {
				b.Fatal(err)
			}
			defer task.Close()
			keys := make([][]byte, bc.keys)
			for i := range keys {
				keys[i] = []byte("k" + fmtInt(int64(i)))
			}
			batch := make([]jobtest.Record, 1000)
			b.ResetTimer()
			var ts int64
			for done := 0; done < b.N; done += len(batch) {
				for i := range batch {
					batch[i] = jobtest.Record{Key: keys[i%len(keys)], HasKey: true, Value: []byte("7"), Time: ts, HasTime: true}
					ts++
				}
				if err := task.Process(batch...); err != nil {
					b.Fatal(err)
				}
				if err := task.SetWatermark(ts - 1); err != nil {
					b.Fatal(err)
				}
				task.TakeOutput()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
