package bench

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

// BenchmarkGuestChains runs the word count's two guest chains of each
// language alone in wazero, without the cluster, over the word count's
// input: the tokenize chain (lines -> words keyed by themselves, one
// process call per batch of 1024 lines) and the count chain (the keyed
// words -> counts, then end of input: format and emit). ns/word_tokenize
// and ns/word_count are per word of the input; native_ns/word is the
// native baseline's whole run per word, for scale. It shows where a
// guest's share of BenchmarkWordCount*P2 goes.
func BenchmarkGuestChains(b *testing.B) {
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, inputSize, 1); err != nil {
		b.Fatal(err)
	}
	f, err := os.ReadFile(in)
	if err != nil {
		b.Fatal(err)
	}
	var lines []abi.Record
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		lines = append(lines, abi.Record{Value: bytes.Clone(bytes.TrimSuffix(sc.Bytes(), []byte("\r")))})
	}
	t0 := time.Now()
	if _, err := nativeWordCount(in); err != nil {
		b.Fatal(err)
	}
	native := time.Since(t0)
	for _, g := range []struct {
		name string
		wasm func() []byte
	}{
		{"go", func() []byte { return localtest.Guest(b, "examples/wordcount") }},
		{"c", func() []byte { return localtest.CGuest(b, "examples/wordcount-c") }},
		{"rust", func() []byte { return localtest.RustGuest(b, "examples/wordcount-rs") }},
		{"as", func() []byte { return localtest.ASGuest(b, "examples/wordcount-as") }},
	} {
		b.Run(g.name, func(b *testing.B) {
			benchChains(b, g.wasm(), in, lines, native)
		})
	}
}

func benchChains(b *testing.B, wasm []byte, in string, lines []abi.Record, native time.Duration) {
	ctx := context.Background()
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
	chains := jobgraph.Chains(g, 1)
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
	open := func(chain []jobgraph.Vertex, emit func([]abi.Record) error) *wasmhost.Instance {
		inst, err := mod.Instantiate(ctx, wasmhost.TaskConfig{JobID: "bench", TaskName: "t", Chain: chain, Parallelism: 1, Args: args, Emit: emit})
		if err != nil {
			b.Fatal(err)
		}
		if err := inst.Open(ctx); err != nil {
			b.Fatal(err)
		}
		return inst
	}
	// The count chain's input, keyed words, made natively once: the
	// callbacks below only count, so the timings are the guest's and
	// wasmhost's (decoding the emitted batches), not the harness's.
	var keyed []abi.Record
	for _, l := range lines {
		for _, w := range nativeWords(l.Value) {
			keyed = append(keyed, abi.Record{Key: w, HasKey: true, Value: w})
		}
	}
	var tokenize, count time.Duration
	b.ResetTimer()
	for b.Loop() {
		emitted := 0
		up := open(guestOps(chains[0]), func(recs []abi.Record) error { emitted += len(recs); return nil })
		t0 := time.Now()
		for i := 0; i < len(lines); i += 1024 {
			if err := up.Process(ctx, lines[i:min(i+1024, len(lines))]); err != nil {
				b.Fatal(err)
			}
		}
		tokenize += time.Since(t0)
		up.Close(ctx)
		if emitted != len(keyed) {
			b.Fatalf("the tokenize chain emitted %d words, want %d", emitted, len(keyed))
		}
		results := 0
		down := open(guestOps(chains[1]), func(recs []abi.Record) error { results += len(recs); return nil })
		t1 := time.Now()
		for i := 0; i < len(keyed); i += 4096 {
			if err := down.Process(ctx, keyed[i:min(i+4096, len(keyed))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := down.EndInput(ctx); err != nil {
			b.Fatal(err)
		}
		count += time.Since(t1)
		down.Close(ctx)
		if results == 0 {
			b.Fatal("the count chain emitted nothing")
		}
	}
	words := len(keyed)
	n := float64(b.N) * float64(words)
	b.ReportMetric(float64(tokenize.Nanoseconds())/n, "ns/word_tokenize")
	b.ReportMetric(float64(count.Nanoseconds())/n, "ns/word_count")
	b.ReportMetric(float64(native.Nanoseconds())/float64(words), "native_ns/word")
}

// nativeWords splits line as the word count does: maximal runs of ASCII
// letters, lower-cased.
func nativeWords(line []byte) [][]byte {
	var out [][]byte
	var w []byte
	for _, c := range append(line, ' ') {
		switch {
		case c >= 'a' && c <= 'z':
			w = append(w, c)
		case c >= 'A' && c <= 'Z':
			w = append(w, c+'a'-'A')
		default:
			if len(w) > 0 {
				out = append(out, w)
				w = nil
			}
		}
	}
	return out
}
