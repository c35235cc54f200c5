package local_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// markerModule is the marker guest with its digits set to n: a module of
// its own digest whose one output record is its marker.
func markerModule(t *testing.T, base []byte, n int) ([]byte, string) {
	t.Helper()
	const prefix = "SLUICE-MARKER-"
	i := bytes.Index(base, []byte(prefix+"000000"))
	if i < 0 || bytes.Count(base, []byte(prefix)) != 1 {
		t.Fatal("the marker guest has no single marker in its data segment")
	}
	mark := fmt.Sprintf("%s%06d", prefix, n)
	wasm := bytes.Clone(base)
	copy(wasm[i:], mark)
	return wasm, mark
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// TestModuleCachesStayWithinBudget runs 200 distinct modules one after
// another on one session cluster with small cache budgets: after every job
// the TaskManager's compiled modules, its module files and the compile
// cache stay within the budgets (by the cache's own counters and by the
// directories' sizes), every layer evicts, and the first module, long
// evicted, runs again: fetched and compiled again, with its own result.
func TestModuleCachesStayWithinBudget(t *testing.T) {
	base := localtest.CGuest(t, "local/testdata/marker")
	const (
		runs   = 200
		memory = 256 << 10
		disk   = 512 << 10
	)
	cache := t.TempDir()
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 1, CacheDir: cache,
		ModuleCacheMemory: memory, ModuleCacheDisk: disk})
	cl := c.Client()
	tm := c.TaskManagers()[0]
	run := func(n int) {
		t.Helper()
		wasm, mark := markerModule(t, base, n)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		id, r, err := localtest.RunJob(ctx, cl, c.Blob(), wasm, nil, 1)
		if err != nil {
			t.Fatalf("module %d: %v", n, err)
		}
		if r.State != client.StateFinished || len(r.Records) != 1 || string(r.Records[0]) != mark {
			t.Fatalf("module %d: job %s ended %s with %q (failure %q), want the one record %q", n, id, r.State, r.Records, r.Failure, mark)
		}
	}
	var maxMem, maxDisk int64
	took := make([]time.Duration, 0, runs)
	for n := range runs {
		start := time.Now()
		run(n)
		took = append(took, time.Since(start))
		st := tm.ModuleCacheStats()
		used := dirBytes(t, cache)
		maxMem, maxDisk = max(maxMem, st.MemoryBytes), max(maxDisk, used)
		if st.MemoryBytes > memory || st.DiskBytes+st.Compiled.Bytes > disk || used > disk {
			t.Fatalf("after module %d: %+v; %d bytes under the cache dir; budgets %d memory, %d disk", n, st, used, memory, disk)
		}
	}
	st := tm.ModuleCacheStats()
	slices.Sort(took)
	t.Logf("after %d modules: %+v; at most %d bytes in memory, %d on disk; median job %v (upload, compile, run)",
		runs, st, maxMem, maxDisk, took[len(took)/2])
	if st.MemoryEvictions == 0 || st.DiskEvictions == 0 || st.Compiled.Evictions == 0 {
		t.Fatalf("a layer never evicted, so the test proves nothing: %+v", st)
	}
	first, _ := markerModule(t, base, 0)
	sum := sha256.Sum256(first)
	digest := "sha256-" + hex.EncodeToString(sum[:])
	if _, err := os.Stat(filepath.Join(cache, "modules", digest+".wasm")); !os.IsNotExist(err) {
		t.Fatalf("the first module's file is still cached (%v): make the budgets smaller", err)
	}
	start := time.Now()
	run(0)
	t.Logf("the evicted first module ran again in %v", time.Since(start))
	again := tm.ModuleCacheStats()
	if again.Loads != st.Loads+1 {
		t.Fatalf("the evicted first module was not fetched and compiled again: %d loads, then %d", st.Loads, again.Loads)
	}
	if _, err := os.Stat(filepath.Join(cache, "modules", digest+".wasm")); err != nil {
		t.Fatalf("the first module, fetched again, is not on disk: %v", err)
	}
}
