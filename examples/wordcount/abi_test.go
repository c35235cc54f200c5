//go:build !wasip1

package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

// TestWordCountOtherABIVersion: the module the Go SDK builds, declaring
// another ABI version (its version export renamed, nothing else changed),
// is refused at compile time with both versions named; the module as built
// compiles.
func TestWordCountOtherABIVersion(t *testing.T) {
	wasm := localtest.Guest(t, "examples/wordcount")
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig().WithCacheDir(localtest.CompileCache()))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if _, err := rt.Compile(ctx, localtest.WithOtherABIVersion(t, wasm)); err == nil || !strings.Contains(err.Error(), localtest.RefusedABIVersion) {
		t.Fatalf("compile with %s: %v, want %q", localtest.OtherABIVersion, err, localtest.RefusedABIVersion)
	}
	if _, err := rt.Compile(ctx, wasm); err != nil {
		t.Fatalf("the module as built: %v", err)
	}
}
