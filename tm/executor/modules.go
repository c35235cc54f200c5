package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/wasmhost"
)

// ModuleCache fetches job modules from the blob store (blob.GetModule
// verifies the digest), compiles them once with the wasmhost runtime and
// keeps the compiled module by digest, so every task of a job, and every
// later job with the same module, starts without a download or a compile.
// Downloaded bytes are also kept on disk under dir, verified again on read.
//
// Concurrent requests for one digest share one fetch and compile. Both
// layers are bounded: compiled modules by a memory budget (their
// estimated size, wasmhost.Module.SizeBytes) and the files under dir by a
// disk budget, least recently used going first. A module a running task
// holds (Module's release not yet called) is never evicted, even when it
// alone is above the budget; it goes when its last task ends, if the
// budget needs the room. So a session cluster that runs ever new modules
// keeps only what fits.
type ModuleCache struct {
	rt    *wasmhost.Runtime
	store blob.Store
	dir   string

	mu      sync.Mutex
	mem     *lru[*wasmhost.Module] // compiled modules by digest
	disk    *lru[struct{}]         // files under dir by digest
	loading map[string]*moduleLoad // fetch-and-compiles under way
	loads   int                    // fetch-and-compiles started, for tests
	warm    warmer
}

// Default budgets of a ModuleCache (tm.Config, `sluice tm` flags).
const (
	DefaultModuleMemoryBudget = 512 << 20
	DefaultModuleDiskBudget   = 512 << 20
)

type moduleLoad struct {
	ready chan struct{}
	mod   *wasmhost.Module
	err   error
}

// NewModuleCache returns an empty cache with budgets memory and disk bytes
// (0 or less means the defaults); dir "" disables the disk copy. Files
// already under dir count against the disk budget, the oldest going first.
func NewModuleCache(rt *wasmhost.Runtime, store blob.Store, dir string, memory, disk int64) *ModuleCache {
	if memory <= 0 {
		memory = DefaultModuleMemoryBudget
	}
	if disk <= 0 {
		disk = DefaultModuleDiskBudget
	}
	c := &ModuleCache{rt: rt, store: store, dir: dir, mem: newLRU[*wasmhost.Module](memory),
		disk: newLRU[struct{}](disk), loading: make(map[string]*moduleLoad), warm: warmer{limit: DefaultWarmLimit}}
	c.scanDisk()
	return c
}

// scanDisk counts the files a previous run left, oldest first.
func (c *ModuleCache) scanDisk() {
	if c.dir == "" {
		return
	}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return // none yet
	}
	type file struct {
		digest string
		size   int64
		mod    time.Time
	}
	var files []file
	for _, e := range ents {
		name := e.Name()
		digest, ok := strings.CutSuffix(name, ".wasm")
		if !ok || c.diskPath(digest) == "" {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			files = append(files, file{digest, info.Size(), info.ModTime()})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		c.removeFiles(c.disk.add(f.digest, struct{}{}, f.size, 0))
	}
}

// Module returns the compiled module with this digest, fetching it from the
// tenant's modules in the blob store if needed, and holds it in the cache
// until release is called (once; a task calls it when it ends). Failures
// are not cached.
func (c *ModuleCache) Module(ctx context.Context, tenant, digest string) (*wasmhost.Module, func(), error) {
	mod, err := c.get(ctx, tenant, digest, true)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	return mod, func() {
		once.Do(func() {
			c.mu.Lock()
			ev := c.mem.unpin(digest)
			c.mu.Unlock()
			c.forget(ev)
		})
	}, nil
}

// get returns the module, pinned when pin is set.
func (c *ModuleCache) get(ctx context.Context, tenant, digest string, pin bool) (*wasmhost.Module, error) {
	for {
		c.mu.Lock()
		if mod, ok := c.mem.get(digest); ok {
			if pin {
				c.mem.pin(digest)
			}
			c.mu.Unlock()
			return mod, nil
		}
		l, ok := c.loading[digest]
		if !ok {
			l = &moduleLoad{ready: make(chan struct{})}
			c.loading[digest] = l
			c.loads++
			c.mu.Unlock()
			mod, err := c.load(ctx, tenant, digest)
			var ev []lruEvicted[*wasmhost.Module]
			c.mu.Lock()
			l.mod, l.err = mod, err
			delete(c.loading, digest)
			if err == nil {
				pins := 0
				if pin {
					pins = 1
				}
				ev = c.mem.add(digest, mod, mod.SizeBytes(), pins)
			}
			c.mu.Unlock()
			close(l.ready)
			c.forget(ev)
			return mod, err
		}
		c.mu.Unlock()
		select {
		case <-l.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Loaded (look again, to pin it) or failed (try ourselves).
	}
}

// forget tells the runtime to let go of evicted modules; a task still
// running one keeps it alive.
func (c *ModuleCache) forget(ev []lruEvicted[*wasmhost.Module]) {
	for _, e := range ev {
		c.rt.Forget(e.key)
	}
}

// removeFiles deletes the files of evicted digests. Best effort: a file
// left behind is found and counted again at the next start.
func (c *ModuleCache) removeFiles(ev []lruEvicted[struct{}]) {
	for _, e := range ev {
		if p := c.diskPath(e.key); p != "" {
			_ = os.Remove(p)
		}
	}
}

// Len is the number of compiled modules held.
func (c *ModuleCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mem.items)
}

// CacheStats are a ModuleCache's figures, per layer.
type CacheStats struct {
	// MemoryEntries and MemoryBytes are the compiled modules held and their
	// estimated size; MemoryEvictions counts those evicted.
	MemoryEntries   int
	MemoryBytes     int64
	MemoryEvictions uint64
	// DiskEntries and DiskBytes are the module files under the cache dir;
	// DiskEvictions counts those deleted.
	DiskEntries   int
	DiskBytes     int64
	DiskEvictions uint64
	// Compiled is the runtime's on-disk compile cache.
	Compiled wasmhost.CacheDirStats
	// Loads counts fetch-and-compiles started (a miss in memory).
	Loads int
}

// Stats reports the cache's figures.
func (c *ModuleCache) Stats() CacheStats {
	c.mu.Lock()
	s := CacheStats{
		MemoryEntries: len(c.mem.items), MemoryBytes: c.mem.bytes, MemoryEvictions: c.mem.evictions,
		DiskEntries: len(c.disk.items), DiskBytes: c.disk.bytes, DiskEvictions: c.disk.evictions,
		Loads: c.loads,
	}
	c.mu.Unlock()
	s.Compiled = c.rt.CacheDirStats()
	return s
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
			c.mu.Lock()
			if _, ok := c.disk.get(digest); !ok {
				c.removeFiles(c.disk.add(digest, struct{}{}, int64(len(b)), 0))
			}
			c.mu.Unlock()
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
		if writeFileAtomic(path, b) == nil {
			c.mu.Lock()
			c.removeFiles(c.disk.add(digest, struct{}{}, int64(len(b)), 0))
			c.mu.Unlock()
		}
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
