//go:build !wasip1

// Package oracle_test holds the C word count's tests (Go refuses a package
// directory with C files, so they live here). They build the module with
// clang, run it on an embedded cluster and compare the counts with the
// real coreutils, at several parallelisms and across a savepoint.
package oracle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestWordCountCMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.CGuest(t, "examples/wordcount-c"))
}

// TestWordCountCPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountCPlan(t *testing.T) {
	wasm := localtest.CGuest(t, "examples/wordcount-c")
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
		"--input a --out": "unknown argument --out: wordcount-c takes --input PATH (repeatable)",
	} {
		_, err := mod.Plan(ctx, strings.Fields(args), wasmhost.Limits{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("plan %q: %v, want %q", args, err, want)
		}
	}
}

// TestWordCountCSavepoint stops a p=2 run with a savepoint part-way (the
// count's barrier export writes its accumulators to keyed state) and
// resumes it at p=3: the resumed job restores the counts through
// state_scan and reads only the splits that were left, so the result is
// still exact.
func TestWordCountCSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.CGuest(t, "examples/wordcount-c"))
}
