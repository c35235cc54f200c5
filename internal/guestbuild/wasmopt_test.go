package guestbuild

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// requireWasmOpt skips the test when wasm-opt cannot optimize modules, or
// fails it when WasmOptRequired says it must be there.
func requireWasmOpt(t *testing.T) {
	t.Helper()
	if err := WasmOptToolchain(context.Background()); err != nil {
		if WasmOptRequired() {
			t.Fatalf("%s=1 but wasm-opt does not work: %v", RequireWasmOptEnv, err)
		}
		t.Skipf("no wasm-opt (set %s=1 to fail instead): %v", RequireWasmOptEnv, err)
	}
}

// A Go guest whose export does real work (a map, a string, a loop), so an
// optimizer that broke Go's runtime or code would change its answer.
const optGuestSrc = `package main

import "strings"

//go:wasmexport answer
func answer() int32 {
	counts := map[string]int32{}
	for _, w := range strings.Fields("a b a c a b d") {
		counts[w]++
	}
	return counts["a"]*10 + counts["b"] + int32(len(counts))*100
}

func main() {}
`

// exports compiles wasm with wazero and returns its exported functions'
// names and the debug name of answer (from the name section), and calls
// answer in a WASI reactor instance.
func exports(t *testing.T, wasm []byte) (names []string, debugName string, answer uint64) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	for name := range cm.ExportedFunctions() {
		names = append(names, name)
	}
	slices.Sort(names)
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		t.Error("the module does not export its memory")
	}
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	res, err := mod.ExportedFunction("answer").Call(ctx)
	if err != nil {
		t.Fatalf("call answer: %v", err)
	}
	return names, cm.ExportedFunctions()["answer"].DebugName(), res[0]
}

func TestBuildWasmOptKeepsExportsNamesAndBehaviour(t *testing.T) {
	requireWasmOpt(t)
	ctx := context.Background()
	dir, cache := t.TempDir(), t.TempDir()
	writeGuest(t, dir, optGuestSrc)
	plain, err := BuildTo(ctx, dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := BuildWith(ctx, dir, Options{Cache: cache, WasmOpt: "O1"})
	if err != nil {
		t.Fatal(err)
	}
	if opt == plain {
		t.Fatal("the optimized module is the plain one's cache entry")
	}
	pb, _ := os.ReadFile(plain)
	ob, _ := os.ReadFile(opt)
	if string(pb) == string(ob) {
		t.Fatal("wasm-opt changed nothing")
	}
	wantNames, wantDebug, want := exports(t, pb)
	names, debug, got := exports(t, ob)
	if !slices.Equal(names, wantNames) || !slices.Contains(names, "_initialize") {
		t.Errorf("exports %v, want the plain module's %v with _initialize", names, wantNames)
	}
	if debug != wantDebug || !strings.Contains(debug, "answer") {
		t.Errorf("answer's name %q, want the plain module's %q: the name section was lost", debug, wantDebug)
	}
	if got != want || want != 432 {
		t.Errorf("answer() = %d optimized, %d plain; want 432", got, want)
	}

	// Cached: the same sources and level give the same file untouched; a
	// level is a different entry; changed sources are rebuilt.
	st1, _ := os.Stat(opt)
	again, err := BuildWith(ctx, dir, Options{Cache: cache, WasmOpt: "O1"})
	if st2, _ := os.Stat(again); err != nil || again != opt || !st2.ModTime().Equal(st1.ModTime()) {
		t.Errorf("second build: %q %v, want the cached %q untouched", again, err, opt)
	}
	if o2, err := BuildWith(ctx, dir, Options{Cache: cache, WasmOpt: "O2"}); err != nil || o2 == opt || o2 == plain {
		t.Errorf("level O2: %q %v, want an entry of its own", o2, err)
	}
	writeGuest(t, dir, strings.Replace(optGuestSrc, "*10", "*20", 1))
	if changed, err := BuildWith(ctx, dir, Options{Cache: cache, WasmOpt: "O1"}); err != nil || changed == opt {
		t.Errorf("changed sources: %q %v, want a new entry", changed, err)
	}
}

func TestBuildWasmOptErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeGuest(t, dir, guestSrc)
	_, err := BuildWith(ctx, dir, Options{Cache: t.TempDir(), WasmOpt: "O9"})
	if err == nil || !strings.Contains(err.Error(), `wasm-opt level "O9": want one of O1, O2, O3, O4, Os, Oz`) {
		t.Errorf("level O9: %v", err)
	}
	cdir := t.TempDir()
	writeCGuest(t, cdir, map[string]string{"guest.c": cGuestSrc, "answer.h": cGuestHdr})
	_, err = BuildWith(ctx, cdir, Options{Cache: t.TempDir(), WasmOpt: "O2"})
	if err == nil || !strings.Contains(err.Error(), "wasm-opt runs only over Go guests, and this is a C guest") {
		t.Errorf("a C guest with wasm-opt: %v", err)
	}
}

// Without wasm-opt on PATH (but with go), a build with a level says what
// to install, and the probe agrees.
func TestWasmOptMissing(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(goBin, filepath.Join(bin, "go")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	ctx := context.Background()
	dir := t.TempDir()
	writeGuest(t, dir, guestSrc)
	for name, err := range map[string]error{
		"WasmOptToolchain": WasmOptToolchain(ctx),
		"BuildWith": func() error {
			_, err := BuildWith(ctx, dir, Options{Cache: t.TempDir(), WasmOpt: "O2"})
			return err
		}(),
	} {
		if !errors.Is(err, ErrNoWasmOpt) || !strings.Contains(err.Error(), "not on PATH") ||
			!strings.Contains(err.Error(), "install the Debian package "+WasmOptDebianPackages) {
			t.Errorf("%s without wasm-opt: err = %v, want %v naming the package", name, err, ErrNoWasmOpt)
		}
	}
}
