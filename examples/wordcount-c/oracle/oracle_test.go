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

	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestWordCountCMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.CGuest(t, "examples/wordcount-c"))
}

// TestWordCountCPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountCPlan(t *testing.T) {
	localtest.CheckWordCountPlan(t, localtest.CGuest(t, "examples/wordcount-c"), "wordcount-c")
}

// TestWordCountCSavepoint stops a p=2 run with a savepoint part-way (the
// count's barrier export writes its accumulators to keyed state) and
// resumes it at p=3: the resumed job restores the counts through
// state_scan and reads only the splits that were left, so the result is
// still exact.
func TestWordCountCSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.CGuest(t, "examples/wordcount-c"))
}

// TestWordCountCOtherABIVersion: the C word count rebuilt from its sources
// with EXPORT("sluice_abi_v2") in place of EXPORT("sluice_abi_v1") is
// refused at compile time with both versions named; the module as built
// compiles.
func TestWordCountCOtherABIVersion(t *testing.T) {
	v2 := localtest.CGuestWithOtherABIVersion(t, "examples/wordcount-c")
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if _, err := rt.Compile(ctx, v2); err == nil || !strings.Contains(err.Error(), localtest.RefusedABIVersion) {
		t.Fatalf("compile with %s: %v, want %q", localtest.OtherABIVersion, err, localtest.RefusedABIVersion)
	}
	if _, err := rt.Compile(ctx, localtest.CGuest(t, "examples/wordcount-c")); err != nil {
		t.Fatalf("the module as built: %v", err)
	}
}
