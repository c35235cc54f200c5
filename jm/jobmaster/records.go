package jobmaster

import (
	"context"
	"maps"
	"math"
	"slices"
)

// MaxReleasedBytes bounds the collect-sink records a JobMaster keeps for
// its clients: past it the oldest are dropped (a streaming client that
// keeps up has read them; Result.RecordsOffset says how many are gone).
const MaxReleasedBytes = 256 << 20

// maxReplyBytes bounds the records one WaitRecords answer carries; a
// client asks again for the rest.
const maxReplyBytes = 4 << 20

// finalRecords is the pending key of records FINISHED tasks reported: they
// are released when the job finishes, not at a checkpoint.
const finalRecords = math.MaxInt64

// records holds a job's collect-sink records, owned by the loop. Records
// reach it with checkpoint acknowledgements and wait, by checkpoint, until
// a checkpoint at or after theirs completes: then they are released, and
// no restore can undo them (it restores that checkpoint or a later one).
// A restore drops what is pending; the restored tasks collect it again.
type records struct {
	pending  map[int64][][]byte
	next     map[string]int64 // per execution: the index of its next new record
	released [][]byte
	offset   int64 // how many released records were dropped before released[0]
	bytes    int   // of released
}

// newRecords holds the released records given (an earlier leader's).
func newRecords(released [][]byte) records {
	r := records{pending: map[int64][][]byte{}, next: map[string]int64{}}
	if len(released) > 0 {
		r.pending[math.MinInt64] = released
		r.release(math.MinInt64)
	}
	return r
}

// add takes records of execution execID, the first at its index from,
// skipping those it already has (an acknowledgement whose answer was lost
// comes again with the next).
func (r *records) add(key int64, execID string, recs [][]byte, from int64) {
	skip := r.next[execID] - from
	if skip < 0 || skip >= int64(len(recs)) {
		// skip < 0 would be a gap, which a task never leaves: it resends
		// everything not acknowledged.
		return
	}
	recs = recs[skip:]
	r.next[execID] = from + skip + int64(len(recs))
	r.pending[key] = append(r.pending[key], recs...)
}

// release releases the records pending at checkpoints up to id.
func (r *records) release(id int64) bool {
	released := false
	for _, k := range slices.Sorted(maps.Keys(r.pending)) {
		if k > id {
			break
		}
		for _, v := range r.pending[k] {
			r.bytes += len(v)
		}
		r.released = append(r.released, r.pending[k]...)
		delete(r.pending, k)
		released = true
	}
	drop := 0
	for r.bytes > MaxReleasedBytes && drop < len(r.released)-1 {
		r.bytes -= len(r.released[drop])
		drop++
	}
	if drop > 0 {
		// A copy, so the dropped values can be freed; readers keep the
		// slices they were given.
		r.released = slices.Clone(r.released[drop:])
		r.offset += int64(drop)
	}
	return released
}

// releasing returns the records checkpoint id's completion releases, in
// the order release appends them, and how many are released then.
func (r *records) releasing(id int64) (recs [][]byte, total int64) {
	for _, k := range slices.Sorted(maps.Keys(r.pending)) {
		if k <= id {
			recs = append(recs, r.pending[k]...)
		}
	}
	return recs, r.offset + int64(len(r.released)) + int64(len(recs))
}

// skipTo numbers the next released record n at least: a JobManager that
// took over a job from a checkpoint did not hold the records released
// before it, and counts them as dropped.
func (r *records) skipTo(n int64) {
	if total := r.offset + int64(len(r.released)); total < n {
		r.offset += n - total
	}
}

// restart forgets what is pending: the new attempt's tasks restore the
// latest completed checkpoint and collect the rest again.
func (r *records) restart() {
	clear(r.pending)
	clear(r.next)
}

// WaitRecords blocks until the job has released records from index from
// on, the job ends, or ctx does, and returns the snapshot then with only
// those records (at most a few MiB of them: ask again from
// RecordsOffset+len(Records) for more).
func (jm *JobMaster) WaitRecords(ctx context.Context, from int64) Result {
	for {
		jm.mu.Lock()
		r, changed := jm.snap, jm.recordsChanged
		jm.mu.Unlock()
		if r.RecordsTotal > from || r.State.Terminal() {
			return jm.Result().RecordsFrom(from)
		}
		select {
		case <-changed:
		case <-jm.done:
		case <-ctx.Done():
			return jm.Result().RecordsFrom(from)
		}
	}
}

// RecordsFrom trims r's records to those from index from on, up to a few
// MiB (at least one record): one answer of WaitRecords.
func (r Result) RecordsFrom(from int64) Result {
	skip := min(max(0, from-r.RecordsOffset), int64(len(r.Records)))
	recs := r.Records[skip:]
	n, size := 0, 0
	for n < len(recs) && (n == 0 || size+len(recs[n]) <= maxReplyBytes) {
		size += len(recs[n])
		n++
	}
	r.Records = recs[:n:n]
	r.RecordsOffset += skip
	return r
}
