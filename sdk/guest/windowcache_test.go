//go:build !wasip1

package guest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/keygroup"
)

// The window cache keeps entries in guest memory between barriers, writes
// them back at a flush, reads what a restore left in keyed state, deletes
// from keyed state only what it wrote there, and falls through to keyed
// state for everything once it was emptied past its bounds.
func TestWindowCacheWritesBackRestoresAndEvicts(t *testing.T) {
	defer func(e int) { reduceCacheEntries = e }(reduceCacheEntries)
	reduceCacheEntries = 4
	h := withJob(t, func(*Env) {})
	wo := &windowOp{w: Tumbling(10 * time.Millisecond), op: &op{id: 3, name: "win"}}
	ctx := &KeyedContext{Context: Context{op: wo.op}}
	state := func(key string, start int64) (byte, bool) {
		v, ok := h.state[sk(3, windowState(start), []byte(key))]
		if !ok {
			return 0, false
		}
		if len(v) != 2 {
			t.Fatalf("state of %s@%d is %v", key, start, v)
		}
		return v[1], true
	}
	get := func(key string, start int64, add bool) (winRef, byte, bool) {
		ctx.key = []byte(key)
		ref, v, ok := wo.get(ctx, start, keygroup.Hash(ctx.key), add)
		if !ok {
			return ref, 0, false
		}
		return ref, v[1], true
	}
	add := func(key string, start int64, n byte) {
		t.Helper()
		ref, old, _ := get(key, start, true)
		wo.put(ctx, ref, []byte{0, old + n})
	}
	// Restored: r has 5 in the window at 0.
	h.state[sk(3, windowState(0), []byte("r"))] = []byte{0, 5}
	add("r", 0, 1)
	add("a", 0, 2)
	add("a", 0, 3)
	add("b", 10, 7)
	if v, _ := state("r", 0); v != 5 {
		t.Fatalf("r was written before a flush: %d", v)
	}
	if _, ok := state("a", 0); ok {
		t.Fatal("a was written before a flush")
	}
	wo.flush(false)
	for _, c := range []struct {
		key   string
		start int64
		want  byte
	}{{"r", 0, 6}, {"a", 0, 5}, {"b", 10, 7}} {
		if v, ok := state(c.key, c.start); !ok || v != c.want {
			t.Errorf("after the flush %s@%d = %d (%v), want %d", c.key, c.start, v, ok, c.want)
		}
	}
	// A timer's lookup of a key the window never had makes no entry.
	if _, _, ok := get("nobody", 0, false); ok {
		t.Fatal("a window of a key never seen exists")
	}
	// Fired: deleted from the cache and from keyed state.
	ref, _, _ := get("a", 0, false)
	wo.del(ctx, ref)
	if _, ok := state("a", 0); ok {
		t.Fatal("a fired window is still in keyed state")
	}
	if _, _, ok := get("a", 0, false); ok {
		t.Fatal("a fired window is still in the cache")
	}
	// An entry made and fired between flushes never reaches keyed state.
	add("c", 10, 1)
	ref, _, _ = get("c", 10, false)
	wo.del(ctx, ref)
	wo.flush(false)
	if _, ok := state("c", 10); ok {
		t.Fatal("a window made and fired between flushes was written")
	}
	// The window at 0 is empty once r fires; past its time it is dropped.
	ref, _, _ = get("r", 0, false)
	wo.del(ctx, ref)
	wo.dropDone(100)
	if wo.table(0, false) != nil || wo.table(10, false) == nil {
		t.Fatalf("tables after dropDone: %d, want only the window at 10's (b is in it)", len(wo.cache.tables))
	}
	// Past the bounds the cache is written back and emptied; then every
	// key's first lookup reads keyed state.
	add("d", 20, 1)
	add("e", 20, 1)
	add("f", 20, 1)
	wo.bound()
	if len(wo.cache.tables) != 0 || !wo.cache.evicted {
		t.Fatalf("not emptied at %d entries", reduceCacheEntries)
	}
	if v, ok := state("e", 20); !ok || v != 1 {
		t.Fatal("an evicted entry was not written back")
	}
	add("e", 20, 1)
	add("b", 10, 1)
	wo.flush(false)
	if v, _ := state("e", 20); v != 2 {
		t.Errorf("e@20 = %d after eviction and an update, want 2", v)
	}
	if v, _ := state("b", 10); v != 8 {
		t.Errorf("b@10 = %d after eviction and an update, want 8", v)
	}
}
