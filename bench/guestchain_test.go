package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

// BenchmarkWordCountGuestChains says where a word count's guest time goes:
// each language's module runs its two chains in wazero, without a cluster,
// over the benchmark's input at parallelism 1, in batches of 1024 records
// as a TaskManager passes them. tokenize_ns/word is the first chain (lines
// in; tokenize and key_by; keyed words out), count_ns/word the second
// (keyed words in; the reduce, its end of input and the format out), both
// per word of the input and including the host's side of the calls
// (encoding the batch in, decoding the batch out).
func BenchmarkWordCountGuestChains(b *testing.B) {
	for _, lang := range []struct {
		name  string
		build func(testing.TB, string) []byte
		dir   string
	}{
		{"go", localtest.Guest, "examples/wordcount"},
		{"c", localtest.CGuest, "examples/wordcount-c"},
		{"rust", localtest.RustGuest, "examples/wordcount-rs"},
	} {
		b.Run(lang.name, func(b *testing.B) { benchGuestChains(b, lang.build(b, lang.dir)) })
	}
}

func benchGuestChains(b *testing.B, wasm []byte) {
	ctx := context.Background()
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, inputSize, 1); err != nil {
		b.Fatal(err)
	}
	text, err := os.ReadFile(in)
	if err != nil {
		b.Fatal(err)
	}
	var lines [][]abi.Record
	for i, l := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		if i%1024 == 0 {
			lines = append(lines, nil)
		}
		lines[len(lines)-1] = append(lines[len(lines)-1], abi.Record{Value: []byte(l)})
	}
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--input", in}
	g, err := mod.Plan(ctx, args, wasmhost.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	byID := map[int]jobgraph.Vertex{}
	for _, v := range g.Vertices {
		byID[v.ID] = v
	}
	var chains [][]jobgraph.Vertex
	for _, c := range jobgraph.Chains(g, 1) {
		var ops []jobgraph.Vertex
		for _, id := range c.Vertices {
			if byID[id].Connector == "" {
				ops = append(ops, byID[id])
			}
		}
		chains = append(chains, ops)
	}
	if len(chains) != 2 {
		b.Fatalf("%d chains, want tokenize and count", len(chains))
	}
	open := func(chain []jobgraph.Vertex, emit func([]abi.Record) error) *wasmhost.Instance {
		inst, err := mod.Instantiate(ctx, wasmhost.TaskConfig{JobID: "bench", TaskName: chain[0].Name, Chain: chain, Parallelism: 1, Args: args, Emit: emit})
		if err != nil {
			b.Fatal(err)
		}
		if err := inst.Open(ctx); err != nil {
			b.Fatal(err)
		}
		return inst
	}

	// The words, keyed, once: the count chain's input.
	var words [][]abi.Record
	n := 0
	up := open(chains[0], func(recs []abi.Record) error {
		for _, r := range recs {
			if n%1024 == 0 {
				words = append(words, nil)
			}
			n++
			words[len(words)-1] = append(words[len(words)-1], abi.Record{Key: append([]byte(nil), r.Key...), HasKey: true, Value: append([]byte(nil), r.Value...)})
		}
		return nil
	})
	for _, batch := range lines {
		if err := up.Process(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	up.Close(ctx)

	var tokenize, count time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		emitted := 0
		up := open(chains[0], func(recs []abi.Record) error { emitted += len(recs); return nil })
		down := open(chains[1], func(recs []abi.Record) error { return nil })
		b.StartTimer()
		t0 := time.Now()
		for _, batch := range lines {
			if err := up.Process(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for _, batch := range words {
			if err := down.Process(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := down.EndInput(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		tokenize += t1.Sub(t0)
		count += t2.Sub(t1)
		b.StopTimer()
		if emitted != n {
			b.Fatalf("tokenize emitted %d words, want %d", emitted, n)
		}
		up.Close(ctx)
		down.Close(ctx)
		b.StartTimer()
	}
	per := float64(b.N) * float64(n)
	b.ReportMetric(float64(tokenize.Nanoseconds())/per, "tokenize_ns/word")
	b.ReportMetric(float64(count.Nanoseconds())/per, "count_ns/word")
	b.ReportMetric(float64(n), "words")
}
