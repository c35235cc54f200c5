package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// inputSize is the word count's input: the same generator and size as the
// word count's oracle test.
const inputSize = 4 << 20

// nativeWordCount is the baseline: one goroutine, the same tokenization
// (maximal runs of ASCII letters, lowercased), a map, and the same output
// ("word\tcount" lines).
func nativeWordCount(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := make(map[string]int64)
	r := bufio.NewReaderSize(f, 1<<16)
	var word []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			break
		}
		switch {
		case c >= 'a' && c <= 'z':
			word = append(word, c)
		case c >= 'A' && c <= 'Z':
			word = append(word, c+'a'-'A')
		default:
			if len(word) > 0 {
				counts[string(word)]++
				word = word[:0]
			}
		}
	}
	if len(word) > 0 {
		counts[string(word)]++
	}
	out := make([]string, 0, len(counts))
	for w, n := range counts {
		out = append(out, w+"\t"+strconv.FormatInt(n, 10))
	}
	return out, nil
}

// jobSpec stages args' --input files and uploads wasm once, and returns a
// spec at parallelism 2 with config (nil for none) that re-runs the job.
func jobSpec(b *testing.B, c localtest.Cluster, cl *client.Client, wasm []byte, args []string, config map[string]string) client.JobSpec {
	b.Helper()
	ctx := context.Background()
	inputs, err := client.StageInputs(ctx, c.Blob(), client.DefaultTenant, args)
	if err != nil {
		b.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	return client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, Config: client.InputsConfig(config, inputs)}
}

func setup(b *testing.B, slots int) (*localtest.InProcess, *client.Client, []byte, string) {
	b.Helper()
	return setupWith(b, slots, localtest.Guest(b, "examples/wordcount"))
}

func setupWith(b *testing.B, slots int, wasm []byte) (*localtest.InProcess, *client.Client, []byte, string) {
	b.Helper()
	return setupSized(b, slots, wasm, inputSize)
}

func setupSized(b *testing.B, slots int, wasm []byte, size int64) (*localtest.InProcess, *client.Client, []byte, string) {
	b.Helper()
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, size, 1); err != nil {
		b.Fatal(err)
	}
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: slots})
	cl := c.Client()
	return c, cl, wasm, in
}

// BenchmarkWordCountP2 runs the word count written with the byte-level Go
// SDK (examples/wordcount-bytes) at
// parallelism 2 on an embedded cluster and, in the same run, the
// single-goroutine native word count on the same input. ns/op and MB/s are
// the cluster's, from SubmitJob to the result (the module uploaded and
// compiled and the input staged once, before timing, as a client re-running
// a job would find them); x_native is the cluster's throughput as a fraction
// of native Go's (target ≥ 0.25).
func BenchmarkWordCountP2(b *testing.B) {
	benchWordCount(b, localtest.Guest(b, "examples/wordcount-bytes"))
}

// BenchmarkWordCountTypedP2 is BenchmarkWordCountP2 with the job written
// with the typed Go SDK (examples/wordcount, sdk/guest/typed).
func BenchmarkWordCountTypedP2(b *testing.B) {
	benchWordCount(b, localtest.Guest(b, "examples/wordcount"))
}

// BenchmarkWordCountTypedVsBytesP2 runs the typed and the byte-level Go
// word counts (examples/wordcount and examples/wordcount-bytes) on the same
// cluster and input, once each per iteration in alternating order, so
// neither always meets a warmer or busier machine. x_bytes is the typed
// job's time over the byte-level one's (the target is at most 1.10);
// ns/op is the pair's.
func BenchmarkWordCountTypedVsBytesP2(b *testing.B) {
	typedWasm := localtest.Guest(b, "examples/wordcount")
	c, cl, bytesWasm, in := setupWith(b, 2, localtest.Guest(b, "examples/wordcount-bytes"))
	args := []string{"--input", in}
	want, err := nativeWordCount(in)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(want)
	specs := []client.JobSpec{
		jobSpec(b, c, cl, bytesWasm, args, nil),
		jobSpec(b, c, cl, typedWasm, args, nil),
	}
	for _, spec := range specs { // warm up, and check both answers
		if d := localtest.Diff(want, localtest.Lines(runJob(b, cl, spec).Records)); d != "" {
			b.Fatalf("%s: cluster and native word counts differ:\n%s", spec.ModuleDigest, d)
		}
	}
	var took [2]time.Duration
	i := 0
	b.SetBytes(2 * inputSize)
	b.ResetTimer()
	for b.Loop() {
		for k := range 2 {
			j := (i + k) % 2
			t0 := time.Now()
			runJob(b, cl, specs[j])
			took[j] += time.Since(t0)
		}
		i++
	}
	b.ReportMetric(float64(took[1])/float64(took[0]), "x_bytes")
	b.ReportMetric(float64(took[0].Milliseconds())/float64(b.N), "ms/bytes_job")
	b.ReportMetric(float64(took[1].Milliseconds())/float64(b.N), "ms/typed_job")
}

// BenchmarkWordCountCP2 is BenchmarkWordCountP2 with the same job written
// in C (examples/wordcount-c): the same cluster, exchange and host
// connectors, with guest code from a compiler that emits fast Wasm.
func BenchmarkWordCountCP2(b *testing.B) {
	benchWordCount(b, localtest.CGuest(b, "examples/wordcount-c"))
}

// BenchmarkWordCountASP2 is BenchmarkWordCountP2 with the job written in
// AssemblyScript with its SDK (examples/wordcount-as).
func BenchmarkWordCountASP2(b *testing.B) {
	benchWordCount(b, localtest.ASGuest(b, "examples/wordcount-as"))
}

// BenchmarkWordCountRustP2 is BenchmarkWordCountP2 with the same job
// written with the Rust SDK (examples/wordcount-rs).
func BenchmarkWordCountRustP2(b *testing.B) {
	benchWordCount(b, localtest.RustGuest(b, "examples/wordcount-rs"))
}

// BenchmarkWordCountCCombineP2 is BenchmarkWordCountCP2 with the C job's
// combiner on (--combine: the key_by pre-aggregates the words of each call,
// so fewer records cross the exchange and the frequent words no longer
// load one count subtask).
func BenchmarkWordCountCCombineP2(b *testing.B) {
	benchWordCountSized(b, localtest.CGuest(b, "examples/wordcount-c"), inputSize, "--combine")
}

// largeInputSize is the input of the *P2Large benchmarks: large enough
// that the fixed cost of a job (submit, deploy, result) is a small share.
const largeInputSize = 32 << 20

// BenchmarkWordCountCP2Large is BenchmarkWordCountCP2 over a 32 MiB input.
func BenchmarkWordCountCP2Large(b *testing.B) {
	benchWordCountSized(b, localtest.CGuest(b, "examples/wordcount-c"), largeInputSize)
}

// BenchmarkWordCountCCombineP2Large is BenchmarkWordCountCCombineP2 over a
// 32 MiB input.
func BenchmarkWordCountCCombineP2Large(b *testing.B) {
	benchWordCountSized(b, localtest.CGuest(b, "examples/wordcount-c"), largeInputSize, "--combine")
}

// BenchmarkWordCountRustP2Large is BenchmarkWordCountRustP2 over a 32 MiB
// input.
func BenchmarkWordCountRustP2Large(b *testing.B) {
	benchWordCountSized(b, localtest.RustGuest(b, "examples/wordcount-rs"), largeInputSize)
}

// BenchmarkWordCountASP2Large is BenchmarkWordCountASP2 over a 32 MiB input.
func BenchmarkWordCountASP2Large(b *testing.B) {
	benchWordCountSized(b, localtest.ASGuest(b, "examples/wordcount-as"), largeInputSize)
}

func benchWordCount(b *testing.B, wasm []byte) {
	benchWordCountSized(b, wasm, inputSize)
}

// benchWordCountSized runs the word count with wasm over a generated input
// of size bytes, with extra arguments after --input PATH. Besides the wall
// time ratio x_native it reports cpu_x_native: the native run's CPU time
// as a fraction of the job's (the whole process's CPU time while each
// ran), which load from elsewhere on the machine disturbs much less than
// wall time; at parallelism 2 the wall ratio can reach at most about twice
// it.
func benchWordCountSized(b *testing.B, wasm []byte, size int64, extra ...string) {
	c, cl, wasm, in := setupSized(b, 2, wasm, size)
	ctx := context.Background()
	args := append([]string{"--input", in}, extra...)

	// Warm up: upload, compile and stage the input once, and check the
	// answer against the baseline.
	want, err := nativeWordCount(in)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(want)
	_, r, err := localtest.RunJob(ctx, cl, c.Blob(), wasm, args, 2)
	if err != nil || r.State != client.StateFinished {
		b.Fatalf("warm-up job: %v %s %s", err, r.State, r.Failure)
	}
	if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
		b.Fatalf("cluster and native word counts differ:\n%s", d)
	}
	spec := jobSpec(b, c, cl, wasm, args, nil)

	var native, clustered, nativeCPU, clusteredCPU time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		// Alternate which runs first, so neither always meets a warmer or
		// busier machine.
		runNative := func() {
			b.StopTimer()
			t0, c0 := time.Now(), processCPU(b)
			if _, err := nativeWordCount(in); err != nil {
				b.Fatal(err)
			}
			native += time.Since(t0)
			nativeCPU += processCPU(b) - c0
			b.StartTimer()
		}
		if i%2 == 0 {
			runNative()
		}
		t1, c1 := time.Now(), processCPU(b)
		runJob(b, cl, spec)
		clustered += time.Since(t1)
		clusteredCPU += processCPU(b) - c1
		if i%2 == 1 {
			runNative()
		}
		i++
	}
	b.ReportMetric(float64(native)/float64(clustered), "x_native")
	b.ReportMetric(float64(nativeCPU)/float64(clusteredCPU), "cpu_x_native")
	b.ReportMetric(float64(size)/native.Seconds()*float64(b.N)/1e6, "native_MB/s")
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSubmitToFirstRecord measures, with the module already uploaded
// and compiled, the time from SubmitJob to the client holding the job's
// first record: a word count over a one-line input, whose only records come
// back with the result (the collect sink returns records when the job
// finishes), so this is submit → plan → schedule → deploy → run → finish →
// result. It is an upper bound of submit-to-first-record for any job.
// cpu_ms/job is the CPU time the process (cluster and client) used per job.
func BenchmarkSubmitToFirstRecord(b *testing.B) {
	c, cl, wasm, _ := setup(b, 2)
	tiny := filepath.Join(b.TempDir(), "tiny.txt")
	if err := os.WriteFile(tiny, []byte("hello sluice hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	spec := jobSpec(b, c, cl, wasm, []string{"--input", tiny}, nil)
	spec.Parallelism = 1
	run := func() time.Duration {
		t0 := time.Now()
		if r := runJob(b, cl, spec); len(r.Records) == 0 {
			b.Fatalf("job %s: no records", r.ID)
		}
		return time.Since(t0)
	}
	run() // compile and cache
	var total time.Duration
	b.ResetTimer()
	c0 := processCPU(b)
	for b.Loop() {
		total += run()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/first_record")
	// The CPU time the whole cluster used per job, which a loaded machine
	// disturbs less than the wall time.
	b.ReportMetric(float64((processCPU(b)-c0).Microseconds())/1e3/float64(b.N), "cpu_ms/job")
}

// TestNativeWordCountMatchesCoreutils keeps the baseline honest.
func TestNativeWordCountMatchesCoreutils(t *testing.T) {
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, 256<<10, 3); err != nil {
		t.Fatal(err)
	}
	got, err := nativeWordCount(in)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if d := localtest.Diff(localtest.CoreutilsWordCount(t, in), got); d != "" {
		t.Fatal(fmt.Sprint("native word count differs from coreutils:\n", d))
	}
}

// BenchmarkWordCountRustCombineP2 is BenchmarkWordCountRustP2 with the
// Rust job's combiner on (--combine: the SDK's KeyedStream::combine folds
// the words of each call in the key_by, so one record per distinct word of
// a call crosses the exchange).
func BenchmarkWordCountRustCombineP2(b *testing.B) {
	benchWordCountSized(b, localtest.RustGuest(b, "examples/wordcount-rs"), inputSize, "--combine")
}

// BenchmarkWordCountRustCombineP2Large is BenchmarkWordCountRustCombineP2
// over a 32 MiB input.
func BenchmarkWordCountRustCombineP2Large(b *testing.B) {
	benchWordCountSized(b, localtest.RustGuest(b, "examples/wordcount-rs"), largeInputSize, "--combine")
}

// BenchmarkWordCountASCombineP2 is BenchmarkWordCountASP2 with the
// AssemblyScript job's combiner on (--combine: the SDK's
// KeyedStream.combine, as in BenchmarkWordCountRustCombineP2).
func BenchmarkWordCountASCombineP2(b *testing.B) {
	benchWordCountSized(b, localtest.ASGuest(b, "examples/wordcount-as"), inputSize, "--combine")
}

// BenchmarkWordCountASCombineP2Large is BenchmarkWordCountASCombineP2 over a
// 32 MiB input.
func BenchmarkWordCountASCombineP2Large(b *testing.B) {
	benchWordCountSized(b, localtest.ASGuest(b, "examples/wordcount-as"), largeInputSize, "--combine")
}
