package wasmhost

import (
	"bytes"
	"testing"
)

// TestCappedMemoryGrowsZeroedAndKeepsBytes: growing keeps what the guest
// wrote, every new byte (up to the capacity a later grow reslices into) is
// zero, and a grow past the limit is refused and remembered.
// Both backings: a mapping of the cap (where the OS has one) and the heap.
func TestCappedMemoryGrowsZeroedAndKeepsBytes(t *testing.T) {
	for _, heap := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "heap"}[heap], func(t *testing.T) { testCappedMemory(t, heap) })
	}
}

func testCappedMemory(t *testing.T, heap bool) {
	const page = 65536
	a := &cappedAllocator{limit: 40 * page, heap: heap}
	m := a.Allocate(page, 40*page).(*cappedMemory)
	if heap && m.mapped != nil {
		t.Fatal("a heap allocator mapped its memory")
	}
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
	m.Free()
	a.release()
	if m.mapped != nil || m.buf != nil {
		t.Fatal("memory still held after Free and release")
	}
	a.release() // twice is harmless
}

// A mapping is reserved at the cap, or the module's maximum when lower, and
// a grow past the module's maximum is refused.
func TestCappedMemoryMapsTheSmallerOfCapAndMaximum(t *testing.T) {
	const page = 65536
	a := &cappedAllocator{limit: 40 * page}
	m := a.Allocate(page, 8*page).(*cappedMemory)
	defer a.release()
	if m.mapped == nil {
		t.Skip("this OS gives no mapping: linear memory is on the heap")
	}
	if len(m.mapped) != 8*page {
		t.Fatalf("reserved %d bytes, want the module's maximum %d", len(m.mapped), 8*page)
	}
	if b := m.Reallocate(8 * page); len(b) != 8*page {
		t.Fatalf("grow to the maximum: %d bytes", len(b))
	}
	if b := m.Reallocate(9 * page); b != nil || !a.denied {
		t.Fatalf("grow past the maximum: %d bytes, denied %v", len(b), a.denied)
	}
}
