package guestbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requireRust skips the test when cargo cannot build Rust guests, or fails
// it when RustRequired says the toolchain must be there.
func requireRust(t *testing.T) {
	t.Helper()
	if err := RustToolchain(context.Background()); err != nil {
		if RustRequired() {
			t.Fatalf("%s=1 but the Rust toolchain does not work: %v", RequireRustEnv, err)
		}
		t.Skipf("no Rust toolchain (set %s=1 to fail instead): %v", RequireRustEnv, err)
	}
}

// A Rust guest crate with a path dependency, as a guest depends on the SDK:
// the dependency's sources must be part of the hash.
var rustTree = map[string]string{
	"dep/Cargo.toml":   "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
	"dep/src/lib.rs":   "pub const ANSWER: i32 = 42;\n",
	"guest/Cargo.toml": "[package]\nname = \"guest\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\ndep = { path = \"../dep\" }\n",
	"guest/src/lib.rs": "#[no_mangle]\npub extern \"C\" fn answer() -> i32 { dep::ANSWER }\n\n#[no_mangle]\npub extern \"C\" fn _initialize() {}\n",
	"guest/README.md":  "not a source, but part of the crate\n",
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildRustCachesByContent(t *testing.T) {
	requireRust(t)
	ctx := context.Background()
	root, cache := t.TempDir(), t.TempDir()
	writeTree(t, root, rustTree)
	guest := filepath.Join(root, "guest")
	p1 := buildTwice(t, guest, cache)
	if _, err := os.Stat(filepath.Join(guest, "target")); err == nil {
		t.Error("cargo wrote its target directory into the sources")
	}

	writeTree(t, root, map[string]string{"dep/src/lib.rs": "pub const ANSWER: i32 = 43;\n"})
	p2, err := BuildTo(ctx, guest, cache)
	if err != nil || p2 == p1 {
		t.Fatalf("a changed path dependency kept its cache entry: %q %v", p2, err)
	}
	writeTree(t, root, map[string]string{"guest/src/extra.rs": "pub fn extra() {}\n"})
	p3, err := BuildTo(ctx, guest, cache)
	if err != nil || p3 == p2 {
		t.Fatalf("an added source file kept its cache entry: %q %v", p3, err)
	}

	// The hash and the bytes depend on the sources, not on where they are.
	moved, cache2 := t.TempDir(), t.TempDir()
	writeTree(t, moved, rustTree)
	writeTree(t, moved, map[string]string{"guest/Cargo.lock": mustRead(t, filepath.Join(guest, "Cargo.lock"))})
	p4, err := BuildTo(ctx, filepath.Join(moved, "guest"), cache2)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p4) != filepath.Base(p1) {
		t.Errorf("the same sources elsewhere hash to %s, want %s", filepath.Base(p4), filepath.Base(p1))
	}
	if a, b := mustRead(t, p1), mustRead(t, p4); a != b {
		t.Errorf("the same sources elsewhere built different modules (%d and %d bytes): the build is not reproducible", len(a), len(b))
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuildRustCompileError(t *testing.T) {
	requireRust(t)
	root := t.TempDir()
	writeTree(t, root, rustTree)
	writeTree(t, root, map[string]string{"guest/src/lib.rs": "pub fn f() -> i32 { undefined_thing }\n"})
	_, err := BuildTo(context.Background(), filepath.Join(root, "guest"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "undefined_thing") {
		t.Fatalf("a broken Rust guest: err = %v, want rustc's message", err)
	}
	if errors.Is(err, ErrNoRustToolchain) {
		t.Errorf("a compile error was reported as a missing toolchain: %v", err)
	}
}

func TestBuildRustNotCdylib(t *testing.T) {
	requireRust(t)
	root := t.TempDir()
	writeTree(t, root, rustTree)
	writeTree(t, root, map[string]string{"guest/Cargo.toml": "[package]\nname = \"guest\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ndep = { path = \"../dep\" }\n"})
	_, err := BuildTo(context.Background(), filepath.Join(root, "guest"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `crate-type = ["cdylib"]`) {
		t.Fatalf("a crate without a cdylib: err = %v, want what to set", err)
	}
}

func TestRustToolchainMissing(t *testing.T) {
	old := rustBin
	rustBin = t.TempDir()
	t.Cleanup(func() { rustBin = old })
	ctx := context.Background()
	root := t.TempDir()
	writeTree(t, root, rustTree)
	for name, err := range map[string]error{
		"RustToolchain": RustToolchain(ctx),
		"BuildTo":       func() error { _, err := BuildTo(ctx, filepath.Join(root, "guest"), t.TempDir()); return err }(),
	} {
		if !errors.Is(err, ErrNoRustToolchain) || !strings.Contains(err.Error(), "is not installed") ||
			!strings.Contains(err.Error(), RustDebianPackages) {
			t.Errorf("%s without cargo: err = %v, want %v naming the packages", name, err, ErrNoRustToolchain)
		}
	}
}

// A cargo whose rustc has no wasm32-wasi standard library (a rustup
// toolchain, or Debian's without libstd-rust-dev-wasm32) gets an error with
// cargo's message and the packages to install.
func TestRustToolchainBroken(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\n" +
		"case \"$1\" in -vV) echo 'fake 1.0'; exit 0;; esac\n" +
		"echo \"error[E0463]: can't find crate for std\" >&2\nexit 101\n"
	for _, tool := range []string{"cargo", "rustc"} {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := rustBin
	rustBin = bin
	t.Cleanup(func() { rustBin = old })
	ctx := context.Background()
	root := t.TempDir()
	writeTree(t, root, rustTree)
	for name, err := range map[string]error{
		"RustToolchain": RustToolchain(ctx),
		"BuildTo":       func() error { _, err := BuildTo(ctx, filepath.Join(root, "guest"), t.TempDir()); return err }(),
	} {
		if !errors.Is(err, ErrNoRustToolchain) || !strings.Contains(err.Error(), "can't find crate for std") ||
			!strings.Contains(err.Error(), RustDebianPackages) {
			t.Errorf("%s with a broken cargo: err = %v, want cargo's stderr and the packages", name, err)
		}
	}
}

// A directory with a Cargo.toml is a Rust guest even with Go test files in
// it, as examples/wordcount-rs has its tests beside the crate.
func TestRustGuestDetected(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"Cargo.toml": "not toml [", "x_test.go": "package x_test\n"})
	_, err := BuildTo(context.Background(), dir, t.TempDir())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("cargo")) {
		t.Errorf("a directory with a Cargo.toml: err = %v, want cargo's", err)
	}
}
