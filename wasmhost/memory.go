package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// cappedAllocator backs one instance's linear memory and refuses to grow it
// past limit. wazero takes the allocator from the instantiation context, so
// every instance in the one runtime gets its own cap (wazero's
// WithMemoryLimitPages is per runtime).
type cappedAllocator struct {
	limit  uint64
	denied bool // a grow was refused: the guest hit its cap
	mem    *cappedMemory
}

func (a *cappedAllocator) Allocate(capacity, max uint64) experimental.LinearMemory {
	a.mem = &cappedMemory{a: a}
	return a.mem
}

type cappedMemory struct {
	a   *cappedAllocator
	buf []byte
}

func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.a.limit {
		m.a.denied = true
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		// Linear memory never shrinks, so the bytes past len are still the
		// zeros make gave them.
		m.buf = m.buf[:size]
		return m.buf
	}
	// Grow geometrically, so a guest growing page by page costs amortized
	// linear copying.
	c := 2 * uint64(cap(m.buf))
	if c < size {
		c = size
	}
	if c > m.a.limit {
		c = m.a.limit
	}
	nb := make([]byte, size, c)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

func (m *cappedMemory) Free() { m.buf = nil }
