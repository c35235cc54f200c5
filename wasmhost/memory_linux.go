package wasmhost

import "syscall"

// reserve maps n bytes of anonymous, private, zeroed memory without
// committing it (pages are backed when first touched), or returns nil when
// the OS refuses (strict overcommit, say): the caller then uses the heap.
func reserve(n uint64) []byte {
	if n == 0 || n > 1<<32 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return b
}

// discard gives b's pages back to the OS; b stays mapped and reads zeros.
func discard(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }

// unreserve unmaps what reserve mapped.
func unreserve(b []byte) { _ = syscall.Munmap(b) }
