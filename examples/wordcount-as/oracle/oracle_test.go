//go:build !wasip1

// Package oracle_test holds the AssemblyScript word count's tests. They
// build the module with the SDK and the pinned compiler, run it on an
// embedded cluster and compare the counts with the real coreutils, at
// several parallelisms and across a savepoint.
package oracle_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/wasmhost"
)

const guestDir = "examples/wordcount-as"

func TestWordCountASMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.ASGuest(t, guestDir))
}

// TestWordCountASPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountASPlan(t *testing.T) {
	wasm := localtest.ASGuest(t, guestDir)
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
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
	for args, want := range map[string]string{
		"":                "no input: pass -- --input PATH",
		"--input":         "--input needs a value",
		"--input a --out": "unknown argument --out: wordcount-as takes --input PATH (repeatable)",
	} {
		_, err := mod.Plan(ctx, strings.Fields(args), wasmhost.Limits{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("plan %q: %v, want %q", args, err, want)
		}
	}
}

// TestWordCountASSavepoint stops a p=2 run with a savepoint part-way (the
// SDK's reduce writes its accumulators to keyed state at the barrier) and
// resumes it at p=3: the resumed job reads the counts back from keyed state
// and reads only the splits that were left, so the result is still exact.
func TestWordCountASSavepoint(t *testing.T) {
	wasm := localtest.ASGuest(t, guestDir)
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, 32<<20, 1); err != nil {
		t.Fatal(err)
	}
	want := localtest.CoreutilsWordCount(t, in)
	c := localtest.Start(t, local.Config{Slots: 6})
	cl := c.Client()
	ctx := context.Background()
	args := []string{"--input", in}
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
	if stopped := localtest.WaitFinished(t, c, id); len(stopped.Records) != 0 {
		t.Fatalf("the stopped job emitted %d final counts; its input never ended", len(stopped.Records))
	}
	t.Logf("savepoint %s: %d bytes", sp.SavepointID, sp.Size)
	id, err = cl.SubmitJob(ctx, spec(3, sp.SavepointID))
	if err != nil {
		t.Fatal(err)
	}
	r := localtest.WaitFinished(t, c, id)
	if d := localtest.Diff(want, localtest.Lines(r.Records)); d != "" {
		t.Fatalf("word counts after the savepoint differ from coreutils:\n%s", d)
	}
}
