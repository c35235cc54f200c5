//go:build !wasip1

// The word count under the job test harness (sdk/guest/jobtest): the same
// tests run the job as Go code in this test binary and as the compiled
// module in wazero, without a cluster. This file is a test of package main
// so that the job's init registers it here.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/sdk/guest/jobtest"
)

// countWords is the test's own word count, the oracle: words are maximal
// runs of ASCII letters, lower-cased; one "word<TAB>count" line per word,
// sorted.
func countWords(text string) []string {
	counts := map[string]int{}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		counts[strings.ToLower(w)]++
	}
	var lines []string
	for w, n := range counts {
		lines = append(lines, fmt.Sprintf("%s\t%d", w, n))
	}
	slices.Sort(lines)
	return lines
}

// The whole job over a file, natively and in wazero, at several
// parallelisms: both modes give the same records in the same order, and
// the counts are the oracle's.
func TestWordCountHarness(t *testing.T) {
	text, err := os.ReadFile("testdata/hamlet.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := countWords(string(text))
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			got := jobtest.Identical(t, ".", func(t testing.TB, m *jobtest.Mode) []string {
				res, err := m.RunJob(context.Background(), jobtest.JobConfig{
					Args: []string{"--input", "testdata/hamlet.txt"}, Parallelism: p,
				})
				if err != nil {
					t.Fatal(err)
				}
				return res.Collected
			})
			if got = slices.Sorted(slices.Values(got)); !slices.Equal(got, want) {
				t.Errorf("counts differ from the oracle's:\ngot  %q\nwant %q", got, want)
			}
		})
	}
}

// The Wasm mode runs any guest: the word counts in C, Rust and
// AssemblyScript, compiled and run in wazero by the same test, give the
// records this Go job gives natively.
func TestWordCountSameInEveryLanguage(t *testing.T) {
	run := func(t testing.TB, m *jobtest.Mode) []string {
		res, err := m.RunJob(context.Background(), jobtest.JobConfig{
			Args: []string{"--input", "testdata/hamlet.txt"}, Parallelism: 2,
		})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(slices.Values(res.Collected))
	}
	want := run(t, jobtest.Native())
	for _, lang := range []struct {
		dir       string
		toolchain func(context.Context) error
		required  bool
	}{
		{"../wordcount-c", guestbuild.CToolchain, guestbuild.CRequired()},
		{"../wordcount-rs", guestbuild.RustToolchain, guestbuild.RustRequired()},
		{"../wordcount-as", guestbuild.ASToolchain, guestbuild.ASRequired()},
	} {
		t.Run(filepath.Base(lang.dir), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := lang.toolchain(ctx); err != nil {
				if lang.required {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			if got := run(t, jobtest.Wasm(t, lang.dir)); !slices.Equal(got, want) {
				t.Errorf("%s in wasm:\n%q\nthe Go job natively:\n%q", lang.dir, got, want)
			}
		})
	}
}

// The count operator alone: records in, a snapshot, a restore into two
// subtasks (keyed state moves by key group), the final counts at the end
// of input.
func TestWordCountOperatorRestores(t *testing.T) {
	jobtest.Run(t, ".", func(t *testing.T, m *jobtest.Mode) {
		ctx := context.Background()
		args := []string{"--input", "in.txt"}
		ops := reduceChain(t, m, args)
		task, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: ops})
		if err != nil {
			t.Fatal(err)
		}
		if err := task.ProcessKeyed("to", "to", "be", "be", "to", "to"); err != nil {
			t.Fatal(err)
		}
		snap, err := task.Barrier(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Close(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for s := 0; s < 2; s++ {
			task, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: ops, Subtask: s, Parallelism: 2, Restore: [][]byte{snap}})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"to", "or", "not"} {
				if task.Owns([]byte(w)) {
					if err := task.ProcessKeyed(w, w); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := task.EndInput(); err != nil {
				t.Fatal(err)
			}
			got = append(got, task.OutputValues()...)
			if err := task.Close(); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(got)
		if want := []string{"be\t1", "not\t1", "or\t1", "to\t3"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// reduceChain returns the names of the job's reduce and the guest
// operators after it, from its plan: the test does not depend on what the
// job calls them.
func reduceChain(t *testing.T, m *jobtest.Mode, args []string) []string {
	g, err := m.Plan(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	next := map[int]int{}
	for _, e := range g.Edges {
		next[e.Source] = e.Target
	}
	byID := map[int]jobgraph.Vertex{}
	id := 0
	for _, v := range g.Vertices {
		byID[v.ID] = v
		if v.Kind == jobgraph.KindReduce {
			id = v.ID
		}
	}
	var ops []string
	for v, ok := byID[id]; ok && v.Connector == ""; v, ok = byID[next[v.ID]] {
		ops = append(ops, v.Name)
	}
	if len(ops) == 0 {
		t.Fatalf("the job has no reduce: %+v", g)
	}
	return ops
}

// A word count test in a few lines, natively: the job over an input given
// in the test, its collected output sorted.
func Example_harness() {
	res, err := jobtest.Native().RunJob(context.Background(), jobtest.JobConfig{
		Args:   []string{"--input", "poem.txt"},
		Inputs: map[string]string{"poem.txt": "To be, or not to be:\nthat is the question.\n"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	slices.Sort(res.Collected)
	for _, line := range res.Collected {
		fmt.Println(strings.ReplaceAll(line, "\t", " "))
	}
	// Output:
	// be 2
	// is 1
	// not 1
	// or 1
	// question 1
	// that 1
	// the 1
	// to 2
}

// BenchmarkHarnessWordCount is the word count of 1 MiB of text through
// RunJob at parallelism 2, natively and in wazero: what a harness test of
// the job costs in each mode (BENCHMARKS.md).
func BenchmarkHarnessWordCount(b *testing.B) {
	text, err := os.ReadFile("testdata/hamlet.txt")
	if err != nil {
		b.Fatal(err)
	}
	input := strings.Repeat(string(text), (1<<20)/len(text)+1)
	cfg := jobtest.JobConfig{Args: []string{"--input", "in.txt"}, Parallelism: 2, Inputs: map[string]string{"in.txt": input}}
	for _, m := range []*jobtest.Mode{jobtest.Native(), jobtest.Wasm(b, ".")} {
		b.Run(m.String(), func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			for b.Loop() {
				if _, err := m.RunJob(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
