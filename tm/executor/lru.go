package executor

// lru is a byte-budgeted least-recently-used set with pinning: entries
// held by a running task (pins > 0) are never evicted, whatever the
// budget; the others go oldest use first while the total is above it.
// An unpinned entry bigger than the whole budget is evicted at once. Not
// safe for concurrent use (the ModuleCache guards it with its mu).
type lru[V any] struct {
	budget    int64
	bytes     int64
	clock     uint64
	items     map[string]*lruItem[V]
	evictions uint64
}

type lruItem[V any] struct {
	val  V
	size int64
	pins int
	used uint64
}

func newLRU[V any](budget int64) *lru[V] {
	return &lru[V]{budget: budget, items: make(map[string]*lruItem[V])}
}

// get returns the value of key and makes it the most recently used.
func (l *lru[V]) get(key string) (V, bool) {
	it, ok := l.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	l.clock++
	it.used = l.clock
	return it.val, true
}

// add puts key in (replacing an entry of the same key, keeping its pins),
// as the most recently used, with pins more pins, and returns what that
// evicted.
func (l *lru[V]) add(key string, val V, size int64, pins int) []lruEvicted[V] {
	l.clock++
	if old, ok := l.items[key]; ok {
		l.bytes -= old.size
		pins += old.pins
	}
	l.items[key] = &lruItem[V]{val: val, size: size, pins: pins, used: l.clock}
	l.bytes += size
	return l.evict()
}

// pin holds key against eviction; false if it is not held.
func (l *lru[V]) pin(key string) bool {
	it, ok := l.items[key]
	if ok {
		it.pins++
		l.clock++
		it.used = l.clock
	}
	return ok
}

// unpin gives back one pin of key and returns what that evicted.
func (l *lru[V]) unpin(key string) []lruEvicted[V] {
	if it, ok := l.items[key]; ok && it.pins > 0 {
		it.pins--
	}
	return l.evict()
}

// remove drops key whatever its pins (its value went bad).
func (l *lru[V]) remove(key string) {
	if it, ok := l.items[key]; ok {
		l.bytes -= it.size
		delete(l.items, key)
	}
}

type lruEvicted[V any] struct {
	key string
	val V
}

// evict drops unpinned entries, least recently used first, until the
// total is within the budget or only pinned entries are left.
func (l *lru[V]) evict() []lruEvicted[V] {
	var out []lruEvicted[V]
	for l.bytes > l.budget {
		var oldest string
		var o *lruItem[V]
		for k, it := range l.items {
			if it.pins == 0 && (o == nil || it.used < o.used) {
				oldest, o = k, it
			}
		}
		if o == nil {
			break
		}
		delete(l.items, oldest)
		l.bytes -= o.size
		l.evictions++
		out = append(out, lruEvicted[V]{oldest, o.val})
	}
	return out
}
