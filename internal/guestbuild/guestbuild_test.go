package guestbuild

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A guest package outside the module's tree, using only the standard
// library, so the test does not depend on the SDK.
const guestSrc = `package main

//go:wasmexport answer
func answer() int32 { return 42 }

func main() {}
`

func writeGuest(t *testing.T, dir, src string) {
	t.Helper()
	for name, content := range map[string]string{
		"go.mod":  "module example.com/g\n\ngo 1.24\n",
		"main.go": src,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildCachesByContent(t *testing.T) {
	ctx := context.Background()
	dir, cache := t.TempDir(), t.TempDir()
	writeGuest(t, dir, guestSrc)
	p1, err := BuildTo(ctx, dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p1)
	if err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Fatalf("not a wasm module: %v", err)
	}
	if !bytes.Contains(b, []byte("answer")) || !bytes.Contains(b, []byte("_initialize")) {
		t.Error("the module lacks the export or the reactor initializer")
	}
	st1, _ := os.Stat(p1)
	p2, err := BuildTo(ctx, dir, cache)
	if err != nil || p2 != p1 {
		t.Fatalf("second build: %q %v, want the cached %q", p2, err, p1)
	}
	if st2, _ := os.Stat(p2); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("an unchanged package was rebuilt")
	}
	writeGuest(t, dir, strings.Replace(guestSrc, "42", "43", 1))
	p3, err := BuildTo(ctx, dir, cache)
	if err != nil || p3 == p1 {
		t.Fatalf("a changed package kept its cache entry: %q %v", p3, err)
	}
}

func TestBuildErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeGuest(t, dir, "package main\n\nfunc main() { undefined() }\n")
	if _, err := BuildTo(ctx, dir, t.TempDir()); err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Errorf("a broken package: err = %v", err)
	}
	if _, err := BuildTo(ctx, filepath.Join(dir, "missing"), t.TempDir()); err == nil {
		t.Error("a missing directory built")
	}
}
