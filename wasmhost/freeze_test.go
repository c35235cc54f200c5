package wasmhost

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// frozenBytes encodes f.
func frozenBytes(t *testing.T, f *Frozen) []byte {
	t.Helper()
	return f.AppendTo(nil)
}

// TestFreezeIsCopyOnWrite: what a Frozen encodes is the state at Freeze,
// whatever is written, overwritten in place or deleted before it is
// encoded; the writes are all there after Release; and a second Freeze
// while the first is out sees them too.
func TestFreezeIsCopyOnWrite(t *testing.T) {
	const maxP, n = 16, 300
	s := NewState(maxP, 0, maxP-1)
	fill(t, s, n)
	want := snapshot(t, s)

	f := s.Freeze()
	ck := func(i int) []byte { return appendStateKey(nil, 4, []byte("n"), []byte(fmt.Sprint("key-", i))) }
	key := func(i int) []byte { return []byte(fmt.Sprint("key-", i)) }
	for i := 0; i < n; i += 3 {
		// Same length: the old buffer would be reused without a freeze.
		if err := s.put(key(i), ck(i), bytes.Repeat([]byte("x"), len(fmt.Sprint(i))), 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < n; i += 3 {
		if err := s.del(key(i), ck(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := n; i < n+50; i++ {
		if err := s.put(key(i), ck(i), []byte("new"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Reads see the writes while the copy is out.
	if v, ok, _ := s.get(key(0), ck(0)); !ok || string(v) != "x" {
		t.Fatalf("get after an overwrite = %q %v", v, ok)
	}
	if _, ok, _ := s.get(key(1), ck(1)); ok {
		t.Fatal("a deleted key is still there")
	}
	if keys := s.scanKeys(appendStateKey(nil, 4, []byte("n"), nil)); len(keys) != n-n/3+50 {
		t.Fatalf("scan sees %d keys, want %d", len(keys), n-n/3+50)
	}
	second := s.Freeze() // taken while the first is out: a copy
	afterWrites := frozenBytes(t, second)
	second.Release()

	if got := frozenBytes(t, f); content(t, got) != content(t, want) {
		t.Fatal("the frozen copy changed with writes made after Freeze")
	}
	f.Release()
	f.Release() // idempotent
	if got := snapshot(t, s); content(t, got) != content(t, afterWrites) {
		t.Fatal("after Release the state differs from what the second Freeze saw")
	}
	if v, ok, _ := s.get(key(n+1), ck(n+1)); !ok || string(v) != "new" {
		t.Fatalf("a key written while frozen: %q %v", v, ok)
	}
	if s.delta != nil || s.layered != nil || s.copies != 0 {
		t.Fatal("state still layered after every Frozen was released")
	}
	back := NewState(maxP, 0, maxP-1)
	if err := back.Restore(bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if content(t, snapshot(t, back)) != content(t, want) {
		t.Fatal("the frozen snapshot does not restore to the state at Freeze")
	}
}

// TestFreezeConcurrentWrites encodes while another goroutine writes (run
// with -race).
func TestFreezeConcurrentWrites(t *testing.T) {
	s := NewState(8, 0, 7)
	fill(t, s, 200)
	want := snapshot(t, s)
	f := s.Freeze()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			k := []byte(fmt.Sprint("key-", i%300))
			s.put(k, appendStateKey(nil, 4, []byte("n"), k), []byte(fmt.Sprint(i)), 0)
		}
	}()
	got := frozenBytes(t, f)
	wg.Wait()
	f.Release()
	if content(t, got) != content(t, want) {
		t.Fatal("concurrent writes changed the frozen copy")
	}
}
