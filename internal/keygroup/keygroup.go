package keygroup

// Of returns the key group of key, in [0, maxParallelism).
func Of(key []byte, maxParallelism int) int {
	return int(Hash(key) % uint32(maxParallelism))
}

// Hash is FNV-1a followed by murmur3's finalizer, so that similar keys
// spread well and the low bits depend on every byte.
func Hash(key []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Range returns the inclusive range of key groups that subtask owns when an
// operator runs at parallelism with maxParallelism key groups.
func Range(subtask, parallelism, maxParallelism int) (start, end int) {
	start = (subtask*maxParallelism + parallelism - 1) / parallelism
	end = ((subtask+1)*maxParallelism - 1) / parallelism
	return start, end
}

// Subtask returns the subtask that owns keyGroup at parallelism.
func Subtask(keyGroup, parallelism, maxParallelism int) int {
	return keyGroup * parallelism / maxParallelism
}
