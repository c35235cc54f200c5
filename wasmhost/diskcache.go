package wasmhost

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// diskCache bounds wazero's compile cache directory. wazero names each
// file by a hash of the module, its own version and the CPU's features,
// and offers no way to evict a module, so the runtime keeps the directory
// within its budget itself: files last used longest ago go first, where
// a file's use is its modification time, set to now whenever a compile of
// its module reaches wazero (a compile found in memory reads no file).
//
// Which file is whose is learned by the files that appear during a
// compile; compiles running at once may swap two attributions, which only
// makes the order less exact.
type diskCache struct {
	dir    string
	budget int64

	mu        sync.Mutex
	owner     map[string]string   // file -> the digest whose compile wrote it
	files     map[string][]string // digest -> its files
	entries   int
	bytes     int64
	evictions uint64
}

func newDiskCache(dir string, budget int64) *diskCache {
	return &diskCache{dir: dir, budget: budget, owner: make(map[string]string), files: make(map[string][]string)}
}

type cacheFile struct {
	path string
	size int64
	mod  time.Time
}

// sweep marks the files of digest ("" for none) used, then deletes the
// least recently used files while the directory is above the budget.
// Errors are ignored: a file that cannot be read or removed is left, and
// the next sweep tries again.
func (d *diskCache) sweep(digest string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var files []cacheFile
	var total int64
	// Only wazero's own directories (one per wazero version, CPU and OS):
	// the directory may be shared, as the TaskManager's cache dir is with
	// its module files.
	subs, _ := filepath.Glob(filepath.Join(d.dir, "wazero-*"))
	for _, sub := range subs {
		_ = filepath.WalkDir(sub, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || strings.HasSuffix(path, ".tmp") {
				return nil // a .tmp is a write under way
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			if _, known := d.owner[path]; !known {
				// Files there before (the first sweep's) stay nobody's: a
				// restarted runtime cannot tell whose they are.
				d.owner[path] = digest
				if digest != "" {
					d.files[digest] = append(d.files[digest], path)
				}
			}
			files = append(files, cacheFile{path, info.Size(), info.ModTime()})
			total += info.Size()
			return nil
		})
	}
	if digest != "" {
		now := time.Now()
		for _, p := range d.files[digest] {
			if os.Chtimes(p, now, now) == nil {
				if i := slices.IndexFunc(files, func(f cacheFile) bool { return f.path == p }); i >= 0 {
					files[i].mod = now
				}
			}
		}
	}
	if d.budget > 0 && total > d.budget {
		slices.SortFunc(files, func(a, b cacheFile) int { return a.mod.Compare(b.mod) })
		for len(files) > 0 && total > d.budget {
			f := files[0]
			files = files[1:]
			if err := os.Remove(f.path); err != nil && !os.IsNotExist(err) {
				continue
			}
			total -= f.size
			d.evictions++
			d.forgetLocked(f.path)
		}
	}
	d.entries, d.bytes = len(files), total
}

func (d *diskCache) forgetLocked(path string) {
	dg, ok := d.owner[path]
	if !ok {
		return
	}
	delete(d.owner, path)
	d.files[dg] = slices.DeleteFunc(d.files[dg], func(p string) bool { return p == path })
	if len(d.files[dg]) == 0 {
		delete(d.files, dg)
	}
}

// CacheDirStats are the figures of a runtime's on-disk compile cache.
type CacheDirStats struct {
	// Entries and Bytes are the files and their total size at the last
	// compile that reached wazero.
	Entries int
	Bytes   int64
	// Evictions counts the files deleted to keep within the budget.
	Evictions uint64
}

// CacheDirStats reports the on-disk compile cache (zero without one).
func (rt *Runtime) CacheDirStats() CacheDirStats {
	if rt.disk == nil {
		return CacheDirStats{}
	}
	rt.disk.mu.Lock()
	defer rt.disk.mu.Unlock()
	return CacheDirStats{Entries: rt.disk.entries, Bytes: rt.disk.bytes, Evictions: rt.disk.evictions}
}
