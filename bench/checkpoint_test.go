package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/cluster"
	"github.com/sluicehq/sluice/internal/cluster/clustertest"
	"github.com/sluicehq/sluice/internal/jobgraph"
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
	wasm := clustertest.Guest(b, "examples/wordcount")
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := clustertest.GenerateText(in, checkpointInputSize, 3); err != nil {
		b.Fatal(err)
	}
	c := clustertest.Start(b, cluster.Config{TaskManagers: 1, Slots: 2})
	cl, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := []string{"--input", in}
	plain := jobSpec(b, c, cl, wasm, args, nil)
	checkpointed := jobSpec(b, c, cl, wasm, args, map[string]string{checkpoint.KeyInterval: "1s"})
	runOnce := func(spec client.JobSpec) (time.Duration, string) {
		t0 := time.Now()
		id, err := cl.SubmitJob(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		r, err := cl.WaitJob(ctx, id)
		if err != nil || r.State != client.StateFinished {
			b.Fatalf("job %s: %v %s %s", id, err, r.State, r.Failure)
		}
		return time.Since(t0), id
	}
	runOnce(plain) // warm-up: compile the module

	var off, on time.Duration
	var completed int
	var stateBytes int64
	b.SetBytes(checkpointInputSize)
	b.ResetTimer()
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so neither always meets a warmer or
		// a busier machine.
		var dOff, dOn time.Duration
		var id string
		if i%2 == 0 {
			dOff, _ = runOnce(plain)
			dOn, id = runOnce(checkpointed)
		} else {
			dOn, id = runOnce(checkpointed)
			dOff, _ = runOnce(plain)
		}
		off, on = off+dOff, on+dOn
		ratios = append(ratios, float64(dOff)/float64(dOn))
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		for _, cp := range cps {
			if cp.Status == "COMPLETED" {
				completed++
				stateBytes = max(stateBytes, cp.Size)
			}
		}
	}
	if completed == 0 {
		b.Fatal("no checkpoint completed: the comparison would mean nothing")
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(off)/float64(on), "x_checkpointed")
	b.ReportMetric(ratios[len(ratios)/2], "x_checkpointed_median")
	b.ReportMetric(float64(completed)/float64(b.N), "checkpoints/run")
	b.ReportMetric(float64(stateBytes)/1e6, "max_state_MB")
}

// BenchmarkCheckpointLargeState measures a checkpoint of about 100 MB of
// keyed state (100,000 keys of 1,000 bytes in one subtask) on the embedded
// cluster's file-system blob store. ns/op is one checkpoint, from trigger to
// completion; x_native is a plain blob.Store Put of the same number of bytes
// (measured in the same run) as a fraction of it.
func BenchmarkCheckpointLargeState(b *testing.B) {
	const keys, valueBytes = 100_000, 1000
	wasm := clustertest.Guest(b, "bench/testdata/bigstate")
	c := clustertest.Start(b, cluster.Config{TaskManagers: 1, Slots: 1})
	cl, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{
		ModuleDigest: digest, Parallelism: 1,
		Args:   []string{"--keys", fmt.Sprint(keys), "--value-bytes", fmt.Sprint(valueBytes), "--hold", "10m"},
		Config: map[string]string{checkpoint.KeyInterval: "500ms", jobgraph.ConfigClock: jobgraph.ClockWall},
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
	deadline := time.Now().Add(2 * time.Minute)
	for len(full()) == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("no checkpoint of the full state within 2 minutes: %+v", full())
		}
		time.Sleep(100 * time.Millisecond)
	}
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
		for found := false; !found; {
			for _, cp := range full() {
				if !seen[cp.ID] {
					seen[cp.ID], found = true, true
					cpTime += cp.Duration
					size = cp.Size
					break
				}
			}
			if !found {
				time.Sleep(50 * time.Millisecond)
			}
		}
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
	wasm := clustertest.Guest(b, "examples/exactlyonce")
	c := clustertest.Start(b, cluster.Config{TaskManagers: 1, Slots: 2})
	cl, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := []string{"--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey)}
	plain := jobSpec(b, c, cl, wasm, args, nil)
	checkpointed := jobSpec(b, c, cl, wasm, args, map[string]string{checkpoint.KeyInterval: "1s"})
	want := make([]string, 0, keys)
	for k := range keys {
		want = append(want, fmt.Sprintf("k%d\t%d\t%d\t0", k, perKey, perKey))
	}
	slices.Sort(want)
	run := func(spec client.JobSpec) (time.Duration, string) {
		t0 := time.Now()
		id, err := cl.SubmitJob(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		r, err := cl.WaitJob(ctx, id)
		if err != nil || r.State != client.StateFinished {
			b.Fatalf("job %s: %v %s %s", id, err, r.State, r.Failure)
		}
		if d := clustertest.Diff(want, clustertest.Lines(r.Records)); d != "" {
			b.Fatalf("job %s: final state:\n%s", id, d)
		}
		return time.Since(t0), id
	}
	run(plain) // warm-up: compile the module

	var off, on time.Duration
	var ratios []float64
	completed := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var dOff, dOn time.Duration
		var id string
		if i%2 == 0 {
			dOff, _ = run(plain)
			dOn, id = run(checkpointed)
		} else {
			dOn, id = run(checkpointed)
			dOff, _ = run(plain)
		}
		off, on = off+dOff, on+dOn
		ratios = append(ratios, float64(dOff)/float64(dOn))
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		for _, cp := range cps {
			if cp.Status == "COMPLETED" {
				completed++
			}
		}
	}
	if completed == 0 {
		b.Fatal("no checkpoint completed: the comparison would mean nothing")
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(off)/float64(on), "x_checkpointed")
	b.ReportMetric(ratios[len(ratios)/2], "x_checkpointed_median")
	b.ReportMetric(float64(completed)/float64(b.N), "checkpoints/run")
	b.ReportMetric(float64(keys*perKey)/(float64(on)/float64(b.N))*1e9/1e6, "Mrecords/s")
}
