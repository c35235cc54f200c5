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
	in, lines := chainInput(b)
	t0 := time.Now()
	if _, err := nativeWordCount(in); err != nil {
		b.Fatal(err)
	}
	native := time.Since(t0)
	for _, g := range []struct {
		name string
		wasm func() []byte
	}{
		{"go", func() []byte { return localtest.Guest(b, "examples/wordcount-bytes") }},
		{"go-typed", func() []byte { return localtest.Guest(b, "examples/wordcount") }},
		{"c", func() []byte { return localtest.CGuest(b, "examples/wordcount-c") }},
		{"rust", func() []byte { return localtest.RustGuest(b, "examples/wordcount-rs") }},
		{"as", func() []byte { return localtest.ASGuest(b, "examples/wordcount-as") }},
	} {
		b.Run(g.name, func(b *testing.B) {
			benchChains(b, g.wasm(), in, lines, native)
		})
	}
}

// chainInput writes the word count's input and returns it as the text
// connector's records.
func chainInput(b *testing.B) (string, []abi.Record) {
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
	return in, lines
}

func benchChains(b *testing.B, wasm []byte, in string, lines []abi.Record, native time.Duration) {
	c := newChains(b, wasm, in, lines)
	defer c.close()
	var tokenize, count time.Duration
	b.ResetTimer()
	for b.Loop() {
		tok, cnt := c.pass(b)
		tokenize += tok
		count += cnt
	}
	n := float64(b.N) * float64(len(c.keyed))
	b.ReportMetric(float64(tokenize.Nanoseconds())/n, "ns/word_tokenize")
	b.ReportMetric(float64(count.Nanoseconds())/n, "ns/word_count")
	b.ReportMetric(float64(native.Nanoseconds())/float64(len(c.keyed)), "native_ns/word")
}

// chains is a word count module's two guest chains, compiled and planned
// once, run by pass.
type chains struct {
	rt        *wasmhost.Runtime
	mod       *wasmhost.Module
	args      []string
	up, down  []jobgraph.Vertex
	lines     []abi.Record
	keyed     []abi.Record
	closeOnce func()
}

func newChains(b *testing.B, wasm []byte, in string, lines []abi.Record) *chains {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		b.Fatal(err)
	}
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--input", in}
	g, err := mod.Plan(ctx, args, wasmhost.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	cs := jobgraph.Chains(g, 1)
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
	// The count chain's input, keyed words, made natively once: the
	// callbacks below only count, so the timings are the guest's and
	// wasmhost's (decoding the emitted batches), not the harness's.
	var keyed []abi.Record
	for _, l := range lines {
		for _, w := range nativeWords(l.Value) {
			keyed = append(keyed, abi.Record{Key: w, HasKey: true, Value: w})
		}
	}
	return &chains{rt: rt, mod: mod, args: args, up: guestOps(cs[0]), down: guestOps(cs[1]), lines: lines, keyed: keyed,
		closeOnce: func() { rt.Close(ctx) }}
}

func (c *chains) close() { c.closeOnce() }

// pass runs both chains once over the input and returns their times.
func (c *chains) pass(b *testing.B) (tokenize, count time.Duration) {
	t := c.timedPass(b)
	return t.tokenize, t.count
}

// passTimes are a pass's wall times and CPU times (of the thread that ran
// the guest) of the two chains.
type passTimes struct{ tokenize, count, tokenizeCPU, countCPU time.Duration }

// timedPass is pass, with CPU times too.
func (c *chains) timedPass(b *testing.B) (pt passTimes) {
	onThread(func() { pt = c.run(b) })
	return pt
}

func (c *chains) run(b *testing.B) (pt passTimes) {
	ctx := context.Background()
	open := func(chain []jobgraph.Vertex, emit func([]abi.Record) error) *wasmhost.Instance {
		inst, err := c.mod.Instantiate(ctx, wasmhost.TaskConfig{JobID: "bench", TaskName: "t", Chain: chain, Parallelism: 1, Args: c.args, Emit: emit})
		if err != nil {
			b.Fatal(err)
		}
		if err := inst.Open(ctx); err != nil {
			b.Fatal(err)
		}
		return inst
	}
	emitted := 0
	up := open(c.up, func(recs []abi.Record) error { emitted += len(recs); return nil })
	t0, c0 := time.Now(), threadCPU()
	for i := 0; i < len(c.lines); i += 1024 {
		if err := up.Process(ctx, c.lines[i:min(i+1024, len(c.lines))]); err != nil {
			b.Fatal(err)
		}
	}
	pt.tokenize, pt.tokenizeCPU = time.Since(t0), threadCPU()-c0
	up.Close(ctx)
	if emitted != len(c.keyed) {
		b.Fatalf("the tokenize chain emitted %d words, want %d", emitted, len(c.keyed))
	}
	results := 0
	down := open(c.down, func(recs []abi.Record) error { results += len(recs); return nil })
	t1, c1 := time.Now(), threadCPU()
	for i := 0; i < len(c.keyed); i += 4096 {
		if err := down.Process(ctx, c.keyed[i:min(i+4096, len(c.keyed))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := down.EndInput(ctx); err != nil {
		b.Fatal(err)
	}
	pt.count, pt.countCPU = time.Since(t1), threadCPU()-c1
	down.Close(ctx)
	if results == 0 {
		b.Fatal("the count chain emitted nothing")
	}
	return pt
}

// BenchmarkGuestChainsTypedVsBytes runs the typed and the byte-level Go
// word counts' chains (examples/wordcount, examples/wordcount-bytes) as
// BenchmarkGuestChains does, over a quarter of its input, both in every
// iteration in alternating order. x_bytes_tokenize and x_bytes_count are the
// medians over the iterations of the typed chain's CPU time over the
// byte-level one's (the target is at most 1.10): CPU time of the thread that
// runs the guest, which a loaded machine disturbs much less than wall time
// (wall_x_bytes is the wall-time ratio of the sums). ns/word_* are CPU times.
func BenchmarkGuestChainsTypedVsBytes(b *testing.B) {
	in, lines := chainInput(b)
	lines = lines[:len(lines)/4]
	cs := []*chains{
		newChains(b, localtest.Guest(b, "examples/wordcount-bytes"), in, lines),
		newChains(b, localtest.Guest(b, "examples/wordcount"), in, lines),
	}
	for _, c := range cs {
		defer c.close()
		c.pass(b) // warm up
	}
	var tokRatios, cntRatios []float64
	var cpu, wall [2]time.Duration
	i := 0
	b.ResetTimer()
	for b.Loop() {
		var pt [2]passTimes
		for k := range 2 {
			j := (i + k) % 2
			pt[j] = cs[j].timedPass(b)
			cpu[j] += pt[j].tokenizeCPU + pt[j].countCPU
			wall[j] += pt[j].tokenize + pt[j].count
		}
		tokRatios = append(tokRatios, float64(pt[1].tokenizeCPU)/float64(pt[0].tokenizeCPU))
		cntRatios = append(cntRatios, float64(pt[1].countCPU)/float64(pt[0].countCPU))
		i++
	}
	n := float64(b.N) * float64(len(cs[0].keyed))
	b.ReportMetric(median(tokRatios), "x_bytes_tokenize")
	b.ReportMetric(median(cntRatios), "x_bytes_count")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "wall_x_bytes")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n, "ns/word_typed")
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n, "ns/word_bytes")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
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
