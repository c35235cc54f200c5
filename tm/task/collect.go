package task

import (
	"fmt"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/abi"
)

// collector is the collect sink's side of a task: the records that reached
// it and that no checkpoint acknowledgement is known to have carried to
// the JobMaster yet. The task goroutine adds records; the uploader takes
// them into an acknowledgement and drops them once the acknowledgement
// arrived, so records travel with the checkpoint that covers them (and the
// JobMaster releases them to clients when that checkpoint completes). An
// acknowledgement that failed leaves its records here for the next one;
// the JobMaster skips any it already has by their index.
type collector struct {
	mu    sync.Mutex
	recs  [][]byte // records from index from on
	from  int64    // the task's index of recs[0]
	bytes int      // the values' bytes in recs
	arena []byte   // values are copied into chunks of it (task goroutine only)
}

// add copies the records' values in and returns their bytes. It fails
// once the records held exceed MaxCollectBytes: without checkpoints they
// all wait for the task's end.
func (c *collector) add(execID string, recs []abi.Record) (added int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range recs {
		v := recs[i].Value
		if c.bytes+len(v) > MaxCollectBytes {
			return added, fmt.Errorf("%w: the collect sink of task %s holds more than %d bytes not yet covered by a completed checkpoint; write large results with a file sink, or checkpoint more often", ErrCollectTooLarge, execID, MaxCollectBytes)
		}
		c.bytes += len(v)
		added += len(v)
		c.recs = append(c.recs, c.keep(v))
	}
	return added, nil
}

// keep copies v into the arena: one allocation per chunk instead of one
// per record. Values handed out stay valid: the arena only grows past them.
func (c *collector) keep(v []byte) []byte {
	const chunk = 64 << 10
	if cap(c.arena)-len(c.arena) < len(v) {
		if len(v) > chunk/4 {
			return append([]byte(nil), v...)
		}
		c.arena = make([]byte, 0, chunk)
	}
	start := len(c.arena)
	c.arena = append(c.arena, v...)
	return c.arena[start:len(c.arena):len(c.arena)]
}

// end is the index one past the last record added: a barrier's boundary.
func (c *collector) end() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.from + int64(len(c.recs))
}

// upTo returns the records held below index end and the index of the
// first.
func (c *collector) upTo(end int64) ([][]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := max(0, min(int(end-c.from), len(c.recs)))
	return c.recs[:n:n], c.from
}

// acked drops the records below index end: an acknowledgement carried
// them.
func (c *collector) acked(end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := max(0, min(int(end-c.from), len(c.recs)))
	for _, v := range c.recs[:n] {
		c.bytes -= len(v)
	}
	// A copy, not a clear: the acknowledgement may still be on its way
	// with the dropped values.
	c.recs = slices.Clone(c.recs[n:])
	c.from += int64(n)
}

// all returns every record held and the index of the first.
func (c *collector) all() ([][]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recs, c.from
}
