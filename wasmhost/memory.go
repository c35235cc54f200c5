package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// cappedAllocator backs one instance's linear memory and refuses to grow it
// past limit. wazero takes the allocator from the instantiation context, so
// every instance in the one runtime gets its own cap (wazero's
// WithMemoryLimitPages is per runtime).
//
// Where the OS allows (reserve), the memory is one anonymous mapping of the
// cap, reserved but not committed: growing it only reslices, so nothing is
// copied and nothing is zeroed until the guest touches a page, and none of
// it is on the Go heap, so one tenant's memory churn costs the others no
// garbage collection (docs/RATIONALE.md, "Why is guest memory a mapping of
// its cap?"). Elsewhere it is a Go slice grown geometrically.
type cappedAllocator struct {
	limit  uint64
	denied bool // a grow was refused: the guest hit its cap
	heap   bool // no mapping even where the OS has them (tests)
	mem    *cappedMemory
}

func (a *cappedAllocator) Allocate(capacity, max uint64) experimental.LinearMemory {
	a.mem = &cappedMemory{a: a}
	if !a.heap {
		a.mem.mapped = reserve(min(a.limit, max))
	}
	return a.mem
}

// release unmaps the instance's memory. The instance's owner calls it once
// no guest call or host access can touch the memory again: after the
// module is closed.
func (a *cappedAllocator) release() {
	if m := a.mem; m != nil && m.mapped != nil {
		unreserve(m.mapped)
		m.mapped, m.buf = nil, nil
	}
}

type cappedMemory struct {
	a      *cappedAllocator
	buf    []byte
	mapped []byte // the reservation, or nil: buf is on the Go heap
}

func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.a.limit {
		m.a.denied = true
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		// Linear memory never shrinks, so the bytes past len are still the
		// zeros make or the mapping gave them.
		m.buf = m.buf[:size]
		return m.buf
	}
	if m.mapped != nil {
		if size > uint64(len(m.mapped)) {
			// The module's own maximum, which wazero checks first.
			m.a.denied = true
			return nil
		}
		m.buf = m.mapped[:size]
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

// Free is wazero's, when the module closes. A mapping's pages go back to
// the OS at once, but the mapping stays until release: wazero also frees
// on Runtime.Close, which may come while the instance's owner is still
// between calls, so the address range must stay valid (reading zeros)
// until the owner is done with it.
func (m *cappedMemory) Free() {
	if m.mapped != nil {
		discard(m.mapped)
	}
	m.buf = nil
}
