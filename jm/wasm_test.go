package jm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	dspclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/wasmhost"
)

// TestRealModulePlansInTheSandbox uploads examples/wordcount, built from
// source, to a JobManager with the real wasm runtime: its plan runs in the
// sandbox, the graph is validated and chained, and the job runs on a fake
// TaskManager.
func TestRealModulePlansInTheSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest with the go command")
	}
	ctx := context.Background()
	path, err := guestbuild.BuildTo(ctx, "../examples/wordcount", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Compiling a module under -race takes tens of seconds; the on-disk
	// cache makes every run after the first fast.
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = t.TempDir()
	}
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig().WithCacheDir(filepath.Join(cache, "sluice", "test-compiled")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	store := newStore(t)
	s := startJM(t, func(c *jm.Config) { c.Blob = store; c.Runtime = rt })
	body := "the quick brown fox\njumps over the lazy dog\n"
	if err := store.Put(ctx, "tenants/default/books/a.txt", strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	te := startTE(t, s.Addr(), "tm-1", 2, false)
	dc := dspclient.MustNewClient("dispatcher", rpcserver.ClientOptions(s.Addr(), rpcserver.ClientConfig{RPCTimeout: 5 * time.Minute})...)

	_, err = dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: []byte("\x00asm\x01\x00\x00\x00garbage")})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInvalidModule) {
		t.Fatalf("garbage module: %v", err)
	}
	_, err = dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: []byte("print('hello')")})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInvalidModule) || !strings.Contains(err.Error(), "not a WebAssembly binary") {
		t.Fatalf("non-wasm upload: %v", err)
	}
	up, err := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: wasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	_, err = dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), "no input") {
		t.Fatalf("plan without input: %v", err)
	}
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"--input", "books/"}, Parallelism: 2})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	res, err := dc.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000})
	if err != nil || res.Details.Summary.State != "FINISHED" || res.Details.Summary.Name != "wordcount" {
		t.Fatalf("%+v %v", res.Details, err)
	}
	var names []string
	for _, v := range res.Details.Vertices {
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "lines,tokenize,word,count,format,out" {
		t.Fatalf("vertices %v", names)
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	if len(te.deployed) != 4 || len(te.splits) != 1 {
		t.Fatalf("deployed %d tasks, read %v", len(te.deployed), te.splits)
	}
}
