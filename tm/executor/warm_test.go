package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/guestbuild"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/wasmhost"
)

// warmModules builds two real modules (the Go and the C word count),
// uploads them under tenant "t" and returns a cache over them with refs.
func warmModules(t *testing.T) (*ModuleCache, []control.ModuleRef) {
	t.Helper()
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var refs []control.ModuleRef
	for _, dir := range []string{"../../examples/wordcount", "../../examples/wordcount-c"} {
		path, err := guestbuild.Build(ctx, dir)
		if err != nil {
			if dir == "../../examples/wordcount-c" && !guestbuild.CRequired() {
				t.Skipf("C toolchain: %v", err)
			}
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		digest, _, err := blob.PutModule(ctx, store, "t", f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if digest != digestOf(b) {
			t.Fatalf("stored digest %s, bytes %s", digest, digestOf(b))
		}
		refs = append(refs, control.ModuleRef{Tenant: "t", Digest: digest})
	}
	// The tests' shared compile cache (as localtest's): what is counted
	// here is the ModuleCache's loads, not wazero's machine-code compiles.
	rc := wasmhost.NewRuntimeConfig()
	if base, err := os.UserCacheDir(); err == nil {
		rc = rc.WithCacheDir(filepath.Join(base, "sluice", "test-cache", "compiled"))
	}
	rt, err := wasmhost.NewRuntime(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	c := NewModuleCache(rt, store, "", 0, 0)
	t.Cleanup(func() { c.Wait(); rt.Close(context.Background()) })
	return c, refs
}

func (c *ModuleCache) loadCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

func held(c *ModuleCache, n int) func() error {
	return func() error {
		if got := c.Len(); got != n {
			return fmt.Errorf("cache holds %d modules, want %d", got, n)
		}
		return nil
	}
}

// TestWarmCompilesWithoutADeployment checks that warmed modules are
// compiled with no task deployed, that asking again queues nothing, and
// that a deployment's Module afterwards does not compile again.
func TestWarmCompilesWithoutADeployment(t *testing.T) {
	c, refs := warmModules(t)
	ctx := t.Context()
	if n := c.Warm(ctx, refs); n != 2 {
		t.Fatalf("queued %d of 2 modules", n)
	}
	if n := c.Warm(ctx, refs); n != 0 {
		t.Fatalf("queued %d modules already queued or held", n)
	}
	testutil.CheckFor(t, 2*time.Minute, 10*time.Millisecond, held(c, 2))
	c.Wait()
	if got := c.loadCount(); got != 2 {
		t.Fatalf("%d compiles for 2 modules", got)
	}
	for _, r := range refs {
		m, err := use(ctx, c, r)
		if err != nil || m.Digest() != r.Digest {
			t.Fatalf("module %s after warming: %v", r.Digest, err)
		}
	}
	if got := c.loadCount(); got != 2 {
		t.Fatalf("deployments after warming compiled again: %d compiles", got)
	}
}

// TestWarmIsBounded checks that warming stops at the cache's warm limit,
// and that a deployment still loads past it.
func TestWarmIsBounded(t *testing.T) {
	c, refs := warmModules(t)
	c.warm.limit = 1
	ctx := t.Context()
	if n := c.Warm(ctx, refs); n != 1 {
		t.Fatalf("queued %d modules with a limit of 1", n)
	}
	testutil.CheckFor(t, 2*time.Minute, 10*time.Millisecond, held(c, 1))
	c.Wait()
	if n := c.Warm(ctx, refs[1:]); n != 0 || c.loadCount() != 1 {
		t.Fatalf("queued %d more at the limit; %d compiles", n, c.loadCount())
	}
	if _, err := use(ctx, c, refs[1]); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 {
		t.Fatalf("a deployment past the warm limit was not loaded: %d held", c.Len())
	}
}

// TestWarmChecksTheTenant checks that a module is fetched only under the
// tenant named with it: a digest asked for under another tenant is not
// compiled.
func TestWarmChecksTheTenant(t *testing.T) {
	c, refs := warmModules(t)
	if n := c.Warm(t.Context(), []control.ModuleRef{{Tenant: "other", Digest: refs[0].Digest}}); n != 1 {
		t.Fatalf("queued %d", n)
	}
	c.Wait()
	if c.Len() != 0 {
		t.Fatalf("another tenant's module was compiled: %d held", c.Len())
	}
}

// use gets r's module from c and gives it back, as a task that ended.
func use(ctx context.Context, c *ModuleCache, r control.ModuleRef) (*wasmhost.Module, error) {
	m, release, err := c.Module(ctx, r.Tenant, r.Digest)
	if err != nil {
		return nil, err
	}
	release()
	return m, nil
}

// TestModuleCacheDropsTheLeastRecentlyUsed checks that the cache holds
// compiled modules within its memory budget, dropping the one used longest
// ago, and compiles a dropped one again when it is asked for.
func TestModuleCacheDropsTheLeastRecentlyUsed(t *testing.T) {
	c, refs := warmModules(t)
	ctx := t.Context()
	var size int64
	for _, r := range refs {
		m, err := use(ctx, c, r)
		if err != nil {
			t.Fatal(err)
		}
		size += m.SizeBytes()
	}
	c.mu.Lock()
	c.mem.budget = size - 1 // room for either module, not both
	c.mu.Unlock()
	// The next release finds the cache over budget: refs[0], used
	// longer ago, goes.
	if _, err := use(ctx, c, refs[1]); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.MemoryBytes > size-1 || st.MemoryEntries != 1 || st.MemoryEvictions != 1 || st.Loads != 2 {
		t.Fatalf("after shrinking the budget to %d: %+v", size-1, st)
	}
	if _, err := use(ctx, c, refs[1]); err != nil || c.loadCount() != 2 {
		t.Fatalf("the most recent module was compiled again (%d compiles): %v", c.loadCount(), err)
	}
	if _, err := use(ctx, c, refs[0]); err != nil || c.loadCount() != 3 {
		t.Fatalf("the dropped module was not compiled again (%d compiles): %v", c.loadCount(), err)
	}
}

// TestModuleCacheKeepsAHeldModule checks that a module a task holds stays
// however small the budget, and goes when the task gives it back.
func TestModuleCacheKeepsAHeldModule(t *testing.T) {
	c, refs := warmModules(t)
	ctx := t.Context()
	c.mem.budget = 1 // below any module
	m, release, err := c.Module(ctx, refs[0].Tenant, refs[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := use(ctx, c, refs[1]); err != nil {
		t.Fatal(err)
	}
	if _, again, err := c.Module(ctx, refs[0].Tenant, refs[0].Digest); err != nil || c.loadCount() != 2 {
		t.Fatalf("a held module was evicted (%d compiles): %v", c.loadCount(), err)
	} else {
		again()
	}
	if st := c.Stats(); st.MemoryEntries != 1 || st.MemoryBytes != m.SizeBytes() {
		t.Fatalf("with one module held and a budget of 1 byte: %+v", st)
	}
	release()
	release() // a second call changes nothing
	if st := c.Stats(); st.MemoryEntries != 0 || st.MemoryBytes != 0 || st.MemoryEvictions != 2 {
		t.Fatalf("after the task gave its module back: %+v", st)
	}
}
