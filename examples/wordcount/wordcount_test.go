//go:build !wasip1

// The word count's tests run on the host (the job itself builds only for
// wasip1): they build the module, run it on an embedded cluster at
// parallelism 1, 2 and 4 and across a savepoint, and compare the counts with
// the real coreutils.
package main_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestWordCountMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.Guest(t, "examples/wordcount"))
}

// TestWordCountPlan: the plan names its inputs (escaped into JSON), bad
// arguments fail it with a message that says what was wrong, and the typed
// job declares the same graph as the byte-level one (examples/wordcount-bytes).
func TestWordCountPlan(t *testing.T) {
	mod := localtest.CheckWordCountPlan(t, localtest.Guest(t, "examples/wordcount"), "wordcount")
	ctx := context.Background()
	g, err := mod.Plan(ctx, []string{"--input", "in.txt"}, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	bytesMod, err := rt.Compile(ctx, localtest.Guest(t, "examples/wordcount-bytes"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := bytesMod.Plan(ctx, []string{"--input", "in.txt"}, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("typed graph\n%+v\nbyte-level graph\n%+v", g, want)
	}
}

// TestWordCountSavepoint stops a p=2 run with a savepoint part-way (the
// count writes its cached counts to keyed state at the barrier) and resumes
// it at p=3: the counts are restored and only the splits left are read, so
// the result is still exact.
func TestWordCountSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.Guest(t, "examples/wordcount"))
}
