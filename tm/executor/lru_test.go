package executor

import (
	"slices"
	"testing"
)

// TestLRU checks the budgeted LRU: the budget holds whenever something is
// unpinned, least recent use goes first, pinned entries never go, and an
// entry bigger than the whole budget is kept only while pinned.
func TestLRU(t *testing.T) {
	type op struct {
		do   string // add, get, pin, unpin
		key  string
		size int64
		pins int
	}
	for _, tc := range []struct {
		name    string
		budget  int64
		ops     []op
		evicted []string
		held    []string
		bytes   int64
	}{
		{"within budget", 10, []op{{"add", "a", 4, 0}, {"add", "b", 6, 0}}, nil, []string{"a", "b"}, 10},
		{"oldest goes", 10, []op{{"add", "a", 4, 0}, {"add", "b", 4, 0}, {"add", "c", 4, 0}}, []string{"a"}, []string{"b", "c"}, 8},
		{"a use makes it recent", 10, []op{{"add", "a", 4, 0}, {"add", "b", 4, 0}, {"get", "a", 0, 0}, {"add", "c", 4, 0}}, []string{"b"}, []string{"a", "c"}, 8},
		{"pinned never goes", 10, []op{{"add", "a", 4, 1}, {"add", "b", 4, 1}, {"add", "c", 4, 1}}, nil, []string{"a", "b", "c"}, 12},
		{"pinned oldest is skipped", 10, []op{{"add", "a", 4, 1}, {"add", "b", 4, 0}, {"add", "c", 4, 0}}, []string{"b"}, []string{"a", "c"}, 8},
		{"unpin evicts when over", 10, []op{{"add", "a", 4, 1}, {"add", "b", 4, 1}, {"add", "c", 4, 1}, {"unpin", "b", 0, 0}}, []string{"b"}, []string{"a", "c"}, 8},
		{"pin by a second task", 10, []op{{"add", "a", 8, 1}, {"pin", "a", 0, 0}, {"add", "b", 8, 0}, {"unpin", "a", 0, 0}}, []string{"b"}, []string{"a"}, 8},
		{"bigger than the budget, unpinned", 10, []op{{"add", "a", 4, 0}, {"add", "big", 11, 0}}, []string{"a", "big"}, nil, 0},
		{"bigger than the budget, pinned", 10, []op{{"add", "a", 4, 0}, {"add", "big", 11, 1}}, []string{"a"}, []string{"big"}, 11},
		{"bigger than the budget, released", 10, []op{{"add", "big", 11, 1}, {"unpin", "big", 0, 0}}, []string{"big"}, nil, 0},
		{"re-add keeps pins", 10, []op{{"add", "a", 4, 1}, {"add", "a", 6, 0}, {"add", "b", 8, 0}}, []string{"b"}, []string{"a"}, 6},
		{"zero budget", 0, []op{{"add", "a", 1, 1}, {"add", "b", 1, 0}, {"unpin", "a", 0, 0}}, []string{"b", "a"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLRU[int](tc.budget)
			var evicted []string
			for _, o := range tc.ops {
				var ev []lruEvicted[int]
				switch o.do {
				case "add":
					ev = l.add(o.key, 0, o.size, o.pins)
				case "get":
					if _, ok := l.get(o.key); !ok {
						t.Fatalf("get %s: not held", o.key)
					}
				case "pin":
					if !l.pin(o.key) {
						t.Fatalf("pin %s: not held", o.key)
					}
				case "unpin":
					ev = l.unpin(o.key)
				}
				for _, e := range ev {
					evicted = append(evicted, e.key)
				}
				pinned := int64(0)
				for _, it := range l.items {
					if it.pins > 0 {
						pinned += it.size
					}
				}
				if l.bytes > max(tc.budget, pinned) {
					t.Fatalf("after %v: %d bytes held, budget %d, pinned %d", o, l.bytes, tc.budget, pinned)
				}
			}
			var held []string
			for k := range l.items {
				held = append(held, k)
			}
			slices.Sort(held)
			if !slices.Equal(evicted, tc.evicted) || !slices.Equal(held, tc.held) || l.bytes != tc.bytes ||
				l.evictions != uint64(len(tc.evicted)) {
				t.Fatalf("evicted %v, held %v, %d bytes, %d evictions; want evicted %v, held %v, %d bytes",
					evicted, held, l.bytes, l.evictions, tc.evicted, tc.held, tc.bytes)
			}
		})
	}
}
