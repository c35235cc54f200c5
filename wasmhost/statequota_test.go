package wasmhost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// liveHeap is the live heap after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// maxHeapPerQuota is how much more than its quota a full State may hold
// in the Go heap.
const maxHeapPerQuota = 1.5

// TestStateQuotaBoundsTheHeap fills a State's quota with tiny entries and
// checks what they really cost the process: at most 1.5 times the quota
// (and not far below it, or the quota would refuse state the TaskManager
// has room for). Before, 8-byte keys cost 7 times their quota. A restore of
// the full State charges the same and holds as much.
func TestStateQuotaBoundsTheHeap(t *testing.T) {
	const quota = 32 << 20
	key := make([]byte, 8)
	fill := func(s *State, put func(s *State, i int) error) int {
		for i := 0; ; i++ {
			if err := put(s, i); err != nil {
				if !errors.Is(err, errStateLimit) {
					t.Fatal(err)
				}
				return i
			}
		}
	}
	keyed := func(vlen int) func(s *State, i int) error {
		val := make([]byte, vlen)
		var ck []byte
		return func(s *State, i int) error {
			binary.LittleEndian.PutUint64(key, uint64(i))
			ck = appendStateKey(ck[:0], 1, []byte("n"), key)
			return s.put(key, ck, val, quota)
		}
	}
	cases := []struct {
		name string
		put  func(s *State, i int) error
	}{
		{"keyed, empty values", keyed(0)},
		{"keyed, 8-byte values", keyed(8)},
		{"keyed, 64-byte values", keyed(64)},
		{"operator state", func(s *State, i int) error {
			binary.LittleEndian.PutUint64(key, uint64(i))
			return s.opPut(appendStateKey(nil, 1, []byte("n"), key), key, quota)
		}},
		{"timers", func(s *State, i int) error {
			binary.LittleEndian.PutUint64(key, uint64(i))
			return s.registerTimer(1, key, int64(i), quota)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := liveHeap()
			s := NewState(128, 0, 127)
			n := fill(s, tc.put)
			grew := liveHeap() - before
			ratio := float64(grew) / quota
			t.Logf("%d entries fill %d bytes of quota; the heap grew %d bytes (%.2f× the quota, %.1f bytes an entry)",
				n, s.size(), grew, ratio, float64(grew)/float64(n))
			if ratio > maxHeapPerQuota || ratio < 0.5 {
				t.Errorf("a full quota of %d bytes holds %d bytes of heap (%.2f×); want 0.5× to %.1f×", quota, grew, ratio, maxHeapPerQuota)
			}

			var snap bytes.Buffer
			if err := s.snapshot(&snap); err != nil {
				t.Fatal(err)
			}
			size := s.size()
			s = nil
			before = liveHeap()
			r := NewState(128, 0, 127)
			if err := r.Restore(&snap); err != nil {
				t.Fatal(err)
			}
			snap = bytes.Buffer{}
			grew = liveHeap() - before
			if r.size() != size {
				t.Errorf("restored state costs %d bytes, the original %d", r.size(), size)
			}
			if ratio := float64(grew) / quota; ratio > maxHeapPerQuota {
				t.Errorf("the restored state holds %d bytes of heap (%.2f× its quota)", grew, ratio)
			}
			runtime.KeepAlive(r)
		})
	}
}

// TestDeletedTimersDoNotGrowTheQueue: a guest that registers and deletes
// timers far in the future keeps its state empty; the stale queue entries
// must not pile up out of the quota's sight.
func TestDeletedTimersDoNotGrowTheQueue(t *testing.T) {
	s := NewState(128, 0, 127)
	key := []byte("k")
	if err := s.registerTimer(1, key, 5, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 100_000 {
		at := int64(1<<40 + i%7) // some come back after their delete
		if err := s.registerTimer(1, key, at, 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := s.deleteTimer(1, key, at); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.queue); n > 2*s.nTimers+1025 {
		t.Fatalf("%d queue entries for %d timers", n, s.nTimers)
	}
	if s.nTimers != 1 || s.size() != timerCost(len(appendTimerKey(nil, 1, 5, key))) {
		t.Fatalf("%d timers cost %d", s.nTimers, s.size())
	}
	if due := s.popDue(1 << 62); len(due) != 1 {
		t.Fatalf("due %d timers, want the one left", len(due))
	}
}
