package wasmhost

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
)

// TestWordCountExample runs examples/wordcount through wasmhost the way a
// TaskManager would at parallelism 2 (the host reads lines for the text
// source, hash-partitions by key group between the two chains, and collects
// the sink's values), and checks the counts against coreutils.
func TestWordCountExample(t *testing.T) {
	ctx := context.Background()
	input := "../examples/wordcount/testdata/hamlet.txt"
	path, err := guestbuild.Build(ctx, "../examples/wordcount")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := testGuest(t)
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--input", input}
	g, err := mod.Plan(ctx, args, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	const p = 2
	if err := jobgraph.Validate(g, p, 0); err != nil {
		t.Fatal(err)
	}
	chains := jobgraph.Chains(g, p)
	if len(chains) != 2 {
		t.Fatalf("chains %+v", chains)
	}
	byID := map[int]jobgraph.Vertex{}
	for _, v := range g.Vertices {
		byID[v.ID] = v
	}
	guestOps := func(c jobgraph.Chain) (ops []jobgraph.Vertex) {
		for _, id := range c.Vertices {
			if byID[id].Connector == "" {
				ops = append(ops, byID[id])
			}
		}
		return ops
	}
	maxP := jobgraph.MaxParallelismOf(g)

	// Downstream: count -> format, one instance per subtask, collecting.
	var collected []string
	down := make([]*Instance, p)
	for i := range down {
		in, err := mod.Instantiate(ctx, TaskConfig{
			JobID: "wc", TaskName: "count", Chain: guestOps(chains[1]), Subtask: i, Parallelism: p, Args: args,
			Emit: func(recs []abi.Record) error {
				for _, r := range recs {
					collected = append(collected, string(r.Value))
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close(ctx)
		if err := in.Open(ctx); err != nil {
			t.Fatal(err)
		}
		down[i] = in
	}
	// Upstream: tokenize -> key_by, whose output the host hash-partitions.
	up := make([]*Instance, p)
	for i := range up {
		in, err := mod.Instantiate(ctx, TaskConfig{
			JobID: "wc", TaskName: "tokenize", Chain: guestOps(chains[0]), Subtask: i, Parallelism: p, Args: args,
			Emit: func(recs []abi.Record) error {
				parts := make([][]abi.Record, p)
				for _, r := range recs {
					s := keygroup.Subtask(keygroup.Of(r.Key, maxP), p, maxP)
					parts[s] = append(parts[s], r)
				}
				for s, part := range parts {
					if err := down[s].Process(ctx, part); err != nil {
						return err
					}
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close(ctx)
		if err := in.Open(ctx); err != nil {
			t.Fatal(err)
		}
		up[i] = in
	}
	// The text source: lines round-robin to the two upstream subtasks.
	b, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var firstFuel int64
	for i, line := range lines {
		if err := up[i%p].Process(ctx, []abi.Record{{Value: []byte(line)}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstFuel = up[0].Fuel()
		}
	}
	// The guest's fuel and memory, as the TaskManager's metrics read them.
	if f := up[0].Fuel(); firstFuel <= 0 || f <= firstFuel {
		t.Errorf("fuel after the first line %d, after all %d: want it positive and growing", firstFuel, f)
	}
	if n := up[0].MemoryPages(); n <= 0 {
		t.Errorf("memory pages %d", n)
	}
	for _, in := range append(up, down...) {
		if err := in.EndInput(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(collected)
	want := coreutilsWordCount(t, input)
	if strings.Join(collected, "\n") != strings.Join(want, "\n") {
		t.Fatalf("word counts differ from coreutils:\ngot  %q\nwant %q", collected, want)
	}
}

// coreutilsWordCount is the oracle: tr | tr | sort | uniq -c, as
// "word\tcount" lines sorted.
func coreutilsWordCount(t *testing.T, path string) []string {
	t.Helper()
	cmd := exec.Command("sh", "-c", `LC_ALL=C tr -cs 'A-Za-z' '\n' < "$1" | LC_ALL=C tr 'A-Z' 'a-z' | grep -v '^$' | LC_ALL=C sort | uniq -c`, "sh", path)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("coreutils: %v", err)
	}
	var res []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var n int
		var w string
		if _, err := fmt.Sscan(sc.Text(), &n, &w); err != nil {
			t.Fatalf("uniq output %q: %v", sc.Text(), err)
		}
		res = append(res, fmt.Sprintf("%s\t%d", w, n))
	}
	sort.Strings(res)
	return res
}
