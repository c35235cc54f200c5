package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// checkpointInputSize is long enough for a p=2 word count to take several
// one-second checkpoints.
const checkpointInputSize = 64 << 20

// BenchmarkCheckpointsWordCount runs the word count at parallelism 2 with
// checkpoints every second and, in the same run, without checkpoints, on
// the same input, alternating which runs first; x_checkpointed is the
// throughput with checkpoints as a fraction of the throughput without
// (target ≥ 0.95: at most 5% lost), over all iterations and as the median
// of the iterations' ratios.
func BenchmarkCheckpointsWordCount(b *testing.B) {
	wasm := localtest.Guest(b, "examples/wordcount")
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, checkpointInputSize, 3); err != nil {
		b.Fatal(err)
	}
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	args := []string{"--input", in}
	plain := jobSpec(b, c, cl, wasm, args, nil)
	checkpointed := jobSpec(b, c, cl, wasm, args, map[string]string{jobconfig.KeyCheckpointInterval: "1s"})
	runJob(b, cl, plain) // warm-up: compile the module
	b.SetBytes(checkpointInputSize)
	b.ResetTimer()
	cmp := compareCheckpoints(b, cl, plain, checkpointed, nil)
	cmp.report(b)
	b.ReportMetric(float64(cmp.stateBytes)/1e6, "max_state_MB")
}

// BenchmarkCheckpointLargeState measures a checkpoint of about 100 MB of
// keyed state (100,000 keys of 1,000 bytes in one subtask) on the embedded
// cluster's file-system blob store. ns/op is one checkpoint, from trigger to
// completion; x_native is a plain blob.Store Put of the same number of bytes
// (measured in the same run) as a fraction of it.
func BenchmarkCheckpointLargeState(b *testing.B) {
	const keys, valueBytes = 100_000, 1000
	wasm := localtest.Guest(b, "bench/testdata/bigstate")
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 1})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{
		ModuleDigest: digest, Parallelism: 1,
		Args:   []string{"--keys", fmt.Sprint(keys), "--value-bytes", fmt.Sprint(valueBytes), "--hold", "10m"},
		Config: map[string]string{jobconfig.KeyCheckpointInterval: "500ms", jobconfig.KeyClock: string(jobconfig.ClockWall)},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.CancelJob(ctx, id)
	// Checkpoints of the full state: every key stored.
	full := func() []client.Checkpoint {
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		return slices.DeleteFunc(cps, func(c client.Checkpoint) bool {
			return c.Status != "COMPLETED" || c.Size < keys*valueBytes
		})
	}
	testutil.CheckFor(b, 2*time.Minute, 100*time.Millisecond, func() error {
		if len(full()) == 0 {
			cps, _ := cl.ListCheckpoints(ctx, id)
			return fmt.Errorf("no checkpoint of the full state (%d bytes) yet: %+v", keys*valueBytes, cps)
		}
		return nil
	})
	payload := bytes.Repeat([]byte("x"), int(full()[0].Size))

	var cpTime, native time.Duration
	var size int64
	seen := map[int64]bool{}
	for _, cp := range full() {
		seen[cp.ID] = true
	}
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := c.Blob().Put(ctx, fmt.Sprintf("bench/native-%d", len(seen)), bytes.NewReader(payload), int64(len(payload))); err != nil {
			b.Fatal(err)
		}
		native += time.Since(t0)
		// Wait for the next checkpoint of the full state.
		testutil.CheckFor(b, 2*time.Minute, 50*time.Millisecond, func() error {
			for _, cp := range full() {
				if !seen[cp.ID] {
					seen[cp.ID] = true
					cpTime += cp.Duration
					size = cp.Size
					return nil
				}
			}
			return fmt.Errorf("no checkpoint of the full state after the %d seen", len(seen))
		})
	}
	b.ReportMetric(float64(cpTime.Milliseconds())/float64(b.N), "ms/checkpoint")
	b.ReportMetric(float64(size)/1e6, "state_MB")
	b.ReportMetric(float64(native)/float64(cpTime), "x_native")
}

// BenchmarkCheckpointsExactlyOnce runs the exactly-once example (16 keys,
// 16M records, unthrottled, final state collected) at parallelism 2 with
// checkpoints every second and without, alternating which runs first:
// x_checkpointed as in BenchmarkCheckpointsWordCount (target ≥ 0.95). Its
// keyed state is small, so this is the cost of barriers and alignment.
func BenchmarkCheckpointsExactlyOnce(b *testing.B) {
	const keys, perKey = 16, 1_000_000
	wasm := localtest.Guest(b, "examples/exactlyonce")
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	args := []string{"--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey)}
	plain := jobSpec(b, c, cl, wasm, args, nil)
	checkpointed := jobSpec(b, c, cl, wasm, args, map[string]string{jobconfig.KeyCheckpointInterval: "1s"})
	want := make([]string, 0, keys)
	for k := range keys {
		want = append(want, fmt.Sprintf("k%d\t%d\t%d\t0", k, perKey, perKey))
	}
	slices.Sort(want)
	check := func(r client.JobResult) {
		if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
			b.Fatalf("job %s: final state:\n%s", r.ID, d)
		}
	}
	check(runJob(b, cl, plain)) // warm-up: compile the module
	b.ResetTimer()
	cmp := compareCheckpoints(b, cl, plain, checkpointed, check)
	cmp.report(b)
	b.ReportMetric(float64(keys*perKey)/(float64(cmp.on)/float64(b.N))*1e9/1e6, "Mrecords/s")
}

// runJob submits spec, waits for it, fails the benchmark unless it
// FINISHED, and returns its result.
func runJob(b *testing.B, cl *client.Client, spec client.JobSpec) client.JobResult {
	b.Helper()
	ctx := context.Background()
	id, err := cl.SubmitJob(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	r, err := cl.WaitJob(ctx, id)
	if err != nil || r.State != client.StateFinished {
		b.Fatalf("job %s: %v %s %s", id, err, r.State, r.Failure)
	}
	return r
}

// comparison is a run of the same job with and without checkpoints.
type comparison struct {
	off, on    time.Duration
	ratios     []float64 // per iteration, off ÷ on
	completed  int       // checkpoints completed over all iterations
	stateBytes int64     // the largest checkpoint
}

// compareCheckpoints runs plain and checkpointed once per benchmark
// iteration, alternating which goes first so neither always meets a warmer
// or busier machine, and checks each result with check (when set).
func compareCheckpoints(b *testing.B, cl *client.Client, plain, checkpointed client.JobSpec, check func(client.JobResult)) comparison {
	b.Helper()
	var c comparison
	timed := func(spec client.JobSpec) (time.Duration, client.JobResult) {
		t0 := time.Now()
		r := runJob(b, cl, spec)
		d := time.Since(t0)
		if check != nil {
			check(r)
		}
		return d, r
	}
	for i := 0; b.Loop(); i++ {
		var dOff, dOn time.Duration
		var r client.JobResult
		if i%2 == 0 {
			dOff, _ = timed(plain)
			dOn, r = timed(checkpointed)
		} else {
			dOn, r = timed(checkpointed)
			dOff, _ = timed(plain)
		}
		c.off, c.on = c.off+dOff, c.on+dOn
		c.ratios = append(c.ratios, float64(dOff)/float64(dOn))
		cps, err := cl.ListCheckpoints(context.Background(), r.ID)
		if err != nil {
			b.Fatal(err)
		}
		for _, cp := range cps {
			if cp.Status == "COMPLETED" {
				c.completed++
				c.stateBytes = max(c.stateBytes, cp.Size)
			}
		}
	}
	if c.completed == 0 {
		b.Fatal("no checkpoint completed: the comparison would mean nothing")
	}
	return c
}

// report reports x_checkpointed (over all iterations and the median of
// the iterations' ratios) and the checkpoints per run.
func (c comparison) report(b *testing.B) {
	slices.Sort(c.ratios)
	b.ReportMetric(float64(c.off)/float64(c.on), "x_checkpointed")
	b.ReportMetric(c.ratios[len(c.ratios)/2], "x_checkpointed_median")
	b.ReportMetric(float64(c.completed)/float64(b.N), "checkpoints/run")
}
