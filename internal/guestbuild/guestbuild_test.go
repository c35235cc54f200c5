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

// buildTwice builds the guest in dir, checks it is a reactor module that
// exports "answer", and builds it again: the second build must return the
// cached file untouched.
func buildTwice(t *testing.T, dir, cache string) string {
	t.Helper()
	ctx := context.Background()
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
		t.Error("unchanged sources were rebuilt")
	}
	return p1
}

func TestBuildCachesByContent(t *testing.T) {
	ctx := context.Background()
	dir, cache := t.TempDir(), t.TempDir()
	writeGuest(t, dir, guestSrc)
	p1 := buildTwice(t, dir, cache)
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

// requireC skips the test when clang cannot build C guests, or fails it
// when CRequired says the toolchain must be there.
func requireC(t *testing.T) {
	t.Helper()
	if err := CToolchain(context.Background()); err != nil {
		if CRequired() {
			t.Fatalf("%s=1 but the C toolchain does not work: %v", RequireCEnv, err)
		}
		t.Skipf("no C toolchain (set %s=1 to fail instead): %v", RequireCEnv, err)
	}
}

// A C guest split over a source file and a header, like docs/ABI.md
// section 9's, so the build must find headers in the guest directory.
const (
	cGuestSrc = `#include <stdint.h>
#include <stdlib.h>
#include "answer.h"

__attribute__((export_name("answer"))) int32_t answer(void) { return ANSWER; }
__attribute__((export_name("sluice_alloc"))) uint8_t *s_alloc(uint32_t n) { return malloc(n); }
`
	cGuestHdr = "#define ANSWER 42\n"
)

func writeCGuest(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildCCachesByContent(t *testing.T) {
	requireC(t)
	ctx := context.Background()
	dir, cache := t.TempDir(), t.TempDir()
	writeCGuest(t, dir, map[string]string{"guest.c": cGuestSrc, "answer.h": cGuestHdr, "README": "not a source", "guest_test.go": "package guest_test\n"})
	p1 := buildTwice(t, dir, cache)

	writeCGuest(t, dir, map[string]string{"answer.h": "#define ANSWER 43\n"})
	p3, err := BuildTo(ctx, dir, cache)
	if err != nil || p3 == p1 {
		t.Fatalf("a changed header kept its cache entry: %q %v", p3, err)
	}
	writeCGuest(t, dir, map[string]string{"extra.c": "int extra(void) { return 1; }\n"})
	p4, err := BuildTo(ctx, dir, cache)
	if err != nil || p4 == p3 {
		t.Fatalf("an added source file kept its cache entry: %q %v", p4, err)
	}

	// The hash depends on the sources, not on where they are.
	moved := t.TempDir()
	writeCGuest(t, moved, map[string]string{"guest.c": cGuestSrc, "answer.h": cGuestHdr})
	if p5, err := BuildTo(ctx, moved, cache); err != nil || p5 != p1 {
		t.Errorf("the same sources elsewhere: %q %v, want the cached %q", p5, err, p1)
	}
}

func TestBuildCCompileError(t *testing.T) {
	requireC(t)
	dir := t.TempDir()
	writeCGuest(t, dir, map[string]string{"guest.c": "int f(void) { return undefined_thing; }\n"})
	_, err := BuildTo(context.Background(), dir, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "undefined_thing") {
		t.Fatalf("a broken C guest: err = %v, want clang's message", err)
	}
	if errors.Is(err, ErrNoCToolchain) {
		t.Errorf("a compile error was reported as a missing toolchain: %v", err)
	}
}

func TestBuildNoSources(t *testing.T) {
	dir := t.TempDir()
	writeCGuest(t, dir, map[string]string{"answer.h": cGuestHdr, "README": "no sources"})
	if err := os.Mkdir(filepath.Join(dir, "sub.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := BuildTo(context.Background(), dir, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no .go or .c files") {
		t.Errorf("a directory without sources: err = %v", err)
	}
}

func TestCToolchainMissing(t *testing.T) {
	ctx := context.Background()
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	writeCGuest(t, dir, map[string]string{"guest.c": cGuestSrc, "answer.h": cGuestHdr})
	for name, err := range map[string]error{
		"CToolchain": CToolchain(ctx),
		"BuildTo":    func() error { _, err := BuildTo(ctx, dir, t.TempDir()); return err }(),
	} {
		if !errors.Is(err, ErrNoCToolchain) || !strings.Contains(err.Error(), "not on PATH") ||
			!strings.Contains(err.Error(), CDebianPackages) {
			t.Errorf("%s without clang: err = %v, want %v naming the packages", name, err, ErrNoCToolchain)
		}
	}
}

// A clang that runs but cannot target wasm32-wasi (no wasi-libc, no lld)
// gets an error with clang's own message and the packages to install.
func TestCToolchainBroken(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\n" +
		"case \"$1\" in --version) echo 'fake clang 1.0'; exit 0;; esac\n" +
		"echo \"wasm-ld: executable not found\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "clang"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	ctx := context.Background()
	dir := t.TempDir()
	writeCGuest(t, dir, map[string]string{"guest.c": cGuestSrc})
	for name, err := range map[string]error{
		"CToolchain": CToolchain(ctx),
		"BuildTo":    func() error { _, err := BuildTo(ctx, dir, t.TempDir()); return err }(),
	} {
		if !errors.Is(err, ErrNoCToolchain) || !strings.Contains(err.Error(), "wasm-ld: executable not found") ||
			!strings.Contains(err.Error(), CDebianPackages) {
			t.Errorf("%s with a broken clang: err = %v, want clang's stderr and the packages", name, err)
		}
	}
}
