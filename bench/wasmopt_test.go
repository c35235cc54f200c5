package bench

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/wasmhost"
)

// wasmOptGuest builds the Go guest at rel with wasm-opt at level ("" for
// none), in the user cache, so a second run of the benchmark reuses it.
func wasmOptGuest(b *testing.B, rel, level string) []byte {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if level != "" {
		if err := guestbuild.WasmOptToolchain(ctx); err != nil {
			b.Skip(err)
		}
	}
	path, err := guestbuild.BuildWith(ctx, filepath.Join(localtest.ModuleRoot(b), rel), guestbuild.Options{WasmOpt: level})
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return wasm
}

// BenchmarkWordCountWasmOptP2 runs the Go word count (examples/wordcount)
// at parallelism 2, as BenchmarkWordCountP2 does, once as go build writes it
// and once optimized by wasm-opt at each level, on one embedded cluster.
// Each iteration runs every module once, rotating which goes first so no
// level always meets a warmer or busier machine, and every module's counts
// are checked against the native word count first. <level>_x_plain is the
// median over iterations of the plain module's time divided by the
// optimized one's (above 1: wasm-opt made the job faster); plain_ms is the
// plain module's median time.
func BenchmarkWordCountWasmOptP2(b *testing.B) {
	const rel = "examples/wordcount"
	levels := []string{"", "O1", "O2", "O3", "O4", "Os"}
	mods := make([][]byte, len(levels))
	for i, l := range levels {
		mods[i] = wasmOptGuest(b, rel, l)
	}
	c, cl, _, in := setupWith(b, 2, mods[0])
	ctx := context.Background()
	args := []string{"--input", in}
	want, err := nativeWordCount(in)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(want)
	specs := make([]client.JobSpec, len(levels))
	for i, wasm := range mods {
		_, r, err := localtest.RunJob(ctx, cl, c.Blob(), wasm, args, 2)
		if err != nil || r.State != client.StateFinished {
			b.Fatalf("warm-up job (wasm-opt %q): %v %s %s", levels[i], err, r.State, r.Failure)
		}
		if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
			b.Fatalf("wasm-opt %q: the counts differ from the native word count:\n%s", levels[i], d)
		}
		specs[i] = jobSpec(b, c, cl, wasm, args, nil)
	}

	times := make([][]time.Duration, len(levels))
	b.SetBytes(inputSize)
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		for k := range levels {
			i := (n + k) % len(levels)
			t0 := time.Now()
			runJob(b, cl, specs[i])
			times[i] = append(times[i], time.Since(t0))
		}
	}
	b.StopTimer()
	reportWasmOpt(b, levels, times)
}

// BenchmarkGuestChainsWasmOpt runs the Go word count's two guest chains
// (as BenchmarkGuestChains does: tokenize, then count with the end of
// input) alone in wazero, plain and optimized by wasm-opt at each level:
// the guest's own code, where an optimizer's effect is not diluted by the
// cluster. Each iteration runs every module once, rotating which goes
// first. <level>_x_plain is the median over iterations of the plain
// module's time (both chains) divided by the optimized one's; plain_ms the
// plain module's median.
func BenchmarkGuestChainsWasmOpt(b *testing.B) {
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
	var keyed []abi.Record
	for _, l := range lines {
		for _, w := range nativeWords(l.Value) {
			keyed = append(keyed, abi.Record{Key: w, HasKey: true, Value: w})
		}
	}
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	levels := []string{"", "O1", "O2", "O3", "O4", "Os"}
	runs := make([]func() time.Duration, len(levels))
	for i, l := range levels {
		runs[i] = wasmOptChains(b, rt, wasmOptGuest(b, "examples/wordcount", l), in, lines, keyed)
		runs[i]() // warm up, and check the module's output
	}
	times := make([][]time.Duration, len(levels))
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		for k := range levels {
			i := (n + k) % len(levels)
			times[i] = append(times[i], runs[i]())
		}
	}
	b.StopTimer()
	reportWasmOpt(b, levels, times)
}

// wasmOptChains compiles wasm and returns a function that runs its tokenize
// chain over lines and its count chain over keyed, each in a fresh
// instance, checks what they emit, and returns the time the two took.
func wasmOptChains(b *testing.B, rt *wasmhost.Runtime, wasm []byte, in string, lines, keyed []abi.Record) func() time.Duration {
	ctx := context.Background()
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
	return func() time.Duration {
		emitted, results := 0, 0
		up := open(chains[0], func(recs []abi.Record) error { emitted += len(recs); return nil })
		down := open(chains[1], func(recs []abi.Record) error { results += len(recs); return nil })
		defer up.Close(ctx)
		defer down.Close(ctx)
		t0 := time.Now()
		for i := 0; i < len(lines); i += 1024 {
			if err := up.Process(ctx, lines[i:min(i+1024, len(lines))]); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < len(keyed); i += 4096 {
			if err := down.Process(ctx, keyed[i:min(i+4096, len(keyed))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := down.EndInput(ctx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if emitted != len(keyed) || results == 0 {
			b.Fatalf("the chains emitted %d words and %d counts, want %d words and some counts", emitted, results, len(keyed))
		}
		return d
	}
}

// reportWasmOpt reports the plain module's median time and, per level, the
// median over iterations of plain time ÷ optimized time.
func reportWasmOpt(b *testing.B, levels []string, times [][]time.Duration) {
	b.ReportMetric(float64(wasmOptMedian(times[0]).Milliseconds()), "plain_ms")
	for i := 1; i < len(levels); i++ {
		ratios := make([]float64, len(times[i]))
		for j := range ratios {
			ratios[j] = float64(times[0][j]) / float64(times[i][j])
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], levels[i]+"_x_plain")
	}
}

func wasmOptMedian(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
