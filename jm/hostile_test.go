package jm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	dspclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/wasmgen"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/wasmhost"
)

// realJM starts a JobManager with the real wasm runtime (its compiled code
// cached on disk across runs: compiling under -race is slow) and tenants
// a (with quotasA) and b.
func realJM(t *testing.T, quotasA auth.Quotas, rc wasmhost.RuntimeConfig, opts ...func(*jm.Config)) (*jm.Server, blob.Store) {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = t.TempDir()
	}
	rt, err := wasmhost.NewRuntime(context.Background(), rc.WithCacheDir(filepath.Join(cache, "sluice", "test-compiled")))
	if err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	s := startJM(t, func(c *jm.Config) {
		c.Blob = store
		c.Runtime = rt
		c.Tenants = testTenants(t, quotasA)
		for _, o := range opts {
			o(c)
		}
	})
	// Closed before the server: that cancels compiles still running, whose
	// calls the server's graceful stop would otherwise wait for.
	t.Cleanup(func() { rt.Close(context.Background()) })
	return s, store
}

func buildGuest(t *testing.T, dir string) []byte {
	t.Helper()
	path, err := guestbuild.BuildTo(context.Background(), dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// TestHostileModulesAreRefusedWithinBudget: tenant a uploads modules of
// deep nesting and huge structure, and one within the limits that takes
// minutes to compile; each structural one is refused with InvalidModule
// naming the limit, the JobManager's heap stays under 768 MiB above where
// it started, and tenant b's word count, uploaded and submitted meanwhile,
// finishes while a's slow compile is still running. (Unbounded, the nested
// loops alone took the JobManager past 6 GB.)
func TestHostileModulesAreRefusedWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest with the go command")
	}
	ctx := context.Background()
	wordcount := buildGuest(t, "../examples/wordcount")
	s, store := realJM(t, auth.Quotas{}, wasmhost.NewRuntimeConfig().WithCompileTimeout(time.Hour), func(c *jm.Config) {
		// b's job waits for its slots beside a's compiles, under -race on a
		// loaded machine.
		c.SlotRequestTimeout = 5 * time.Minute
	})
	startTE(t, s.Addr(), "tm-1", 2, false)
	// b's calls compile and plan the word count beside a's compiles, under
	// -race on a loaded machine: they may take more than the usual 30 s,
	// and a's slow upload must not time out on the client before b's job
	// is done. That b is not queued behind a's slow compile is what
	// slowDone checks.
	a, b := tokenClientTimeout(s.Addr(), tokenA, 10*time.Minute), tokenClientTimeout(s.Addr(), tokenB, 5*time.Minute)
	body := "the quick brown fox\n"
	if err := store.Put(ctx, "tenants/b/books/a.txt", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}

	stop := testutil.HeapPeak()
	// The slow one: 3000 functions of 900 nested loops, each within every
	// limit; compiling it takes minutes.
	slow := wasmgen.Module{Body: wasmgen.Nest(wasmgen.Loop, 900, nil), Functions: 3000}.Bytes()
	var slowDone atomic.Bool
	slowCtx, cancelSlow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer slowDone.Store(true)
		a.UploadModule(slowCtx, &dispatcher.UploadModuleRequest{Module: slow})
	}()
	hostile := map[string]struct {
		wasm []byte
		want string
	}{
		"1e4 nested loops":  {wasmgen.Module{Body: wasmgen.Nest(wasmgen.Loop, 1e4, nil)}.Bytes(), "loop nesting depth 1001"},
		"1e5 nested loops":  {wasmgen.Module{Body: wasmgen.Nest(wasmgen.Loop, 1e5, nil)}.Bytes(), "loop nesting depth 1001"},
		"1e6 nested loops":  {wasmgen.Module{Body: wasmgen.Nest(wasmgen.Loop, 1e6, nil)}.Bytes(), "function body bytes 3000002"},
		"1e5 nested blocks": {wasmgen.Module{Body: wasmgen.Nest(wasmgen.Block, 1e5, nil)}.Bytes(), "control nesting depth 20001"},
		"1e6 nested blocks": {wasmgen.Module{Body: wasmgen.Nest(wasmgen.Block, 1e6, nil)}.Bytes(), "function body bytes 3000002"},
		"1e6 functions":     {wasmgen.Module{Functions: 1e6}.Bytes(), "defined functions 1000000"},
		"huge locals":       {wasmgen.Module{Locals: 1 << 30}.Bytes(), "locals 1073741824"},
		"huge table":        {wasmgen.Module{TableMin: 1 << 27}.Bytes(), "initial table elements 134217728"},
	}
	errs := make(map[string]error)
	var mu sync.Mutex
	for name, h := range hostile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: h.wasm})
			mu.Lock()
			errs[name] = rpcserver.FromCall(err)
			mu.Unlock()
		}()
	}

	up, err := b.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: wordcount})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	sub, err := b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"--input", "books/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	var res *dispatcher.JobResult_
	for deadline := time.Now().Add(5 * time.Minute); ; {
		res, err = b.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 60_000})
		if err != nil || jobmaster.JobState(res.Details.Summary.State).Terminal() || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || res.Details.Summary.State != "FINISHED" {
		t.Fatalf("b's job: %+v %v", res.GetDetails(), rpcserver.FromCall(err))
	}
	if slowDone.Load() {
		t.Error("a's slow upload returned before b's job finished: the test did not show b was not queued behind it")
	}
	cancelSlow()
	wg.Wait()
	grew := stop()
	for name, h := range hostile {
		if err := errs[name]; !errors.Is(err, rpcerr.ErrInvalidModule) || !strings.Contains(err.Error(), h.want) || !strings.Contains(err.Error(), "module limit") {
			t.Errorf("%s: %v, want INVALID_MODULE saying %q", name, err, h.want)
		}
	}
	if bound := uint64(768 << 20); grew > bound {
		t.Errorf("the JobManager's heap grew by %d MiB, above %d MiB", grew>>20, bound>>20)
	}
	t.Logf("heap peak %d MiB above the start", grew>>20)
}

// TestConcurrentPlansOfOneTenant: 16 plans of tenant a at once, each
// allocating memory until it fails, run with a's memory_bytes and
// call_timeout_ms quotas (32 MiB, 2s) and at most jm.DefaultMaxPlansPerTenant at a time, so the
// JobManager's heap stays under 512 MiB above where it started (without
// the bound they took 7 GB).
func TestConcurrentPlansOfOneTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest with the go command")
	}
	ctx := context.Background()
	guest := buildGuest(t, "../wasmhost/testdata/testguest")
	s, _ := realJM(t, auth.Quotas{MemoryBytes: 32 << 20, CallTimeoutMs: 2000}, wasmhost.NewRuntimeConfig())
	// 16 plans, two at a time, of up to 2s each: longer than one default
	// RPC timeout.
	a := dspclient.MustNewClient("dispatcher", rpcserver.ClientOptions(s.Addr(), rpcserver.ClientConfig{
		RPCTimeout: 5 * time.Minute, Metadata: map[string]string{rpcserver.MetaToken: tokenA}})...)
	up, err := a.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: guest})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	stop := testutil.HeapPeak()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"plan-hostile", "membomb"}})
			errs[i] = rpcserver.FromCall(err)
		}()
	}
	wg.Wait()
	grew := stop()
	for i, err := range errs {
		// The guest fills a's 32 MiB or runs out of a's 2s first.
		if !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), "memory") && !strings.Contains(err.Error(), "deadline of 2s") {
			t.Errorf("plan %d: %v, want the guest's memory or deadline failure", i, err)
		}
	}
	if bound := uint64(512 << 20); grew > bound {
		t.Errorf("the JobManager's heap grew by %d MiB, above %d MiB", grew>>20, bound>>20)
	}
	t.Logf("heap peak %d MiB above the start; first error: %v", grew>>20, errs[0])
	// The tenant's call timeout holds for plans too.
	_, err = a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"plan-hostile", "loop"}})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), "deadline of 2s") {
		t.Errorf("looping plan: %v, want the guest's deadline of 2s", err)
	}
}
