package local_test

import (
	"context"
	"fmt"
	"path/filepath"
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
	"github.com/sluicehq/sluice/wasmhost"
)

const (
	fuelTokenA = "slc_fuel-test-tenant-a"
	fuelTokenB = "slc_fuel-test-tenant-b"
)

// fuelCluster is an embedded cluster of one TaskManager with tenants a and
// b under the given quotas (JSON objects), and a client for each.
func fuelCluster(t testing.TB, slots int, quotasA, quotasB string) (*localtest.InProcess, *client.Client, *client.Client) {
	t.Helper()
	ts, err := auth.ParseTenants([]byte(`{"tenants":[
		{"name":"a","token_sha256":["` + auth.HashToken(fuelTokenA) + `"],"quotas":` + quotasA + `},
		{"name":"b","token_sha256":["` + auth.HashToken(fuelTokenB) + `"],"quotas":` + quotasB + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: slots, JobManager: func(j *jm.Config) {
		j.Tenants = ts
		j.HeartbeatInterval = 100 * time.Millisecond // fresher fuel reports
	}})
	ca, err := c.Cluster.Client(client.WithToken(fuelTokenA))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := c.Cluster.Client(client.WithToken(fuelTokenB))
	if err != nil {
		t.Fatal(err)
	}
	return c, ca, cb
}

// jobFuel is the fuel job id reported so far, or an error before every
// subtask reported some.
func jobFuel(ctx context.Context, cl *client.Client, id string) (int64, error) {
	d, err := cl.GetJob(ctx, id)
	if err != nil {
		return 0, err
	}
	if err := localtest.AllRunning(d); err != nil {
		return 0, err
	}
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			if s.Metrics == nil || s.Metrics.Fuel == 0 {
				return 0, fmt.Errorf("job %s: subtask %d of %q has no fuel reported yet", id, s.Index, v.Name)
			}
		}
	}
	return d.Fuel, nil
}

// TestTenantWeightsSplitFuelOneToThree: tenants a (cpu_weight 1) and b
// (cpu_weight 3) run the same spinning job on one TaskManager; the fuel
// their jobs report, counted once both spin, is in the ratio 1:3 within
// 10%. Fuel, not time: the split is the scheduler's, whatever else loads
// the machine.
func TestTenantWeightsSplitFuelOneToThree(t *testing.T) {
	_, ca, cb := fuelCluster(t, 2, `{"cpu_weight":1,"call_timeout_ms":600000}`, `{"cpu_weight":3,"call_timeout_ms":600000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	loop := localtest.Guest(t, "local/testdata/runaway")
	submit := func(cl *client.Client) string {
		digest, err := cl.UploadModule(ctx, loop)
		if err != nil {
			t.Fatal(err)
		}
		id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: []string{"loop"}, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.CancelJob(context.Background(), id) })
		return id
	}
	ja, jb := submit(ca), submit(cb)
	// Start counting once both report fuel: until then one may have spun
	// alone.
	var a0, b0 int64
	testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
		var err error
		if a0, err = jobFuel(ctx, ca, ja); err != nil {
			return err
		}
		b0, err = jobFuel(ctx, cb, jb)
		return err
	})
	const enough = 1 << 31 // far above the scheduler's slack (4 trips of 16384)
	var da, db int64
	testutil.CheckFor(t, 4*time.Minute, 50*time.Millisecond, func() error {
		a, err := jobFuel(ctx, ca, ja)
		if err != nil {
			return err
		}
		b, err := jobFuel(ctx, cb, jb)
		if err != nil {
			return err
		}
		da, db = a-a0, b-b0
		if da+db < enough {
			return fmt.Errorf("fuel a %d, b %d since both spun: not enough yet", da, db)
		}
		return nil
	})
	ratio := float64(db) / float64(da)
	t.Logf("fuel a %d, b %d: b/a %.3f", da, db, ratio)
	if ratio < 3*0.9 || ratio > 3*1.1 {
		t.Errorf("b/a fuel %.3f, want 3 within 10%%", ratio)
	}
}

// TestJobFuelIsDeterministic: the same job on the same input reports the
// same fuel on two runs, but for the few checks each call costs (a C
// guest: a Go guest's runtime draws on its randomness, which is seeded per
// job); a job whose call uses its fuel limit (sandbox.call-fuel) fails
// with it, naming the limit.
func TestJobFuelIsDeterministic(t *testing.T) {
	c, ca, _ := fuelCluster(t, 2, `{}`, `{}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wc := localtest.CGuest(t, "examples/wordcount-c")
	input := filepath.Join(t.TempDir(), "input.txt")
	if err := localtest.GenerateText(input, 2<<20, 3); err != nil {
		t.Fatal(err)
	}
	run := func(conf map[string]string) client.JobResult {
		spec := jobSpec(ctx, t, c, ca, "a", wc, []string{"--input", input}, 1)
		for k, v := range conf {
			spec.Config[k] = v
		}
		id, err := ca.SubmitJob(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ca.WaitJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1, r2 := run(nil), run(nil)
	for _, r := range []client.JobResult{r1, r2} {
		if r.State != client.StateFinished {
			t.Fatalf("job ended %s: %s", r.State, r.Failure)
		}
	}
	// Every guest call's fuel is exact (the wasmhost tests check that the
	// same calls spend the same fuel to the check), but how records fall
	// into batches, so into calls, depends on when buffers were flushed and
	// splits arrived, and each call costs a few checks of its own: the
	// job's fuel may differ by those few checks per call, no more.
	if d := r1.Fuel - r2.Fuel; r1.Fuel <= 0 || max(d, -d) > r1.Fuel/100_000 {
		t.Errorf("the job's fuel %d, then %d: want them within a hundred-thousandth", r1.Fuel, r2.Fuel)
	}
	t.Logf("the job's fuel %d and %d", r1.Fuel, r2.Fuel)

	r := run(map[string]string{"sandbox.call-fuel": "1000", "restart-strategy": "none"})
	if r.State != client.StateFailed || !strings.Contains(r.Failure, "fuel limit of 1000") {
		t.Fatalf("job ended %s: %q; want FAILED on its fuel limit", r.State, r.Failure)
	}
}

// BenchmarkFuelScheduler measures tenant a's word count (p=2, a generated
// input) alone on an embedded cluster with the fuel scheduler on and on one
// with it off (wasmhost.RuntimeConfig.WithFuelShares(false): fuel still
// counted, nobody ever held), alternating in alternating order.
// x_on_over_off is the throughput with it on over off (target ≥ 0.97),
// x_on_over_off_median the median of the iterations' ratios.
func BenchmarkFuelScheduler(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wc := localtest.Guest(b, "examples/wordcount")
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, isoInputSize, 7); err != nil {
		b.Fatal(err)
	}
	args := []string{"--input", in}
	type side struct {
		cl   *client.Client
		spec client.JobSpec
		took time.Duration
	}
	var sides [2]*side
	for i, on := range []bool{true, false} {
		c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 4,
			Runtime: func(rc wasmhost.RuntimeConfig) wasmhost.RuntimeConfig { return rc.WithFuelShares(on) }})
		cl, err := c.Cluster.Client()
		if err != nil {
			b.Fatal(err)
		}
		s := &side{cl: cl, spec: jobSpec(ctx, b, c, cl, "default", wc, args, 2)}
		sides[i] = s
	}
	run := func(s *side) time.Duration {
		b.Helper()
		t0 := time.Now()
		id, err := s.cl.SubmitJob(ctx, s.spec)
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.cl.WaitJob(ctx, id)
		if err != nil || r.State != client.StateFinished {
			b.Fatalf("word count %s: %v %s %s", id, err, r.State, r.Failure)
		}
		d := time.Since(t0)
		s.took += d
		return d
	}
	run(sides[0]) // warm both up (compile)
	run(sides[1])
	sides[0].took, sides[1].took = 0, 0
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var on, off time.Duration
		if i%2 == 0 {
			on, off = run(sides[0]), run(sides[1])
		} else {
			off, on = run(sides[1]), run(sides[0])
		}
		ratios = append(ratios, float64(off)/float64(on))
		b.Logf("iteration %d: scheduler on %v, off %v", i, on.Round(time.Millisecond), off.Round(time.Millisecond))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x_on_over_off_median")
	b.ReportMetric(float64(sides[1].took)/float64(sides[0].took), "x_on_over_off")
}
