package localtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/wasmhost"
)

// CheckCombinerEmitsCountsPerCall runs a word count's tokenize chain
// (module wasm) alone in wazero, with and without --combine, over the same
// batches: without it the chain emits one record per word; with it, one
// per distinct word of each call, valued with the word's count in that
// call, which add up to the same totals.
func CheckCombinerEmitsCountsPerCall(t *testing.T, wasm []byte) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := GenerateText(in, 256<<10, 2); err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var lines []abi.Record
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		lines = append(lines, abi.Record{Value: bytes.Clone(bytes.TrimSuffix(sc.Bytes(), []byte("\r")))})
	}
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	// run feeds lines to the tokenize chain in batches of 512 and returns
	// the number of records it emitted and the total per word.
	run := func(args []string) (records int, totals map[string]int64) {
		t.Helper()
		g, err := mod.Plan(ctx, args, wasmhost.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int]jobgraph.Vertex{}
		for _, v := range g.Vertices {
			byID[v.ID] = v
		}
		var ops []jobgraph.Vertex
		for _, id := range jobgraph.Chains(g, 1)[0].Vertices {
			if byID[id].Connector == "" {
				ops = append(ops, byID[id])
			}
		}
		totals = map[string]int64{}
		combined := len(args) > 2
		inst, err := mod.Instantiate(ctx, wasmhost.TaskConfig{JobID: "j", TaskName: "t", Chain: ops, Parallelism: 1, Args: args,
			Emit: func(recs []abi.Record) error {
				for _, r := range recs {
					records++
					n := int64(1)
					if combined {
						if len(r.Value) != 8 {
							t.Fatalf("combined record %q has a %d-byte value, want an 8-byte count", r.Key, len(r.Value))
						}
						n = int64(binary.LittleEndian.Uint64(r.Value))
					}
					totals[string(r.Key)] += n
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close(ctx)
		if err := inst.Open(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(lines); i += 512 {
			if err := inst.Process(ctx, lines[i:min(i+512, len(lines))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := inst.EndInput(ctx); err != nil {
			t.Fatal(err)
		}
		return records, totals
	}
	words, plain := run([]string{"--input", in})
	records, combined := run([]string{"--input", in, "--combine"})
	if len(plain) != len(combined) {
		t.Fatalf("%d distinct words combined, %d without", len(combined), len(plain))
	}
	for w, n := range plain {
		if combined[w] != n {
			t.Errorf("%q: %d combined, %d without", w, combined[w], n)
		}
	}
	if records >= words/2 {
		t.Errorf("the combiner emitted %d records for %d words: it does not combine", records, words)
	}
	t.Logf("%d words, %d combined records (%.0f%%)", words, records, 100*float64(records)/float64(words))
}
