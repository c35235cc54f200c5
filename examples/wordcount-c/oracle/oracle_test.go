//go:build !wasip1

// Package oracle_test holds the C word count's tests (Go refuses a package
// directory with C files, so they live here). They build the module with
// clang, run it on an embedded cluster and compare the counts with the
// real coreutils, at several parallelisms and across a savepoint.
package oracle_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/cluster"
	"github.com/sluicehq/sluice/internal/cluster/clustertest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sdk/client"
)

func input(t *testing.T, size int64) (string, []string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := clustertest.GenerateText(in, size, 1); err != nil {
		t.Fatal(err)
	}
	return in, clustertest.CoreutilsWordCount(t, in)
}

func wait(t *testing.T, cl *client.Client, id string) client.JobResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := cl.WaitJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateFinished {
		t.Fatalf("job %s ended %s: %s", id, r.State, r.Failure)
	}
	return r
}

func TestWordCountCMatchesCoreutils(t *testing.T) {
	wasm := clustertest.CGuest(t, "examples/wordcount-c")
	in, want := input(t, 4<<20)
	c := clustertest.Start(t, cluster.Config{TaskManagers: 2, Slots: 2})
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			id, err := clustertest.Submit(ctx, cl, c.Blob(), wasm, []string{"--input", in}, p)
			if err != nil {
				t.Fatal(err)
			}
			r := wait(t, cl, id)
			if d := clustertest.Diff(want, clustertest.Lines(r.Records)); d != "" {
				t.Fatalf("word counts differ from coreutils:\n%s", d)
			}
			t.Logf("p=%d: %d distinct words in %v", p, len(r.Records), r.Duration)
		})
	}
}

// TestWordCountCSavepoint stops a p=2 run with a savepoint part-way (the
// count's barrier export writes its accumulators to keyed state) and
// resumes it at p=3: the resumed job restores the counts through
// state_scan and reads only the splits that were left, so the result is
// still exact.
func TestWordCountCSavepoint(t *testing.T) {
	wasm := clustertest.CGuest(t, "examples/wordcount-c")
	in, want := input(t, 32<<20)
	c := clustertest.Start(t, cluster.Config{Slots: 6})
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	args := []string{"--input", in}
	inputs, err := cluster.StageInputs(ctx, c.Blob(), cluster.DefaultTenant, args)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(p int, from string) client.JobSpec {
		cfg := cluster.InputsConfig(map[string]string{checkpoint.KeyInterval: "20ms"}, inputs)
		return client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: p, Config: cfg, FromSavepoint: from}
	}
	id, err := cl.SubmitJob(ctx, spec(2, ""))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func() bool {
		cps, err := cl.ListCheckpoints(ctx, id)
		return err == nil && len(cps) > 0
	}, "no checkpoint completed")
	sp, err := cl.TriggerSavepoint(ctx, id, true, time.Minute)
	if err != nil {
		t.Fatalf("savepoint (the job may have ended first; make the input larger): %v", err)
	}
	if stopped := wait(t, cl, id); len(stopped.Records) != 0 {
		t.Fatalf("the stopped job emitted %d final counts; its input never ended", len(stopped.Records))
	}
	t.Logf("savepoint %s: %d bytes", sp.SavepointID, sp.Size)
	id, err = cl.SubmitJob(ctx, spec(3, sp.SavepointID))
	if err != nil {
		t.Fatal(err)
	}
	r := wait(t, cl, id)
	if d := clustertest.Diff(want, clustertest.Lines(r.Records)); d != "" {
		t.Fatalf("word counts after the savepoint differ from coreutils:\n%s", d)
	}
}
