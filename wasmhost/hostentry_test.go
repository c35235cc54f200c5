package wasmhost

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/keygroup"
)

// hostEntrySize is what one host entry adds to State.Size.
func hostEntrySize(vertex int, name string, value []byte) int64 {
	return entryCost(len(appendStateKey(nil, uint32(vertex), []byte(name), nil)), len(value))
}

func TestHostEntrySnapshotRestore(t *testing.T) {
	const maxP = 128
	s := NewState(maxP, 0, maxP-1)
	value := []byte("buffered records")
	s.PutHostEntry(7, "collected-0", value)
	value[0] = 'X' // PutHostEntry keeps its own copy
	if got, want := s.size(), hostEntrySize(7, "collected-0", value); got != want {
		t.Errorf("size() = %d, want %d", got, want)
	}

	r := NewState(maxP, 0, maxP-1)
	if err := r.Restore(bytes.NewReader(snapshot(t, s))); err != nil {
		t.Fatal(err)
	}
	if r.size() != s.size() {
		t.Errorf("restored size() = %d, want %d", r.size(), s.size())
	}
	got := r.TakeHostEntries(7, "collected-")
	if want := [][]byte{[]byte("buffered records")}; !reflect.DeepEqual(got, want) {
		t.Errorf("TakeHostEntries = %q, want %q", got, want)
	}
	if r.size() != 0 {
		t.Errorf("Size() after take = %d, want 0", r.size())
	}
}

func TestHostEntryReplace(t *testing.T) {
	s := NewState(4, 0, 3)
	s.PutHostEntry(1, "buf", []byte("a much longer first value"))
	s.PutHostEntry(1, "buf", []byte("short"))
	if got, want := s.size(), hostEntrySize(1, "buf", []byte("short")); got != want {
		t.Errorf("Size() after replace = %d, want %d", got, want)
	}
	if got := s.TakeHostEntries(1, "buf"); !reflect.DeepEqual(got, [][]byte{[]byte("short")}) {
		t.Errorf("TakeHostEntries = %q, want [short]", got)
	}
}

func TestTakeHostEntriesAfterRescale(t *testing.T) {
	const maxP, p, vertex, otherVertex = 128, 2, 7, 8
	guestKey := appendStateKey(nil, vertex, []byte("pos"), nil)

	// Subtasks 0 and 1 of parallelism 2 each hold their collected records,
	// an entry of another name, the same name on another vertex, and
	// guest operator state.
	var snaps [][]byte
	var otherSize int64
	for i := 0; i < p; i++ {
		start, end := keygroup.Range(i, p, maxP)
		s := NewState(maxP, start, end)
		s.PutHostEntry(vertex, fmt.Sprint("collected-", i), []byte(fmt.Sprint("records of ", i)))
		s.PutHostEntry(vertex, fmt.Sprint("other-", i), []byte("keep"))
		s.PutHostEntry(otherVertex, fmt.Sprint("collected-", i), []byte("other vertex"))
		otherSize += hostEntrySize(vertex, fmt.Sprint("other-", i), []byte("keep")) +
			hostEntrySize(otherVertex, fmt.Sprint("collected-", i), []byte("other vertex"))
		if i == 0 {
			if err := s.opPut(guestKey, []byte("42"), 0); err != nil {
				t.Fatal(err)
			}
			otherSize += entryCost(len(guestKey), 2)
		}
		snaps = append(snaps, snapshot(t, s))
	}

	// Scale in to one subtask holding every key group.
	merged := NewState(maxP, 0, maxP-1)
	for _, b := range snaps {
		if err := merged.Restore(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	before := merged.size()
	taken := hostEntrySize(vertex, "collected-0", []byte("records of 0")) +
		hostEntrySize(vertex, "collected-1", []byte("records of 1"))
	if before != otherSize+taken {
		t.Errorf("merged size() = %d, want %d", before, otherSize+taken)
	}

	got := merged.TakeHostEntries(vertex, "collected-")
	want := [][]byte{[]byte("records of 0"), []byte("records of 1")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TakeHostEntries = %q, want %q", got, want)
	}
	if got := merged.size(); got != before-taken {
		t.Errorf("Size() after take = %d, want %d", got, before-taken)
	}
	if again := merged.TakeHostEntries(vertex, "collected-"); len(again) != 0 {
		t.Errorf("second TakeHostEntries = %q, want none", again)
	}

	// The rest is untouched.
	for i := 0; i < p; i++ {
		if v, ok := merged.opGet(appendStateKey(nil, vertex, []byte(fmt.Sprint("other-", i)), nil)); !ok || string(v) != "keep" {
			t.Errorf("other-%d on vertex %d: %q, %v", i, vertex, v, ok)
		}
	}
	if v, ok := merged.opGet(guestKey); !ok || string(v) != "42" {
		t.Errorf("guest operator state: %q, %v", v, ok)
	}
	if got := merged.TakeHostEntries(otherVertex, "collected-"); len(got) != 2 {
		t.Errorf("vertex %d: took %d entries, want 2", otherVertex, len(got))
	}
}

func TestTakeHostEntriesPrefix(t *testing.T) {
	s := NewState(4, 0, 3)
	for _, name := range []string{"collected-0", "collected", "collecte", "xcollected-1", ""} {
		s.PutHostEntry(3, name, []byte(name))
	}
	// Vertex ids that share the low bytes of 3 do not match.
	s.PutHostEntry(3+1<<16, "collected-9", []byte("vertex 65539"))
	got := s.TakeHostEntries(3, "collected")
	want := [][]byte{[]byte("collected"), []byte("collected-0")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TakeHostEntries(3, collected) = %q, want %q", got, want)
	}
	// The empty prefix takes the rest of the vertex.
	if got := s.TakeHostEntries(3, ""); len(got) != 3 {
		t.Errorf("TakeHostEntries(3, \"\") took %q, want 3 entries", got)
	}
	if got := s.TakeHostEntries(3+1<<16, ""); len(got) != 1 {
		t.Errorf("vertex 65539: took %q, want 1 entry", got)
	}
	if s.size() != 0 {
		t.Errorf("size() = %d after taking everything", s.size())
	}
}
