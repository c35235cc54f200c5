package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/wasmhost"
)

// ModuleCache fetches job modules from the blob store (blob.GetModule
// verifies the digest), compiles them once with the wasmhost runtime and
// keeps the compiled module by digest, so every task of a job, and every
// later job with the same module, starts without a download or a compile.
// Downloaded bytes are also kept on disk under dir, verified again on read.
//
// Concurrent requests for one digest share one fetch and compile. It holds
// at most DefaultCachedModules compiled modules, dropping the least
// recently used beyond that (a task running one keeps it alive), so
// modules that differ only by a nonce cannot pin the TaskManager's memory.
type ModuleCache struct {
	rt    *wasmhost.Runtime
	store blob.Store
	dir   string

	mu      sync.Mutex
	entries map[string]*moduleEntry // digest -> entry
	loads   int                     // fetch-and-compiles started, for tests
	clock   uint64                  // ticks on every use, for LRU order
	max     int
	warm    warmer
}

// DefaultCachedModules is how many compiled modules a ModuleCache keeps.
const DefaultCachedModules = 32

type moduleEntry struct {
	ready chan struct{}
	mod   *wasmhost.Module
	err   error
	used  uint64 // the cache's clock at the last use
}

// NewModuleCache returns an empty cache; dir "" disables the disk copy.
func NewModuleCache(rt *wasmhost.Runtime, store blob.Store, dir string) *ModuleCache {
	return &ModuleCache{rt: rt, store: store, dir: dir, entries: make(map[string]*moduleEntry),
		max: DefaultCachedModules, warm: warmer{limit: DefaultWarmLimit}}
}

// Module returns the compiled module with this digest, fetching it from the
// tenant's modules in the blob store if needed. Failures are not cached.
func (c *ModuleCache) Module(ctx context.Context, tenant, digest string) (*wasmhost.Module, error) {
	c.mu.Lock()
	c.clock++
	e, ok := c.entries[digest]
	if !ok {
		e = &moduleEntry{ready: make(chan struct{}), used: c.clock}
		c.entries[digest] = e
		c.loads++
		c.mu.Unlock()
		mod, err := c.load(ctx, tenant, digest)
		c.mu.Lock()
		e.mod, e.err = mod, err // under mu: evictLocked reads other entries' mod
		if e.err != nil {
			delete(c.entries, digest)
		} else {
			c.evictLocked()
		}
		c.mu.Unlock()
		close(e.ready)
		return e.mod, e.err
	}
	e.used = c.clock
	c.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return c.Module(ctx, tenant, digest) // the loader failed; try ourselves
	}
	return e.mod, nil
}

// evictLocked drops the least recently used compiled modules beyond max;
// loads in progress stay.
func (c *ModuleCache) evictLocked() {
	for len(c.entries) > c.max {
		var oldest string
		for d, e := range c.entries {
			if e.mod == nil {
				continue // loading, or failed and about to go
			}
			if oldest == "" || e.used < c.entries[oldest].used {
				oldest = d
			}
		}
		if oldest == "" {
			return
		}
		delete(c.entries, oldest)
	}
}

// Len is the number of compiled modules held.
func (c *ModuleCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *ModuleCache) load(ctx context.Context, tenant, digest string) (*wasmhost.Module, error) {
	wasm, err := c.bytes(ctx, tenant, digest)
	if err != nil {
		return nil, err
	}
	// The tenant owns the compile: its compiles share the runtime's places
	// with other tenants' only up to the per-tenant bound.
	mod, err := c.rt.CompileFor(ctx, tenant, wasm)
	if err != nil {
		return nil, fmt.Errorf("compile module %s: %w", digest, err)
	}
	if mod.Digest() != digest {
		return nil, fmt.Errorf("module %s: compiled digest is %s", digest, mod.Digest())
	}
	return mod, nil
}

func (c *ModuleCache) bytes(ctx context.Context, tenant, digest string) ([]byte, error) {
	path := c.diskPath(digest)
	if path != "" {
		if b, err := os.ReadFile(path); err == nil && digestOf(b) == digest {
			return b, nil
		}
	}
	rc, err := blob.GetModule(ctx, c.store, tenant, digest)
	if err != nil {
		return nil, fmt.Errorf("fetch module %s: %w", digest, err)
	}
	// The reader verifies the digest when it reaches the end.
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("fetch module %s: %w", digest, err)
	}
	if path != "" {
		// Best effort: a failed write only costs a download next time.
		_ = writeFileAtomic(path, b)
	}
	return b, nil
}

func (c *ModuleCache) diskPath(digest string) string {
	if c.dir == "" || !strings.HasPrefix(digest, "sha256-") || strings.ContainsAny(digest, `/\.`) {
		return ""
	}
	return filepath.Join(c.dir, digest+".wasm")
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256-" + hex.EncodeToString(sum[:])
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
