//go:build !wasip1

// Package oracle_test holds the Rust word count's tests. They build the
// crate with Debian's cargo for wasm32-wasi, run it on an embedded cluster
// and compare the counts with the real coreutils, at several parallelisms
// and across a savepoint.
package oracle_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

const dir = "examples/wordcount-rs"

func TestWordCountRustMatchesCoreutils(t *testing.T) {
	localtest.CheckWordCount(t, localtest.RustGuest(t, dir))
}

func compile(t *testing.T, wasm []byte) (*wasmhost.Module, error) {
	t.Helper()
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	return rt.Compile(ctx, wasm)
}

// TestWordCountRustPlan: the plan names its inputs (escaped into JSON), and
// bad arguments fail the plan with a message that says what was wrong.
func TestWordCountRustPlan(t *testing.T) {
	mod := localtest.CheckWordCountPlan(t, localtest.RustGuest(t, dir), "wordcount-rs")
	ctx := context.Background()
	g, err := mod.Plan(ctx, []string{"--input", "in.txt"}, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "wordcount" || len(g.Vertices) != 6 || g.Vertices[3].Config["emit"] != "final" {
		t.Errorf("graph = %+v, want the word count's six vertices", g)
	}
	// The SDK reports a usage error as an ERROR status, not a trap.
	for args := range localtest.WordCountUsageErrors("wordcount-rs") {
		if _, err := mod.Plan(ctx, strings.Fields(args), wasmhost.Limits{}); !errors.Is(err, wasmhost.ErrGuestFailed) {
			t.Errorf("plan %q: %v, want an ERROR status (%v), not a trap", args, err, wasmhost.ErrGuestFailed)
		}
	}
}

// TestWordCountRustOtherABIVersion: the module the SDK builds, declaring
// another ABI version (its version export renamed, nothing else changed),
// is refused at compile time with both versions named.
func TestWordCountRustOtherABIVersion(t *testing.T) {
	wasm := localtest.RustGuest(t, dir)
	if n := bytes.Count(wasm, []byte("sluice_abi_v1")); n == 0 {
		t.Fatal("the module has no sluice_abi_v1 export")
	}
	v2 := bytes.ReplaceAll(wasm, []byte("sluice_abi_v1"), []byte("sluice_abi_v2"))
	_, err := compile(t, v2)
	if want := "module implements sluice_abi_v2; this host speaks sluice_abi_v1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("compile with sluice_abi_v2: %v, want %q", err, want)
	}
	if _, err := compile(t, wasm); err != nil {
		t.Fatalf("the module as built: %v", err)
	}
}

// TestWordCountRustSavepoint stops a p=2 run with a savepoint part-way (the
// reduce's barrier writes its accumulators to keyed state) and resumes it
// at p=3: the resumed job restores the counts and reads only the splits
// that were left, so the result is still exact.
func TestWordCountRustSavepoint(t *testing.T) {
	localtest.CheckWordCountSavepoint(t, localtest.RustGuest(t, dir))
}
