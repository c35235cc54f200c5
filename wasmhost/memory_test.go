package wasmhost

import (
	"bytes"
	"testing"
)

// TestCappedMemoryGrowsZeroedAndKeepsBytes: growing keeps what the guest
// wrote, every new byte (up to the capacity a later grow reslices into) is
// zero, and a grow past the limit is refused and remembered.
func TestCappedMemoryGrowsZeroedAndKeepsBytes(t *testing.T) {
	const page = 65536
	a := &cappedAllocator{limit: 40 * page}
	m := a.Allocate(page, 40*page).(*cappedMemory)
	var want []byte
	for size := uint64(page); size <= 40*page; size += 3 * page {
		b := m.Reallocate(size)
		if uint64(len(b)) != size {
			t.Fatalf("grow to %d: len %d", size, len(b))
		}
		if !bytes.Equal(b[:len(want)], want) {
			t.Fatalf("grow to %d: the old bytes changed", size)
		}
		if i := bytes.IndexFunc(b[len(want):cap(b)], func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("grow to %d: byte %d of the new memory is not zero", size, len(want)+i)
		}
		// The guest writes all of its memory.
		for i := range b {
			b[i] = byte(i*7 + int(size))
		}
		want = append(want[:0], b...)
	}
	if b := m.Reallocate(41 * page); b != nil || !a.denied {
		t.Fatalf("grow past the limit: %d bytes, denied %v", len(b), a.denied)
	}
}
