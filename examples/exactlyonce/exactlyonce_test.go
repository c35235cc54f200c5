//go:build !wasip1

// The exactly-once example's tests run on the host against an embedded
// cluster: the uninterrupted final state, a stop-with-savepoint resumed at
// other parallelisms, a checkpoint that a slow guest makes expire, and the
// transactional file sink's committed output.
package main_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/blob/blobtest"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// run submits the example with args and config at parallelism p.
func run(t *testing.T, cl *client.Client, wasm []byte, p int, config map[string]string, fromSavepoint string, args ...string) string {
	t.Helper()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: p, Config: config, FromSavepoint: fromSavepoint})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// finalState is what an uninterrupted run collects: every key saw its
// whole sequence once, in order.
func finalState(keys, perKey int) []string {
	var want []string
	for k := range keys {
		want = append(want, fmt.Sprintf("k%d\t%d\t%d\t0", k, perKey, perKey))
	}
	slices.Sort(want)
	return want
}

func TestFinalStateUninterrupted(t *testing.T) {
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	r := localtest.WaitFinished(t, c, run(t, cl, wasm, 3, nil, "", "--keys", "16", "--per-key", "2000"))
	if d := localtest.Diff(finalState(16, 2000), localtest.Lines(r.Records)); d != "" {
		t.Fatalf("final state:\n%s", d)
	}
	if v := r.Accumulators["violations"]; v != 0 {
		t.Fatalf("violations = %d", v)
	}
}

// TestSavepointRescale stops a p=2 run with a savepoint half-way and
// resumes it at p=3 and at p=1: each ends in the same keyed state as an
// uninterrupted run.
func TestSavepointRescale(t *testing.T) {
	const keys, perKey = 16, 3000
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	ctx := context.Background()
	args := []string{"--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey)}
	cp := map[string]string{jobconfig.KeyCheckpointInterval: "200ms", jobconfig.KeyClock: string(jobconfig.ClockWall)}
	id := run(t, cl, wasm, 2, cp, "", append(args, "--rate", "8000")...)
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(cps, func(c client.Checkpoint) bool { return c.Status == "COMPLETED" }) {
			return fmt.Errorf("none of job %s's %d checkpoints has completed", id, len(cps))
		}
		return nil
	})
	sp, err := cl.TriggerSavepoint(ctx, id, true, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if sp.SavepointID == "" || sp.Status != "COMPLETED" || sp.Size <= 0 {
		t.Fatalf("savepoint = %+v", sp)
	}
	stopped := localtest.WaitFinished(t, c, id) // stop-with-savepoint ends FINISHED
	if len(stopped.Records) != 0 {
		t.Errorf("the stopped job collected %d final records; its input never ended", len(stopped.Records))
	}
	t.Logf("savepoint %s: checkpoint %d, %d bytes in %v", sp.SavepointID, sp.ID, sp.Size, sp.Duration)

	for _, p := range []int{3, 1} {
		r := localtest.WaitFinished(t, c, run(t, cl, wasm, p, cp, sp.SavepointID, args...))
		if d := localtest.Diff(finalState(keys, perKey), localtest.Lines(r.Records)); d != "" {
			t.Fatalf("resumed at p=%d: final state differs from an uninterrupted run:\n%s", p, d)
		}
	}

	if err := cl.DisposeSavepoint(ctx, sp.SavepointID); err != nil {
		t.Fatal(err)
	}
	digest, _ := cl.UploadModule(ctx, wasm)
	_, err = cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, FromSavepoint: sp.SavepointID})
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("resume from a disposed savepoint: %v; want not found", err)
	}
	_, err = cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, FromSavepoint: "../../x"})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("resume from a crafted savepoint id: %v; want invalid argument", err)
	}
}

// committed reads the file sink's committed output under path.
func committed(t *testing.T, store blob.Store, path string) []string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	for info, err := range blob.All(ctx, store, "tenants/"+client.DefaultTenant+"/files/"+path+"/") {
		if err != nil {
			t.Fatal(err)
		}
		b := blobtest.GetBytes(t, store, info.Key)
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// checkExactlyOnce checks that lines hold each "k<i>\t<seq>" exactly once.
func checkExactlyOnce(t *testing.T, lines []string, keys, perKey int) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	var missing, dup []string
	for k := range keys {
		for s := 1; s <= perKey; s++ {
			l := fmt.Sprintf("k%d\t%d", k, s)
			switch seen[l] {
			case 0:
				missing = append(missing, l)
			case 1:
			default:
				dup = append(dup, l)
			}
			delete(seen, l)
		}
	}
	if len(missing)+len(dup)+len(seen) > 0 {
		t.Fatalf("committed output: %d lines, %d missing (e.g. %q), %d duplicated (e.g. %q), %d unexpected",
			len(lines), len(missing), head(missing), len(dup), head(dup), len(seen))
	}
}

func head(s []string) []string { return s[:min(len(s), 3)] }

// TestSlowBarrierExpires: a guest whose barrier hook is slower than the
// checkpoint timeout makes checkpoints expire; they are aborted, the job
// is not held up, and its committed output is still exactly once.
func TestSlowBarrierExpires(t *testing.T) {
	const keys, perKey = 8, 2000
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	cp := map[string]string{jobconfig.KeyCheckpointInterval: "100ms", jobconfig.KeyCheckpointTimeout: "300ms", jobconfig.KeyClock: string(jobconfig.ClockWall)}
	id := run(t, cl, wasm, 2, cp, "", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", "8000", "--barrier-delay", "800ms", "--out", "slow/out")
	r := localtest.WaitFinished(t, c, id)
	cps, err := cl.ListCheckpoints(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	expired := 0
	for _, c := range cps {
		if c.Status == "ABORTED" && strings.Contains(c.Reason, "expired") {
			expired++
		}
		if c.Status == "COMPLETED" {
			t.Errorf("checkpoint %d completed in %v, though every barrier hook takes 800ms and the timeout is 300ms", c.ID, c.Duration)
		}
	}
	if expired == 0 {
		t.Fatalf("no checkpoint expired: %+v", cps)
	}
	t.Logf("%d checkpoints expired; job took %v", expired, r.Duration)
	checkExactlyOnce(t, committed(t, c.Blob(), "slow/out"), keys, perKey)
}

// TestFileSinkExactlyOnce: the file sink's committed output of a run with
// frequent checkpoints holds every record once, and nothing stays pending.
func TestFileSinkExactlyOnce(t *testing.T) {
	const keys, perKey = 8, 3000
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	cp := map[string]string{jobconfig.KeyCheckpointInterval: "50ms", jobconfig.KeyClock: string(jobconfig.ClockWall)}
	id := run(t, cl, wasm, 2, cp, "", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey), "--rate", "20000", "--out", "fs/out")
	localtest.WaitFinished(t, c, id)
	cps, _ := cl.ListCheckpoints(context.Background(), id)
	if !slices.ContainsFunc(cps, func(c client.Checkpoint) bool { return c.Status == "COMPLETED" }) {
		t.Errorf("no checkpoint completed: %+v", cps)
	}
	checkExactlyOnce(t, committed(t, c.Blob(), "fs/out"), keys, perKey)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		prefix := "tenants/" + client.DefaultTenant + "/jobs/" + id + "/"
		n := 0
		for range blob.All(context.Background(), c.Blob(), prefix) {
			n++
		}
		if n > 0 {
			return fmt.Errorf("the finished job left %d objects (checkpoints or pending parts) under %s", n, prefix)
		}
		return nil
	})
}

// TestMinIOOutage stops the blob store (a private MinIO) for a while during
// a run: checkpoints fail and are aborted, the job keeps going, and once
// MinIO is back checkpoints complete again; the committed output is still
// exactly once.
func TestMinIOOutage(t *testing.T) {
	// 80,000 records at 4,000 a second: the input lasts about 20 s, longer
	// than the outage (two aborted checkpoints, 5–12 s), so checkpoints can
	// complete after it.
	const keys, perKey = 16, 5000
	m := testutil.StartMinIO(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey)
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{Slots: 4,
		BlobURL: fmt.Sprintf("s3://outage?endpoint=%s&secure=false&create_bucket=true", m.Endpoint)})
	cl := c.Client()
	ctx := context.Background()
	// On a loaded machine the input can run out while MinIO is still down;
	// the final upload then fails the task, and restarts (from a completed
	// checkpoint, once MinIO is back) must keep the output exactly once.
	cp := map[string]string{jobconfig.KeyCheckpointInterval: "200ms", jobconfig.KeyCheckpointTimeout: "2s", jobconfig.KeyClock: string(jobconfig.ClockWall),
		jobconfig.KeyRestartStrategy: "fixed-delay", jobconfig.KeyFixedDelayAttempts: "100", jobconfig.KeyFixedDelayDelay: "500ms"}
	id := run(t, cl, wasm, 2, cp, "", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey), "--rate", "4000", "--out", "outage/out")
	completed := func() []client.Checkpoint {
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(cps, func(c client.Checkpoint) bool { return c.Status != "COMPLETED" })
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if len(completed()) == 0 {
			return fmt.Errorf("no checkpoint of job %s completed before the outage", id)
		}
		return nil
	})

	m.Stop()
	down := time.Now()
	// abortedSince counts the checkpoints triggered during the outage that
	// were aborted.
	abortedSince := func() int {
		cps, _ := cl.ListCheckpoints(ctx, id)
		n := 0
		for _, c := range cps {
			if c.Status == "ABORTED" && c.Triggered.After(down) {
				n++
			}
		}
		return n
	}
	testutil.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if abortedSince() == 0 {
			return errors.New("no checkpoint was aborted while MinIO was down")
		}
		return nil
	})
	before := completed()[0].ID
	// Let the outage last: more checkpoints fail before MinIO comes back.
	first := abortedSince()
	testutil.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := abortedSince(); n <= first {
			return fmt.Errorf("%d checkpoints aborted during the outage, want more than %d", n, first)
		}
		return nil
	})
	m.Start()
	up := time.Now()
	t.Logf("MinIO down for %v", up.Sub(down).Round(time.Millisecond))

	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		d, err := cl.GetJob(ctx, id)
		if err == nil && client.Terminal(d.State) {
			return nil
		}
		if last := completed()[0].ID; last <= before {
			return fmt.Errorf("no checkpoint completed after MinIO came back: the last completed is still %d", last)
		}
		return nil
	})
	r := localtest.WaitFinished(t, c, id)
	if v := r.Accumulators["violations"]; v != 0 {
		t.Errorf("%d sequence violations", v)
	}
	cps, _ := cl.ListCheckpoints(ctx, id)
	var aborted, after int
	for _, c := range cps {
		switch {
		case c.Status == "ABORTED":
			aborted++
		case c.Status == "COMPLETED" && c.Triggered.After(up):
			after++
		}
	}
	t.Logf("%d checkpoints aborted during the outage, %d completed after it; %d restarts", aborted, after, r.Restarts)
	if after == 0 {
		t.Errorf("no checkpoint triggered after the outage completed: %+v", cps)
	}
	checkExactlyOnce(t, committed(t, c.Blob(), "outage/out"), keys, perKey)
}

// TestStreamedRecordsExactlyOnce reads an unbounded job's collected records
// while it runs, as an attached `sluice run` does: they arrive as
// checkpoints complete, and a TaskManager killed on the way (its tasks
// restored from the latest checkpoint) neither loses nor repeats one of
// the records already read.
func TestStreamedRecordsExactlyOnce(t *testing.T) {
	const keys, perKey = 4, 1500
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 2, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	cl := c.Client()
	cp := map[string]string{jobconfig.KeyCheckpointInterval: "100ms", jobconfig.KeyClock: string(jobconfig.ClockWall),
		"restart-strategy": "fixeddelay", "restart-strategy.fixed-delay.attempts": "20", "restart-strategy.fixed-delay.delay": "200ms"}
	id := run(t, cl, wasm, 2, cp, "", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", "3000", "--records", "--unbounded")
	ctx := context.Background()
	if _, err := cl.PollRecords(ctx, id, -1, 0); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "start at 0") {
		t.Fatalf("records from -1: %v", err)
	}
	var lines []string
	whileRunning, killed := 0, false
	deadline := time.Now().Add(3 * time.Minute)
	for len(lines) < keys*perKey {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d records in 3 minutes", len(lines), keys*perKey)
		}
		r, err := cl.PollRecords(ctx, id, int64(len(lines)), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if client.Terminal(r.State) {
			t.Fatalf("the unbounded job ended %s after %d records: %s", r.State, len(lines), r.Failure)
		}
		if r.RecordsOffset != int64(len(lines)) && len(r.Records) > 0 {
			t.Fatalf("asked from record %d, got records from %d", len(lines), r.RecordsOffset)
		}
		if r.State == client.StateRunning {
			whileRunning += len(r.Records)
		}
		lines = append(lines, localtest.Lines(r.Records)...)
		if !killed && len(lines) >= keys*perKey/4 {
			d, err := cl.GetJob(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			victim := localtest.TaskManagerIndex(t, c, d.Vertices[len(d.Vertices)-1].Subtasks[0].TaskManager)
			t.Logf("killing task manager %d after %d records", victim, len(lines))
			c.KillTaskManager(victim)
			c.StartTaskManager(2) // a replacement, as a supervisor would start
			killed = true
		}
	}
	if whileRunning == 0 {
		t.Error("no record was read while the job was RUNNING")
	}
	checkExactlyOnce(t, lines, keys, perKey)
	// Two more checkpoints: nothing else is released (the source is done).
	cps := func() int {
		n := 0
		all, err := cl.ListCheckpoints(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range all {
			if c.Status == "COMPLETED" {
				n++
			}
		}
		return n
	}
	after := cps()
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		if n := cps(); n < after+2 {
			return fmt.Errorf("%d checkpoints completed since, want 2", n-after)
		}
		return nil
	})
	r, err := cl.PollRecords(ctx, id, int64(len(lines)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.RecordsTotal != int64(keys*perKey) || len(r.Records) != 0 {
		t.Fatalf("after every record was read the job released %d in all (%d more), want %d", r.RecordsTotal, len(r.Records), keys*perKey)
	}
	if d, err := cl.GetJob(ctx, id); err != nil || d.Restarts == 0 {
		t.Errorf("the job did not restart after its task manager was killed: %+v %v", d.Restarts, err)
	}
	if err := cl.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if d := localtest.WaitTerminal(t, c, id, time.Minute); d.State != client.StateCanceled {
		t.Fatalf("job ended %s after cancel", d.State)
	}
}

// A job stopped with a savepoint ends FINISHED with its accumulators:
// what its tasks counted up to the savepoint (they are canceled after it).
func TestStopWithSavepointKeepsAccumulators(t *testing.T) {
	wasm := localtest.Guest(t, "examples/exactlyonce")
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	ctx := context.Background()
	id := run(t, cl, wasm, 2, map[string]string{jobconfig.KeyCheckpointInterval: "100ms"}, "", "--keys", "4", "--per-key", "100", "--unbounded", "--records")
	localtest.WaitAllRunning(t, c, id, time.Minute)
	if _, err := cl.TriggerSavepoint(ctx, id, true, time.Minute); err != nil {
		t.Fatal(err)
	}
	r := localtest.WaitFinished(t, c, id)
	if v, ok := r.Accumulators["violations"]; !ok || v != 0 {
		t.Fatalf("accumulators after the stop: %v, want violations 0", r.Accumulators)
	}
}
