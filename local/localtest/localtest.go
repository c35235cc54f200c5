package localtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/wasmhost"
)

// CompileCache is a compiled-module cache shared by every test run
// (<user cache>/sluice/test-cache): compiling a Go guest is slow, very slow
// under -race, and the result depends only on the module and wazero.
func CompileCache() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "sluice", "test-cache")
}

// ModuleRoot returns the directory of the sluice go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/sluicehq/sluice\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no sluice go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	guestMu    sync.Mutex
	guestCache = map[string][]byte{}
)

// Guest builds the guest package at rel (relative to the module root) for
// wasip1, once per test binary (and cached on disk across runs by
// guestbuild), and returns the module bytes.
func Guest(t testing.TB, rel string) []byte {
	t.Helper()
	guestMu.Lock()
	defer guestMu.Unlock()
	if b, ok := guestCache[rel]; ok {
		return b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path, err := guestbuild.Build(ctx, filepath.Join(ModuleRoot(t), rel))
	if err != nil {
		t.Fatalf("build guest %s: %v", rel, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	guestCache[rel] = b
	return b
}

// CGuest is Guest for a C guest directory. Without a C toolchain for
// wasm32-wasi it skips the test, unless guestbuild.CRequired (the test
// command found or installed the toolchain), when it fails it.
func CGuest(t testing.TB, rel string) []byte {
	t.Helper()
	return toolchainGuest(t, rel, time.Minute, guestbuild.CToolchain, guestbuild.CRequired())
}

// RustGuest is Guest for a Rust crate directory (one with a Cargo.toml).
// Without Debian's Rust toolchain for wasm32-wasi it skips the test, unless
// guestbuild.RustRequired (the test command found or installed the
// toolchain), when it fails it.
func RustGuest(t testing.TB, rel string) []byte {
	t.Helper()
	return toolchainGuest(t, rel, 2*time.Minute, guestbuild.RustToolchain, guestbuild.RustRequired())
}

// ASGuest is Guest for an AssemblyScript guest directory (one with an
// asconfig.json). It installs the pinned compiler on first use (npm ci into
// the user cache); without node and npm, or when npm cannot install it, it
// skips the test, unless guestbuild.ASRequired (the test command installed
// the compiler), when it fails it.
func ASGuest(t testing.TB, rel string) []byte {
	t.Helper()
	return toolchainGuest(t, rel, 5*time.Minute, guestbuild.ASToolchain, guestbuild.ASRequired())
}

// toolchainGuest is Guest behind a toolchain check: a missing toolchain
// skips the test, or fails it when the test command required it.
func toolchainGuest(t testing.TB, rel string, timeout time.Duration, toolchain func(context.Context) error, required bool) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := toolchain(ctx); err != nil {
		if required {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return Guest(t, rel)
}

// CheckWordCountPlan checks a word count module's plan: it names its inputs
// (escaped into the source's "paths" config), and bad arguments fail the
// plan with the message the module, program in its usage, gives. It
// returns the compiled module for the caller's own checks.
func CheckWordCountPlan(t *testing.T, wasm []byte, program string) *wasmhost.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	g, err := mod.Plan(ctx, []string{"--input", `odd "name\.txt`, "--input=logs/*.txt"}, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := jobgraph.Validate(g, 2, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := g.Vertices[0].Config["paths"], `["odd \"name\\.txt","logs/*.txt"]`; got != want {
		t.Errorf("paths = %s, want %s", got, want)
	}
	for args, want := range WordCountUsageErrors(program) {
		_, err := mod.Plan(ctx, strings.Fields(args), wasmhost.Limits{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("plan %q: %v, want %q", args, err, want)
		}
	}
	return mod
}

// WordCountUsageErrors are the word counts' bad arguments and what their
// plan says of each.
func WordCountUsageErrors(program string) map[string]string {
	return map[string]string{
		"":                "no input: pass -- --input PATH",
		"--input":         "--input needs a value",
		"--input a --out": "unknown argument --out: " + program + " takes --input PATH (repeatable)",
	}
}

// CheckWordCountSavepoint stops a p=2 run of a word count module over a
// generated 32 MiB text with a savepoint part-way and resumes it at p=3:
// the resumed job restores the counts from keyed state and reads only the
// splits that were left, so the result must still equal coreutils'. extra
// are arguments after --input PATH (both runs get them).
func CheckWordCountSavepoint(t *testing.T, wasm []byte, extra ...string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := GenerateText(in, 32<<20, 1); err != nil {
		t.Fatal(err)
	}
	want := CoreutilsWordCount(t, in)
	c := Start(t, local.Config{Slots: 6})
	cl := c.Client()
	ctx := context.Background()
	args := append([]string{"--input", in}, extra...)
	inputs, err := client.StageInputs(ctx, c.Blob(), client.DefaultTenant, args)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(p int, from string) client.JobSpec {
		cfg := client.InputsConfig(map[string]string{jobconfig.KeyCheckpointInterval: "20ms"}, inputs)
		return client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: p, Config: cfg, FromSavepoint: from}
	}
	id, err := cl.SubmitJob(ctx, spec(2, ""))
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil || len(cps) == 0 {
			return fmt.Errorf("job %s has no checkpoint yet (%v)", id, err)
		}
		return nil
	})
	sp, err := cl.TriggerSavepoint(ctx, id, true, time.Minute)
	if err != nil {
		t.Fatalf("savepoint (the job may have ended first; make the input larger): %v", err)
	}
	if stopped := WaitFinished(t, c, id); len(stopped.Records) != 0 {
		t.Fatalf("the stopped job emitted %d final counts; its input never ended", len(stopped.Records))
	}
	t.Logf("savepoint %s: %d bytes", sp.SavepointID, sp.Size)
	id, err = cl.SubmitJob(ctx, spec(3, sp.SavepointID))
	if err != nil {
		t.Fatal(err)
	}
	r := WaitFinished(t, c, id)
	if d := Diff(want, Lines(r.Records)); d != "" {
		t.Fatalf("word counts after the savepoint differ from coreutils:\n%s", d)
	}
}

// CheckWordCount runs a word count module (examples/wordcount,
// examples/wordcount-c, -rs or -as) over a generated 4 MiB text on two
// TaskManagers of two slots, at parallelism 1, 2 and 4 (p=4 fills both, so
// records cross the data port as well as memory), and compares the counts
// with coreutils'. extra are arguments after --input PATH.
func CheckWordCount(t *testing.T, wasm []byte, extra ...string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := GenerateText(in, 4<<20, 1); err != nil {
		t.Fatal(err)
	}
	want := CoreutilsWordCount(t, in)
	if len(want) < 1000 {
		t.Fatalf("the oracle found only %d distinct words: the generator is broken", len(want))
	}
	c := Start(t, local.Config{TaskManagers: 2, Slots: 2})
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			r := WaitFinished(t, c, SubmitJob(t, c, wasm, append([]string{"--input", in}, extra...), p))
			if d := Diff(want, Lines(r.Records)); d != "" {
				t.Fatalf("word counts differ from coreutils:\n%s", d)
			}
			t.Logf("p=%d: %d distinct words in %v", p, len(r.Records), r.Duration)
		})
	}
}

// RunJob stages the job's --input files in store, uploads wasm, submits
// the job and waits for its end.
func RunJob(ctx context.Context, cl *client.Client, store blob.Store, wasm []byte, args []string, parallelism int) (string, client.JobResult, error) {
	id, err := Submit(ctx, cl, store, wasm, args, parallelism)
	if err != nil {
		return "", client.JobResult{}, err
	}
	r, err := cl.WaitJob(ctx, id)
	return id, r, err
}

// Submit stages inputs, uploads wasm and submits the job.
func Submit(ctx context.Context, cl *client.Client, store blob.Store, wasm []byte, args []string, parallelism int) (string, error) {
	inputs, err := client.StageInputs(ctx, store, client.DefaultTenant, args)
	if err != nil {
		return "", err
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		return "", err
	}
	return cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: parallelism, Config: client.InputsConfig(nil, inputs)})
}

// Lines returns records as sorted strings.
func Lines(recs [][]byte) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r)
	}
	slices.Sort(out)
	return out
}

// Diff describes how got differs from want (both sorted), or "" if equal.
func Diff(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	wm := make(map[string]bool, len(want))
	for _, w := range want {
		wm[w] = true
	}
	gm := make(map[string]bool, len(got))
	for _, g := range got {
		gm[g] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "want %d lines, got %d\n", len(want), len(got))
	n := 0
	for _, w := range want {
		if !gm[w] && n < 10 {
			fmt.Fprintf(&b, "  missing: %q\n", w)
			n++
		}
	}
	n = 0
	for _, g := range got {
		if !wm[g] && n < 10 {
			fmt.Fprintf(&b, "  unexpected: %q\n", g)
			n++
		}
	}
	return b.String()
}

// CoreutilsWordCount runs the word count with the real coreutils on input
// and returns its "word\tcount" lines, sorted:
//
//	tr -cs 'A-Za-z' '\n' < IN | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{print $2"\t"$1}' | sort
func CoreutilsWordCount(t testing.TB, input string) []string {
	t.Helper()
	const pipeline = `tr -cs 'A-Za-z' '\n' < "$1" | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{print $2"\t"$1}' | sort`
	cmd := exec.Command("bash", "-c", pipeline, "wordcount-oracle", input)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("coreutils word count: %v: %s", err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	slices.Sort(lines)
	return lines
}

// words the generator draws from: mixed case, apostrophes and hyphens
// (separators for the word count), digits glued to letters, and a non-ASCII
// letter (its bytes are separators too, as for tr in the C locale).
var words = []string{
	"the", "The", "THE", "river", "River", "sluice", "Sluice", "gate", "flow", "Flow",
	"water", "stream", "Stream", "STREAM", "batch", "record", "key", "group", "barrier",
	"checkpoint", "savepoint", "task", "slot", "Manager", "job", "Job", "wasm", "WASM",
	"don't", "it's", "well-known", "co-operate", "x86", "mp3", "route66", "2024",
	"42", "3.14", "café", "naïve", "über", "a", "I", "o", "zz", "Zebra", "quartz",
	"Lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit",
}

var punct = []string{" ", " ", " ", " ", ", ", ". ", "; ", ": ", "! ", "? ", " -- ", " (", ") ", "\"", "'", "\t", "  "}

// GenerateText writes about size bytes of deterministic text (same seed,
// same bytes) to path: lines of words, punctuation and digits, with a
// Zipf-like skew so some words are frequent and many rare, plus a long tail
// of generated words so the key space is large.
func GenerateText(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	zipf := rand.NewZipf(r, 1.2, 1, uint64(len(words)-1))
	var n int64
	var line []byte
	for n < size {
		line = line[:0]
		nw := 1 + r.IntN(14)
		for i := range nw {
			if i > 0 {
				line = append(line, punct[r.IntN(len(punct))]...)
			}
			switch x := r.IntN(10); {
			case x < 7:
				line = append(line, words[zipf.Uint64()]...)
			case x < 9:
				// A rare word: letters from a small alphabet, random case.
				for range 2 + r.IntN(7) {
					c := byte('a' + r.IntN(12))
					if r.IntN(4) == 0 {
						c -= 'a' - 'A'
					}
					line = append(line, c)
				}
			default:
				line = fmt.Appendf(line, "%d", r.IntN(100000))
			}
		}
		if r.IntN(50) == 0 {
			line = append(line, '\r') // a CRLF line now and then
		}
		line = append(line, '\n')
		if r.IntN(200) == 0 {
			line = append(line, '\n') // an empty line
		}
		m, err := w.Write(line)
		if err != nil {
			f.Close()
			return err
		}
		n += int64(m)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// GoleakOptions ignore the goroutines Kitex and netpoll keep for the whole
// process (timeout worker pool, shared tickers, load-balancer cache
// watchers, pollers), which no Close ends; anything else a test leaves
// running is a leak.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/client.(*timeoutPool).createWorker.func1"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/client.(*timeoutPool).createTicker.func1"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/pkg/loadbalance/lbcache.(*BalancerFactory).watcher"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/pkg/utils.(*SharedTicker).Tick"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
		goleak.IgnoreAnyFunction("github.com/bytedance/gopkg/util/gopool.(*worker).run.func1"),
	}
}
