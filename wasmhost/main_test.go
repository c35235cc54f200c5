package wasmhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// The test guest is built once per test binary (and cached across runs by
// guestbuild) and compiled once into a runtime the tests share.
var shared struct {
	once sync.Once
	wasm []byte
	rt   *Runtime
	mod  *Module
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.rt != nil {
		shared.rt.Close(context.Background())
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func cacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice", "wazero-test")
	}
	return filepath.Join(os.TempDir(), "sluice-wazero-test")
}

// testGuest returns the shared runtime and the compiled test guest.
func testGuest(t testing.TB) (*Runtime, *Module) {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		path, err := guestbuild.Build(ctx, "testdata/testguest")
		if err != nil {
			shared.err = err
			return
		}
		if shared.wasm, err = os.ReadFile(path); err != nil {
			shared.err = err
			return
		}
		if shared.rt, err = NewRuntime(ctx, NewRuntimeConfig().WithCacheDir(cacheDir())); err != nil {
			shared.err = err
			return
		}
		shared.mod, shared.err = shared.rt.Compile(ctx, shared.wasm)
	})
	if shared.err != nil {
		t.Fatalf("test guest: %v", shared.err)
	}
	return shared.rt, shared.mod
}

// task instantiates and opens the guest's task for the vertex ids of the
// job the args declare; output collects the emitted records.
type testTask struct {
	in    *Instance
	out   []abi.Record
	graph *jobgraph.Graph
}

func openTask(t testing.TB, args []string, chain []int, cfg TaskConfig) *testTask {
	t.Helper()
	_, mod := testGuest(t)
	return openTaskOn(t, mod, args, chain, cfg)
}

// openTaskOn is openTask on a module of the caller's.
func openTaskOn(t testing.TB, mod *Module, args []string, chain []int, cfg TaskConfig) *testTask {
	t.Helper()
	ctx := context.Background()
	g, err := mod.Plan(ctx, args, Limits{})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	tt := &testTask{graph: g}
	for _, id := range chain {
		tt := false
		for _, v := range g.Vertices {
			if v.ID == id {
				cfg.Chain = append(cfg.Chain, v)
				tt = true
			}
		}
		if !tt {
			t.Fatalf("no vertex %d in %+v", id, g.Vertices)
		}
	}
	cfg.Args = args
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 1
	}
	if cfg.Emit == nil {
		cfg.Emit = func(recs []abi.Record) error {
			for _, r := range recs {
				r.Key = append([]byte(nil), r.Key...)
				r.Value = append([]byte(nil), r.Value...)
				tt.out = append(tt.out, r)
			}
			return nil
		}
	}
	in, err := mod.Instantiate(ctx, cfg)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	t.Cleanup(func() { in.Close(ctx) })
	if err := in.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	tt.in = in
	return tt
}

func values(recs []abi.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func textRecords(vals ...string) []abi.Record {
	recs := make([]abi.Record, len(vals))
	for i, v := range vals {
		recs[i].Value = []byte(v)
	}
	return recs
}
