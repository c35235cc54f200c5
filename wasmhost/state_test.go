package wasmhost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/keygroup"
)

func fill(t *testing.T, s *State, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		key := []byte(fmt.Sprint("key-", i))
		ck := appendStateKey(nil, 4, []byte("n"), key)
		if err := s.put(key, ck, []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.registerTimer(4, key, int64(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	s.opPut(appendStateKey(nil, 1, []byte("pos"), nil), []byte("42"), 0)
}

func snapshot(t *testing.T, s *State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// content is what a snapshot restores to, in a canonical form: snapshots
// list entries in map order, so compare them by content, not bytes.
func content(t *testing.T, snap []byte) string {
	t.Helper()
	if len(snap) < 20 {
		t.Fatalf("snapshot of %d bytes", len(snap))
	}
	u := func(i int) int { return int(binary.LittleEndian.Uint32(snap[i:])) }
	s := NewState(u(8), u(12), u(16))
	if err := s.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for k, v := range s.ops {
		lines = append(lines, fmt.Sprintf("op %q=%q", k, v))
	}
	for g := range s.groups {
		for k, v := range s.groups[g] {
			lines = append(lines, fmt.Sprintf("kv %d %q=%q", g, k, v))
		}
		for k := range s.timers[g] {
			lines = append(lines, fmt.Sprintf("timer %d %q", g, k))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func TestStateRescale(t *testing.T) {
	const maxP, n = 16, 500
	whole := NewState(maxP, 0, maxP-1)
	fill(t, whole, n)
	snap := snapshot(t, whole)

	// Scale out to 3 subtasks, then back in to 1: nothing lost, nothing doubled.
	var parts [][]byte
	total := 0
	for i := 0; i < 3; i++ {
		start, end := keygroup.Range(i, 3, maxP)
		s := NewState(maxP, start, end)
		if err := s.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		for _, g := range s.groups {
			total += len(g)
		}
		_, hasOp := s.opGet(appendStateKey(nil, 1, []byte("pos"), nil))
		if hasOp != (i == 0) {
			t.Errorf("subtask %d has operator state: %v", i, hasOp)
		}
		parts = append(parts, snapshot(t, s))
	}
	if total != n {
		t.Fatalf("the 3 subtasks hold %d keys, want %d", total, n)
	}
	back := NewState(maxP, 0, maxP-1)
	for _, p := range parts {
		if err := back.Restore(bytes.NewReader(p)); err != nil {
			t.Fatal(err)
		}
	}
	if content(t, snapshot(t, back)) != content(t, snap) {
		t.Error("state scaled out and back in differs from the original")
	}
	if back.size() != whole.size() {
		t.Errorf("size %d, want %d", back.size(), whole.size())
	}
	if got := len(back.popDue(n)); got != n {
		t.Errorf("%d timers due, want %d", got, n)
	}
}

func TestStateRestoreRejects(t *testing.T) {
	s := NewState(16, 0, 15)
	fill(t, s, 10)
	good := snapshot(t, s)
	flip := append([]byte(nil), good...)
	flip[30] ^= 1
	for name, b := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a snapshot at all, no"),
		"truncated": good[:len(good)-9],
		"corrupt":   flip,
	} {
		if err := NewState(16, 0, 15).Restore(bytes.NewReader(b)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if err := NewState(32, 0, 31).Restore(bytes.NewReader(good)); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("different max parallelism: err = %v", err)
	}
}

func TestStateLimit(t *testing.T) {
	s := NewState(4, 0, 3)
	key := []byte("k")
	ck := appendStateKey(nil, 1, nil, key)
	// An entry costs its key, its value and entryOverheadBytes.
	if err := s.put(key, ck, make([]byte, 100), 150); !errors.Is(err, errStateLimit) {
		t.Fatalf("err = %v", err)
	}
	if err := s.put(key, ck, make([]byte, 10), 150); err != nil {
		t.Fatal(err)
	}
	if err := s.del(key, ck); err != nil || s.size() != 0 {
		t.Fatalf("after delete: %v, size %d", err, s.size())
	}
}

// FuzzRestore feeds arbitrary bytes to Restore, which must reject them
// cleanly or restore state that snapshots again.
func FuzzRestore(f *testing.F) {
	s := NewState(8, 0, 7)
	for i := 0; i < 5; i++ {
		key := []byte{byte(i)}
		s.put(key, appendStateKey(nil, 2, nil, key), key, 0)
		s.registerTimer(2, key, int64(i), 0)
	}
	var b bytes.Buffer
	s.snapshot(&b)
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		st := NewState(8, 2, 5)
		if err := st.Restore(bytes.NewReader(b)); err != nil {
			return
		}
		var out bytes.Buffer
		if err := st.snapshot(&out); err != nil {
			t.Fatal(err)
		}
		st.nextTimer()
		st.popDue(1 << 62)
	})
}
