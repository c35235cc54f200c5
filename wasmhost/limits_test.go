package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/wasmgen"
	"github.com/sluicehq/sluice/wasmhost/internal/validate"
)

// hostileShapes are modules far beyond the structural limits, each with
// what its error must say.
func hostileShapes() []struct {
	name string
	wasm func() []byte
	want []string
} {
	nest := func(op byte, n int) func() []byte {
		return func() []byte { return wasmgen.Module{Body: wasmgen.Nest(op, n, nil)}.Bytes() }
	}
	return []struct {
		name string
		wasm func() []byte
		want []string
	}{
		{"1e4 nested loops", nest(wasmgen.Loop, 1e4), []string{"function 0: loop nesting depth 1001", "limit of 1000", "LoopNesting"}},
		{"1e5 nested loops", nest(wasmgen.Loop, 1e5), []string{"loop nesting depth 1001"}},
		// A million levels do not fit in one body: the body's size is refused first.
		{"1e6 nested loops", nest(wasmgen.Loop, 1e6), []string{"function 0: function body bytes 3000002", "BodyBytes"}},
		{"1e5 nested blocks", nest(wasmgen.Block, 1e5), []string{"function 0: control nesting depth 20001", "limit of 20000", "Nesting"}},
		{"1e6 nested blocks", nest(wasmgen.Block, 1e6), []string{"function body bytes 3000002"}},
		{"1e6 functions", func() []byte { return wasmgen.Module{Functions: 1e6}.Bytes() }, []string{"defined functions 1000000", "limit of 200000", "Functions"}},
		{"huge locals", func() []byte { return wasmgen.Module{Locals: 1 << 30}.Bytes() }, []string{"function 0: locals 1073741824", "Locals"}},
		{"huge table", func() []byte { return wasmgen.Module{TableMin: 1 << 27}.Bytes() }, []string{"initial table elements 134217728", "TableElements"}},
		{"huge body", func() []byte { return wasmgen.Module{Body: make([]byte, 1<<20)}.Bytes() }, []string{"function 0: function body bytes 1048578", "BodyBytes"}},
		{"many data segments", func() []byte { return wasmgen.Module{DataSegments: 2e6}.Bytes() }, []string{"data segments 2000000", "DataSegments"}},
		{"huge br_table", func() []byte { return wasmgen.Module{Body: wasmgen.BrTable(1e5)}.Bytes() }, []string{"br_table targets 100001", "BrTableTargets"}},
		{"many types", func() []byte { return wasmgen.Module{Types: 1e5}.Bytes() }, []string{"function types 100001", "Types"}},
	}
}

// TestStructuralLimitsRefuseHostileModules: every hostile shape is refused
// before instrumenting or compiling, with an error naming the limit, the
// value and the function, and the host's heap grows by little more than
// the module's own bytes meanwhile.
func TestStructuralLimitsRefuseHostileModules(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, tc := range hostileShapes() {
		t.Run(tc.name, func(t *testing.T) {
			wasm := tc.wasm()
			stop := testutil.HeapPeak()
			_, err := rt.Compile(ctx, wasm)
			grew := stop()
			if !errors.Is(err, ErrInvalidModule) {
				t.Fatalf("err = %v, want ErrInvalidModule", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// The validator allocates nothing in proportion to the module;
			// 32 MiB is room for the test's own garbage and the sampler.
			if bound := uint64(32 << 20); grew > bound {
				t.Errorf("heap grew by %d MiB refusing a %d KiB module, above %d MiB", grew>>20, len(wasm)>>10, bound>>20)
			}
		})
	}
}

// TestRealGuestsAreWithinHalfTheLimits: the test guest (a Go module using
// the SDK) leaves at least 2x headroom under every structural limit.
func TestRealGuestsAreWithinHalfTheLimits(t *testing.T) {
	testGuest(t)
	withinHalf(t, "the Go test guest", shared.wasm)
}

// TestOtherLanguagesAreWithinHalfTheLimits: the word count of each other
// language's SDK or compiler is under half of every limit too, so the
// limits leave C, Rust and AssemblyScript guests the same headroom. A
// missing toolchain skips its language unless the test command required it.
func TestOtherLanguagesAreWithinHalfTheLimits(t *testing.T) {
	for _, g := range []struct {
		dir      string
		works    func(context.Context) error
		required bool
	}{
		{"../examples/wordcount-c", guestbuild.CToolchain, guestbuild.CRequired()},
		{"../examples/wordcount-rs", guestbuild.RustToolchain, guestbuild.RustRequired()},
		{"../examples/wordcount-as", guestbuild.ASToolchain, guestbuild.ASRequired()},
	} {
		t.Run(filepath.Base(g.dir), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := g.works(ctx); err != nil {
				if g.required {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			path, err := guestbuild.Build(ctx, g.dir)
			if err != nil {
				t.Fatal(err)
			}
			wasm, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			withinHalf(t, g.dir, wasm)
		})
	}
}

// withinHalf fails t for every limit the module's shape is above half of.
func withinHalf(t *testing.T, name string, wasm []byte) {
	t.Helper()
	got, err := validate.Structure(context.Background(), wasm, validate.NoLimits())
	if err != nil {
		t.Fatal(err)
	}
	lim := NewRuntimeConfig().withCompileDefaults(NewRuntimeConfig()).limits
	g, l := reflect.ValueOf(got), reflect.ValueOf(lim)
	for i := 0; i < g.NumField(); i++ {
		if v, m := g.Field(i).Uint(), l.Field(i).Uint(); v > m/2 {
			t.Errorf("%s: %s has %d, more than half the limit %d", name, g.Type().Field(i).Name, v, m)
		}
	}
	t.Logf("%s: %+v", name, got)
}

// TestCompileTimeoutStopsTheCompile: a module within the limits that takes
// longer than the compile timeout is refused with an error naming the
// limit, and the compile stops (its gate place comes back, and Close does
// not wait for the whole module).
func TestCompileTimeoutStopsTheCompile(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, NewRuntimeConfig().WithCompileTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	// 200 functions of 900 nested loops: minutes of compiling in all.
	wasm := wasmgen.Module{Body: wasmgen.Nest(wasmgen.Loop, 900, nil), Functions: 200}.Bytes()
	_, err = rt.CompileFor(ctx, "t", wasm)
	if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "compile timeout") || !strings.Contains(err.Error(), "1ms") {
		t.Fatalf("err = %v, want the compile timeout", err)
	}
	testutil.CheckFor(t, 2*time.Minute, 10*time.Millisecond, func() error {
		if _, all := rt.gate.Held(""); all != 0 {
			return fmt.Errorf("%d compiles still hold their place", all)
		}
		return nil
	})
}

// TestCanceledCompileReturnsAtOnce: the caller's ctx ends a compile (as
// Ctrl-C or SIGTERM of sluice plan does); the compile stops behind it.
func TestCanceledCompileReturnsAtOnce(t *testing.T) {
	rt, err := NewRuntime(context.Background(), NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	wasm := wasmgen.Module{Body: wasmgen.Nest(wasmgen.Loop, 900, nil), Functions: 200}.Bytes()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := rt.CompileFor(ctx, "t", wasm)
		errc <- err
	}()
	testutil.CheckFor(t, time.Minute, time.Millisecond, func() error {
		if n, _ := rt.gate.Held("t"); n != 1 {
			return errors.New("the compile has not started")
		}
		return nil
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	testutil.CheckFor(t, 2*time.Minute, 10*time.Millisecond, func() error {
		if _, all := rt.gate.Held(""); all != 0 {
			return errors.New("the canceled compile still runs")
		}
		return nil
	})
}

// TestCompilesOfOneOwnerDoNotDelayAnother: with one owner at its bound
// (its places held) and its queue full, another owner's module compiles,
// and the first owner's next compile is refused with ErrBusy.
func TestCompilesOfOneOwnerDoNotDelayAnother(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, NewRuntimeConfig().WithCompileConcurrency(2, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	hold, err := rt.gate.Acquire(ctx, "hostile") // a compile of hostile's in progress
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // hostile's second compile waits
		defer wg.Done()
		rt.CompileFor(wctx, "hostile", abiModule(nil, "p1", i32const(0)).bytes())
	}()
	testutil.CheckFor(t, time.Minute, time.Millisecond, func() error {
		if rt.gate.Waiting("hostile") != 1 {
			return errors.New("not waiting yet")
		}
		return nil
	})
	if _, err := rt.CompileFor(ctx, "hostile", abiModule(nil, "p2", i32const(0)).bytes()); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "retry") {
		t.Errorf("hostile's third compile: %v, want ErrBusy", err)
	}
	if _, err := rt.CompileFor(ctx, "other", abiModule(nil, "p3", i32const(0)).bytes()); err != nil {
		t.Errorf("another owner's compile: %v", err)
	}
	cancel()
	wg.Wait()
	hold()
}

// TestCompiledModulesAreNotPinned: a module nobody holds, beyond the
// runtime's cached few, is freed: new modules cannot pin memory.
func TestCompiledModulesAreNotPinned(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, NewRuntimeConfig().WithCachedModules(1))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	first := abiModule(nil, "first", i32const(0)).bytes()
	m, err := rt.Compile(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	d := m.Digest()
	m = nil
	if _, err := rt.Compile(ctx, abiModule(nil, "second", i32const(0)).bytes()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		runtime.GC()
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if rt.modules[d].Value() != nil {
			return errors.New("the first module is still held")
		}
		return nil
	})
	// And compiling it again works.
	if _, err := rt.Compile(ctx, first); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStructuralCheck is the one pass over a real Go guest (the test
// guest, 3.9 MB) that every compile now starts with; compare with the
// cold compile of BenchmarkCompile.
func BenchmarkStructuralCheck(b *testing.B) {
	testGuest(b)
	b.SetBytes(int64(len(shared.wasm)))
	for b.Loop() {
		if _, err := validate.Structure(context.Background(), shared.wasm, validate.DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileAtTheLimits compiles the costliest shapes within the
// structural limits (they fail the ABI check after compiling) and reports
// the peak heap of one compile: what a compile can cost after its timeout.
func BenchmarkCompileAtTheLimits(b *testing.B) {
	lim := validate.DefaultLimits()
	resumable := func(n int) []byte {
		var body []byte
		for len(body)+len(wasmgen.Resumable(int(lim.Nesting)-1)) < int(lim.BodyBytes)-16 && n > 0 {
			body = append(body, wasmgen.Resumable(int(lim.Nesting)-1)...)
			n--
		}
		return body
	}
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"1000 nested loops", wasmgen.Nest(wasmgen.Loop, int(lim.LoopNesting), nil)},
		{"16000 nested blocks", wasmgen.Nest(wasmgen.Block, 16000, nil)},
		{"Go-shaped body at nesting 20000, 143 KB", resumable(1)},
		{"Go-shaped body at nesting 20000, 430 KB", resumable(3)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			wasm := wasmgen.Module{Body: bc.body}.Bytes()
			ctx := context.Background()
			var peak uint64
			for b.Loop() {
				rt, err := NewRuntime(ctx, NewRuntimeConfig())
				if err != nil {
					b.Fatal(err)
				}
				stop := testutil.HeapPeak()
				if _, err := rt.Compile(ctx, wasm); !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "sluice_abi_v1") {
					b.Fatalf("want the ABI error after compiling, got %v", err)
				}
				peak = max(peak, stop())
				rt.Close(ctx)
			}
			b.ReportMetric(float64(peak>>20), "MiB-peak")
		})
	}
}
