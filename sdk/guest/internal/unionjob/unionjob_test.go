//go:build !wasip1

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
	want "github.com/sluicehq/sluice/internal/uniontest"
	"github.com/sluicehq/sluice/sdk/guest/jobtest"
)

// The whole job in the harness, natively and in wazero, at parallelism 1
// and 3: a union sums both sources' events, a window join (tumbling or
// sliding) pairs each key's a and b events of a window, a cogroup lists
// them, an interval join pairs those within the interval.
func TestUnionAndJoinJobs(t *testing.T) {
	const events, keys, size = 2_000, 5, 100
	for _, tc := range []struct {
		mode string
		args []string
		want []string
	}{
		{"union", nil, want.Union(events, keys, size)},
		{"join", nil, want.Join(events, keys, size, size)},
		{"cogroup", nil, want.CoGroup(events, keys, size, size)},
		{"join", []string{"--slide", "30"}, want.Join(events, keys, size, 30)},
		{"cogroup", []string{"--slide", "50"}, want.CoGroup(events, keys, size, 50)},
		{"interval", []string{"--lower", "-40", "--upper", "70"}, want.Interval(events, keys, -40, 70)},
		{"interval", []string{"--lower", "10", "--upper", "10"}, want.Interval(events, keys, 10, 10)},
		{"typed-interval", []string{"--lower", "-40", "--upper", "70"}, want.Interval(events, keys, -40, 70)},
	} {
		if len(tc.want) == 0 {
			t.Fatalf("%s %v: the oracle has no lines: the test would prove nothing", tc.mode, tc.args)
		}
		jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
			for _, p := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s %v p%d", tc.mode, tc.args, p), func(t *testing.T) {
					r, err := m.RunJob(context.Background(), jobtest.JobConfig{Parallelism: p, BatchRecords: 37, Args: append([]string{
						"--mode", tc.mode, "--events", fmt.Sprint(events), "--keys", fmt.Sprint(keys), "--size", fmt.Sprint(size)}, tc.args...)})
					if err != nil {
						t.Fatal(err)
					}
					got := slices.Sorted(slices.Values(r.Collected))
					if !slices.Equal(got, tc.want) {
						t.Fatalf("%d lines, want %d; first got %q, first want %q", len(got), len(tc.want), head(got), head(tc.want))
					}
				})
			}
		})
	}
}

func head(s []string) []string { return s[:min(3, len(s))] }

// A join is each side's KeyBy (which tags the records) feeding one keyed
// operator by two hash edges: not chained to either side, so its task has
// two inputs.
func TestJoinGraph(t *testing.T) {
	g, err := jobtest.Native().Plan(context.Background(), []string{"--mode", "join"})
	if err != nil {
		t.Fatal(err)
	}
	if err := jobgraph.Validate(g, 2, 0); err != nil {
		t.Fatal(err)
	}
	name := func(id int) string { return g.Vertices[id-1].Name }
	var edges []string
	for _, e := range g.Edges {
		edges = append(edges, name(e.Source)+">"+name(e.Target)+":"+string(e.Partitioner))
	}
	if got, want := strings.Join(edges, " "), "a>win.left:forward b>win.right:forward win.left>win:hash win.right>win:hash win>format:forward format>out:forward"; got != want {
		t.Errorf("edges %s\nwant  %s", got, want)
	}
	var chains []string
	for _, c := range jobgraph.Chains(g, 2) {
		var ns []string
		for _, id := range c.Vertices {
			ns = append(ns, name(id))
		}
		chains = append(chains, strings.Join(ns, "+"))
	}
	if got, want := strings.Join(chains, " "), "a+win.left b+win.right win+format+out"; got != want {
		t.Errorf("chains %s, want %s", got, want)
	}
}

// The join operator as one task fed by both sides' tasks: a window fires
// when the watermark (the smaller of the sides', which the task merges)
// passes its end, with the records of both sides; a record of a window
// that fired is late and dropped.
func TestJoinFiresAtTheWatermark(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		ctx := context.Background()
		args := []string{"--mode", "cogroup", "--size", "100"}
		l := side(t, m, args, "win.left", rec("k", "l1", 10), rec("j", "l2", 150), rec("k", "late", 50))
		r := side(t, m, args, "win.right", rec("k", "r1", 20), rec("k", "r2", 99), rec("j", "r3", 120))
		join, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"win"}})
		if err != nil {
			t.Fatal(err)
		}
		defer join.Close()
		feed := func(recs []jobtest.Record) {
			t.Helper()
			if err := join.Process(recs...); err != nil {
				t.Fatal(err)
			}
		}
		wm := func(ts int64, want ...string) {
			t.Helper()
			if err := join.SetWatermark(ts); err != nil {
				t.Fatal(err)
			}
			got := join.OutputValues()
			join.TakeOutput()
			if !slices.Equal(got, want) {
				t.Errorf("at watermark %d: %q, want %q", ts, got, want)
			}
		}
		feed(l[0])
		feed(r[0])
		feed(l[1])
		feed(r[1])
		wm(98)
		wm(99, "k 0 l1 r1,r2")
		feed(r[2])
		feed(l[2]) // its window fired: dropped
		wm(250, "j 100 l2 r3")
		if err := join.EndInput(); err != nil {
			t.Fatal(err)
		}
		if got := join.OutputValues(); len(got) != 0 {
			t.Errorf("at the end: %q, want nothing", got)
		}
	})
}

// An interval join as one task fed by both sides' tasks: a pair is emitted
// when its later record arrives, with the later time; each side's records
// stay in keyed state until the watermark passes the last time the other
// side could join them, and a record at or below the watermark is late.
func TestIntervalJoinKeepsRecordsUntilTheWatermark(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		ctx := context.Background()
		args := []string{"--mode", "interval", "--lower", "-50", "--upper", "50"}
		l := side(t, m, args, "win.left", rec("k", "l1", 100), rec("k", "l2", 160), rec("k", "l3", 140))
		r := side(t, m, args, "win.right", rec("k", "r1", 120), rec("k", "r2", 40), rec("k", "r3", 60))
		join, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"win"}})
		if err != nil {
			t.Fatal(err)
		}
		defer join.Close()
		step := func(what string, do func() error, want ...string) {
			t.Helper()
			if err := do(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range join.TakeOutput() {
				got = append(got, fmt.Sprintf("%s@%d", o.Value, o.Time))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %q, want %q", what, got, want)
			}
		}
		feed := func(recs []jobtest.Record) func() error { return func() error { return join.Process(recs...) } }
		waiting := func(name string, want bool) {
			t.Helper()
			_, ok, err := join.KeyedState("win", name, []byte("k"))
			if err != nil || ok != want {
				t.Errorf("state %s of k: present %v (%v), want %v", name, ok, err, want)
			}
		}
		step("l1", feed(l[0]))
		step("r1", feed(r[0]), "k l1 r1@120")
		step("r2 (before l1's interval)", feed(r[1]))
		step("r3", feed(r[2]), "k l1 r3@100")
		step("watermark 150", func() error { return join.SetWatermark(150) })
		waiting("L", false) // l1 could join right records up to 150 only
		waiting("R", true)  // r1 (at 120) can still join left records up to 170
		step("l2", feed(l[1]), "k l2 r1@160")
		step("l3 (late)", feed(l[2]))
		if n := join.Counters()["win.late"]; n != 1 {
			t.Errorf("win.late = %d, want 1", n)
		}
		step("watermark 300", func() error { return join.SetWatermark(300) })
		waiting("L", false)
		waiting("R", false)
	})
}

func rec(key, value string, ts int64) jobtest.Record {
	return jobtest.Record{Key: []byte(key), HasKey: true, Value: []byte(value), Time: ts, HasTime: true}
}

// side runs recs through a join side's task (op: its KeyBy, which keys
// and tags them) and returns what it emitted for each. One task at a
// time: a native task is the process's only one.
func side(t *testing.T, m *jobtest.Mode, args []string, op string, recs ...jobtest.Record) [][]jobtest.Record {
	t.Helper()
	task, err := m.Open(context.Background(), jobtest.TaskConfig{Args: args, Operators: []string{op}})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	var out [][]jobtest.Record
	for _, r := range recs {
		if err := task.Process(r); err != nil {
			t.Fatal(err)
		}
		out = append(out, task.TakeOutput())
	}
	return out
}
