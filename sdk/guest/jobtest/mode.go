//go:build !wasip1

package jobtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/wasmhost"
)

// Record is one element of a stream, as the guest SDK's guest.Record: a
// value, and optionally a key and a time.
type Record = abi.Record

// Mode is how a harness runs a job: natively, as Go code in the test binary
// ([Native]), or as the compiled module in wazero ([Wasm]).
type Mode struct {
	name string
	mod  *wasmhost.Module // nil: native
}

// Native runs the job this test binary registered with guest.Job (the
// init function of the job's package main, so the test is a test of that
// package) as Go code, with the host's rules of docs/ABI.md applied to
// every host call and the host's own state store (wasmhost.State) for
// keyed state, operator state, timers and snapshots.
//
// # Notes
//
// The Go SDK runs one task per process, so a native task must be closed
// before the next opens (RunJob runs its tasks one after another), and
// tests of one binary that use Native must not run in parallel. A job's
// package-level variables live as long as the test binary, where in Wasm
// each task starts with fresh ones: keep what a task must not share in
// state or in the task's own values.
func Native() *Mode { return &Mode{name: "native"} }

// Wasm builds the guest in dir (a Go main package, C sources, a Rust crate
// or an AssemblyScript project, as `sluice run` builds it; relative to the
// test's working directory, which is its package's directory) and runs it
// in wazero, as a TaskManager does. It fails the test when the guest does
// not build or compile.
//
// # Notes
//
// A directory is built and its module compiled once per test binary, in
// one wazero runtime the binary keeps; across runs the build and the
// compiled code are cached on disk, so only the first run of a changed job
// pays for them.
func Wasm(t testing.TB, dir string) *Mode {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("jobtest: %v", err)
	}
	wasmModules.Lock()
	defer wasmModules.Unlock()
	if m, ok := wasmModules.byDir[abs]; ok {
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path, err := guestbuild.Build(ctx, abs)
	if err != nil {
		t.Fatalf("jobtest: %v", err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("jobtest: %v", err)
	}
	m, err := compileLocked(ctx, wasm)
	if err != nil {
		t.Fatalf("jobtest: build %s: %v", dir, err)
	}
	if wasmModules.byDir == nil {
		wasmModules.byDir = map[string]*Mode{}
	}
	wasmModules.byDir[abs] = m
	return m
}

// WasmModule runs the module wasm in wazero, as Wasm does for a directory.
func WasmModule(t testing.TB, wasm []byte) *Mode {
	t.Helper()
	wasmModules.Lock()
	defer wasmModules.Unlock()
	m, err := compileLocked(context.Background(), wasm)
	if err != nil {
		t.Fatalf("jobtest: %v", err)
	}
	return m
}

// wasmModules are the test binary's Wasm modes, by directory, and the one
// runtime that compiles them: validating and instrumenting a Go guest
// takes seconds (much longer under -race), and a test binary runs the same
// job in many tests. It is process-wide, as the test binary's builds are.
var wasmModules struct {
	sync.Mutex
	rt    *wasmhost.Runtime
	byDir map[string]*Mode
}

func compileLocked(ctx context.Context, wasm []byte) (*Mode, error) {
	if wasmModules.rt == nil {
		cfg := wasmhost.NewRuntimeConfig()
		if base, err := os.UserCacheDir(); err == nil {
			// The cache local/localtest uses: the compiled code depends
			// only on the module and wazero.
			cfg = cfg.WithCacheDir(filepath.Join(base, "sluice", "test-cache"))
		}
		rt, err := wasmhost.NewRuntime(ctx, cfg)
		if err != nil {
			return nil, err
		}
		wasmModules.rt = rt
	}
	mod, err := wasmModules.rt.Compile(ctx, wasm)
	if err != nil {
		return nil, err
	}
	return &Mode{name: "wasm", mod: mod}, nil
}

// String returns "native" or "wasm".
func (m *Mode) String() string { return m.name }

// IsNative reports whether m runs the job as Go code.
func (m *Mode) IsNative() bool { return m.mod == nil }

// Run runs fn twice, as the subtests "native" and "wasm" of t: with the
// job of this test binary as Go code, and with the module built from dir
// in wazero. It is how one test checks a job in both modes.
func Run(t *testing.T, dir string, fn func(t *testing.T, m *Mode)) {
	t.Helper()
	t.Run("native", func(t *testing.T) { fn(t, Native()) })
	t.Run("wasm", func(t *testing.T) { fn(t, Wasm(t, dir)) })
}

// Identical runs fn natively and in wazero (the module built from dir) and
// fails t unless both return deeply equal results (reflect.DeepEqual); it
// returns the native result, for the test's own checks. fn should return
// everything the test observes: output, counters, snapshots' effects.
func Identical[R any](t testing.TB, dir string, fn func(t testing.TB, m *Mode) R) R {
	t.Helper()
	native := fn(t, Native())
	wasm := fn(t, Wasm(t, dir))
	if !reflect.DeepEqual(native, wasm) {
		t.Errorf("jobtest: the job behaves differently natively and in wasm:\nnative: %v\nwasm:   %v", native, wasm)
	}
	return native
}

// Plan runs the job's plan with args and returns the graph it declares.
//
// # Errors
//
// What the job's plan reports (its usage message for bad arguments), or a
// *wasmhost.GuestError when it fails in another way.
func (m *Mode) Plan(ctx context.Context, args []string) (*jobgraph.Graph, error) {
	if m.mod == nil {
		return nativePlan(args, guest.NativeModule)
	}
	return m.mod.Plan(ctx, args, wasmhost.Limits{})
}

// instance is what a harness drives: a *wasmhost.Instance, or a
// nativeInstance with the same methods and rules.
type instance interface {
	Open(ctx context.Context) error
	Process(ctx context.Context, recs []abi.Record) error
	SourcePoll(ctx context.Context, max int) (bool, error)
	EndInput(ctx context.Context) error
	Barrier(ctx context.Context, checkpointID int64) error
	NextTimer() (int64, bool)
	FireTimers(ctx context.Context, nowMs int64) error
	Watermark() int64
	NextEventTimer() (int64, bool)
	AdvanceWatermark(ctx context.Context, wm int64) error
	Counters() map[string]int64
	State() *wasmhost.State
	Close(ctx context.Context) error
}

var _ instance = (*wasmhost.Instance)(nil)

func (m *Mode) instantiate(ctx context.Context, cfg wasmhost.TaskConfig) (instance, error) {
	if m.mod == nil {
		return newNativeInstance(cfg, guest.NativeModule)
	}
	in, err := m.mod.Instantiate(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return in, nil
}

func (m *Mode) errorf(format string, args ...any) error {
	return fmt.Errorf("jobtest (%s): "+format, append([]any{m.name}, args...)...)
}
