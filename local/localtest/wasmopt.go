package localtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/guestbuild"
)

// WasmOptGuest is Guest for a Go guest optimized by wasm-opt at level, as
// `sluice run --wasm-opt=LEVEL` builds it (cached on disk across runs by
// guestbuild). Without a working wasm-opt it skips the test, unless
// guestbuild.WasmOptRequired (the test command found or installed it), when
// it fails it.
func WasmOptGuest(t testing.TB, rel, level string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := guestbuild.WasmOptToolchain(ctx); err != nil {
		if guestbuild.WasmOptRequired() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	path, err := guestbuild.BuildWith(ctx, filepath.Join(ModuleRoot(t), rel), guestbuild.Options{WasmOpt: level})
	if err != nil {
		t.Fatalf("build guest %s with wasm-opt -%s: %v", rel, level, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
