package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

const (
	isoTokenA = "slc_isolation-test-tenant-a"
	isoTokenB = "slc_isolation-test-tenant-b"
)

// tenantCluster is an embedded cluster with tenants a (no quotas) and b
// (a 500ms call deadline and 64 MiB per instance), and a client for each.
func tenantCluster(t testing.TB, slots int) (*localtest.InProcess, *client.Client, *client.Client) {
	t.Helper()
	ts, err := auth.ParseTenants([]byte(`{"tenants":[
		{"name":"a","token_sha256":["` + auth.HashToken(isoTokenA) + `"]},
		{"name":"b","token_sha256":["` + auth.HashToken(isoTokenB) + `"],"quotas":{"call_timeout_ms":500,"memory_bytes":67108864,"submits_per_minute":60}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: slots, JobManager: func(j *jm.Config) { j.Tenants = ts }})
	ca, err := c.Cluster.Client(client.WithToken(isoTokenA))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := c.Cluster.Client(client.WithToken(isoTokenB))
	if err != nil {
		t.Fatal(err)
	}
	return c, ca, cb
}

// wordCounts is the word count of path as the example computes it (runs
// of ASCII letters, lower-cased), as sorted "word\tcount" lines.
func wordCounts(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, w := range strings.FieldsFunc(string(b), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) {
		n[strings.ToLower(w)]++
	}
	var out []string
	for w, k := range n {
		out = append(out, fmt.Sprintf("%s\t%d", w, k))
	}
	return localtest.Lines(toBytes(out))
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// submitAs stages args' local inputs under tenant and submits wasm.
func submitAs(ctx context.Context, t testing.TB, c localtest.Cluster, cl *client.Client, tenant string, wasm []byte, args []string, p int) string {
	t.Helper()
	inputs, err := client.StageInputs(ctx, c.Blob(), tenant, args)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: p, Config: client.InputsConfig(nil, inputs)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRunawayTenantFailsOnlyItsOwnJob: tenant b's memory bomb and infinite
// loop fail b's jobs (on b's memory and call-deadline quotas) while tenant
// a's word count, on the same TaskManager, finishes with the right counts.
// The loop also proves a spinning guest cannot stop the world: the garbage
// collections a's job triggers complete while b's guest spins.
func TestRunawayTenantFailsOnlyItsOwnJob(t *testing.T) {
	c, ca, cb := tenantCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hostile := localtest.Guest(t, "local/testdata/runaway")
	wc := localtest.Guest(t, "examples/wordcount")
	input := "../examples/wordcount/testdata/hamlet.txt"

	bomb := submitAs(ctx, t, c, cb, "b", hostile, []string{"bomb"}, 1)
	loop := submitAs(ctx, t, c, cb, "b", hostile, []string{"loop"}, 1)
	words := submitAs(ctx, t, c, ca, "a", wc, []string{"--input", input}, 2)

	r, err := ca.WaitJob(ctx, words)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateFinished {
		t.Fatalf("a's word count ended %s: %s", r.State, r.Failure)
	}
	if d := localtest.Diff(wordCounts(t, input), localtest.Lines(r.Records)); d != "" {
		t.Fatalf("a's word count is wrong: %s", d)
	}
	// Under the race detector the bomb may reach b's 500ms call deadline
	// before its 64 MiB cap: either quota stops it.
	for id, want := range map[string]string{bomb: "memory|deadline", loop: "deadline"} {
		r, err := cb.WaitJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != client.StateFailed || !regexp.MustCompile(want).MatchString(strings.ToLower(r.Failure)) {
			t.Errorf("b's %s job ended %s: %q", want, r.State, r.Failure)
		}
		if _, err := ca.GetJob(ctx, id); err == nil {
			t.Errorf("a sees b's job %s", id)
		}
	}
	for _, tm := range c.TaskManagers() {
		if !tm.Registered() {
			t.Fatal("the TaskManager went away")
		}
	}
}

// isoInputSize is the size of tenant a's word-count input in
// BenchmarkTenantIsolation.
const isoInputSize = 4 << 20

// BenchmarkTenantIsolation measures tenant a's word count (p=2, a generated
// input) on an embedded cluster alone and beside tenant b's hostile job,
// one sub-benchmark each: b's runaway "loop", which spins until b's 500ms
// call deadline fails it, or its "bomb", which allocates until b's 64 MiB
// memory cap fails it, each resubmitted as soon as it ends for the whole of
// a's run (within b's quota of 60 submissions a minute: a refused one is
// tried again after 10ms); each on an otherwise idle machine and, "+cpuhog", with an
// unrelated process spinning on one core beside the cluster for the whole
// sub-benchmark (alone and beside runs alike: the hog is the machine, b is
// what is measured). Iterations alternate alone and beside runs (in
// alternating order), so machine load hits both alike. Each run is timed
// from a's SubmitJob to its result (module uploaded and compiled, input
// staged, before timing). x_isolated is a's throughput beside b over alone
// (target ≥ 0.9); alone_MB/s and with_b_MB/s are the two throughputs,
// b_jobs/op how many of b's jobs ran per beside run, x_isolated_median the
// median of the iterations' ratios (less swayed by one run hit by outside
// load).
func BenchmarkTenantIsolation(b *testing.B) {
	for _, hostile := range []string{"loop", "bomb"} {
		b.Run(hostile, func(b *testing.B) { benchIsolation(b, hostile, false) })
		b.Run(hostile+"+cpuhog", func(b *testing.B) { benchIsolation(b, hostile, true) })
	}
}

func benchIsolation(b *testing.B, hostile string, hog bool) {
	c, ca, cb := tenantCluster(b, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wc := localtest.Guest(b, "examples/wordcount")
	runaway := localtest.Guest(b, "local/testdata/runaway")
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, isoInputSize, 7); err != nil {
		b.Fatal(err)
	}
	args := []string{"--input", in}

	// Warm up a's job (upload, compile, stage) and check its answer.
	words := submitAs(ctx, b, c, ca, "a", wc, args, 2)
	r, err := ca.WaitJob(ctx, words)
	if err != nil || r.State != client.StateFinished {
		b.Fatalf("a's warm-up word count: %v %s %s", err, r.State, r.Failure)
	}
	if d := localtest.Diff(wordCounts(b, in), localtest.Lines(r.Records)); d != "" {
		b.Fatalf("a's word count is wrong: %s", d)
	}
	specA := jobSpec(ctx, b, c, ca, "a", wc, args, 2)
	// Warm up b's job too, and check it fails on its quota.
	job := submitAs(ctx, b, c, cb, "b", runaway, []string{hostile}, 1)
	if r, err := cb.WaitJob(ctx, job); err != nil || r.State != client.StateFailed || !hostileFailure(r.Failure) {
		b.Fatalf("b's warm-up %s: %v %s %q", hostile, err, r.State, r.Failure)
	}
	specB := jobSpec(ctx, b, c, cb, "b", runaway, []string{hostile}, 1)
	if hog {
		stop := startCPUHog(b)
		defer func() {
			if err := stop(); err != nil {
				b.Error(err)
			}
		}()
	}

	runA := func() time.Duration {
		b.Helper()
		t0 := time.Now()
		id, err := ca.SubmitJob(ctx, specA)
		if err != nil {
			b.Fatal(err)
		}
		r, err := ca.WaitJob(ctx, id)
		if err != nil || r.State != client.StateFinished {
			b.Fatalf("a's word count %s: %v %s %s", id, err, r.State, r.Failure)
		}
		return time.Since(t0)
	}

	var alone, withB time.Duration
	var ratios []float64
	bJobs := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var a1, a2 time.Duration
		for _, hostileRun := range []bool{i%2 == 1, i%2 == 0} {
			if !hostileRun {
				a1 = runA()
				continue
			}
			stop := startHostile(ctx, b, cb, specB).stop
			a2 = runA()
			n, err := stop()
			if err != nil {
				b.Fatal(err)
			}
			bJobs += n
		}
		alone, withB = alone+a1, withB+a2
		ratios = append(ratios, float64(a1)/float64(a2))
		b.Logf("iteration %d: alone %v, beside %s %v", i, a1.Round(time.Millisecond), hostile, a2.Round(time.Millisecond))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x_isolated_median")
	mbps := func(d time.Duration) float64 { return float64(isoInputSize) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(alone), "alone_MB/s")
	b.ReportMetric(mbps(withB), "with_b_MB/s")
	b.ReportMetric(float64(alone)/float64(withB), "x_isolated")
	b.ReportMetric(float64(bJobs)/float64(b.N), "b_jobs/op")
}

// hostileFailure reports whether a failure of b's runaway job is its
// quota's: the call deadline or the memory cap.
func hostileFailure(failure string) bool {
	f := strings.ToLower(failure)
	return strings.Contains(f, "deadline") || strings.Contains(f, "memory")
}

// startCPUHog starts a process outside the cluster that spins on one core
// until the returned stop kills it.
func startCPUHog(t testing.TB) (stop func() error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatalf("cpu hog: %v", err)
	}
	return func() error {
		if err := cmd.Process.Kill(); err != nil {
			return err
		}
		_ = cmd.Wait() // killed: its error says so
		return nil
	}
}

// jobSpec stages args' inputs under tenant and uploads wasm once, for jobs
// submitted again and again.
func jobSpec(ctx context.Context, t testing.TB, c localtest.Cluster, cl *client.Client, tenant string, wasm []byte, args []string, p int) client.JobSpec {
	t.Helper()
	inputs, err := client.StageInputs(ctx, c.Blob(), tenant, args)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: p, Config: client.InputsConfig(nil, inputs)}
}

// hostileTenant keeps one of b's hostile jobs running: it resubmits spec
// whenever the previous job ends, until stop (at most maxHostileJobs jobs,
// each waited for at most hostileJobTimeout).
type hostileTenant struct {
	quit    chan struct{}
	done    chan struct{}
	jobs    int
	refused int // submissions over b's submission quota
	err     error
}

const (
	maxHostileJobs    = 200
	hostileJobTimeout = 30 * time.Second
)

// startHostile starts b's resubmitting loop and returns once b's first job
// has every subtask running, so b is hostile from a's first record on.
func startHostile(ctx context.Context, t testing.TB, cl *client.Client, spec client.JobSpec) *hostileTenant {
	t.Helper()
	h := &hostileTenant{quit: make(chan struct{}), done: make(chan struct{})}
	started := make(chan string, 1)
	go h.run(ctx, cl, spec, started)
	var id string
	select {
	case id = <-started:
	case <-h.done:
		t.Fatalf("b's hostile loop ended at once: %v", h.err)
	}
	// Stop b's loop if the wait below fails the test.
	ok := false
	defer func() {
		if !ok {
			h.stop()
		}
	}()
	testutil.CheckFor(t, hostileJobTimeout, 5*time.Millisecond, func() error {
		d, err := cl.GetJob(ctx, id)
		if err != nil {
			return fmt.Errorf("b's job %s: %w", id, err)
		}
		if client.Terminal(d.State) {
			return nil
		}
		return localtest.AllRunning(d)
	})
	ok = true
	return h
}

func (h *hostileTenant) run(ctx context.Context, cl *client.Client, spec client.JobSpec, started chan<- string) {
	defer close(h.done)
	for h.jobs < maxHostileJobs {
		select {
		case <-h.quit:
			return
		default:
		}
		id, err := cl.SubmitJob(ctx, spec)
		if errors.Is(err, client.ErrResourceExhausted) && strings.Contains(err.Error(), "submission quota") {
			// Over b's submission rate: try again, as a client
			// hammering the cluster would.
			h.refused++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			h.err = err
			return
		}
		h.jobs++
		if h.jobs == 1 {
			started <- id
		}
		if err := h.await(ctx, cl, id); err != nil {
			h.err = err
			return
		}
	}
}

// await waits for b's job id to end, cancelling it on stop. A job that
// ends on its own must have failed on its quota (call deadline or memory).
func (h *hostileTenant) await(ctx context.Context, cl *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(ctx, hostileJobTimeout)
	defer cancel()
	for {
		select {
		case <-h.quit:
			// It may have ended meanwhile: the wait below says how.
			_ = cl.CancelJob(ctx, id)
			r, err := cl.WaitJob(ctx, id)
			if err != nil {
				return err
			}
			if r.State != client.StateCanceled && r.State != client.StateFailed {
				return fmt.Errorf("b's job %s ended %s after cancel", id, r.State)
			}
			return nil
		default:
		}
		r, err := cl.PollJob(ctx, id, 50*time.Millisecond)
		if err != nil {
			return err
		}
		if client.Terminal(r.State) {
			if r.State != client.StateFailed || !hostileFailure(r.Failure) {
				return fmt.Errorf("b's job %s ended %s: %q", id, r.State, r.Failure)
			}
			return nil
		}
	}
}

// stop ends b's loop, cancelling its running job and waiting for it to
// end, and returns how many jobs b submitted.
func (h *hostileTenant) stop() (int, error) {
	close(h.quit)
	<-h.done
	return h.jobs, h.err
}
