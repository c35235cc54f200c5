package jobmaster

import (
	"slices"
	"strings"
	"testing"
)

func vals(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, v := range s {
		out[i] = []byte(v)
	}
	return out
}

func strs(b [][]byte) string {
	var out []string
	for _, v := range b {
		out = append(out, string(v))
	}
	return strings.Join(out, ",")
}

// TestRecordsReleasedByCompletedCheckpoints: records wait for a checkpoint
// at or after theirs, a resent acknowledgement adds nothing twice, a
// restart drops only what no completed checkpoint covers, and FINISHED
// tasks' records wait for the job's end.
func TestRecordsReleasedByCompletedCheckpoints(t *testing.T) {
	r := newRecords(nil)
	r.add(1, "x0", vals("a", "b"), 0)
	r.add(1, "x1", vals("c"), 0)
	r.add(2, "x0", vals("d"), 2)
	if r.release(0) || len(r.released) != 0 {
		t.Fatalf("released %q before any checkpoint completed", strs(r.released))
	}
	// Checkpoint 1 aborted; 2 completes and releases both.
	r.release(2)
	if got := strs(r.released); got != "a,b,c,d" {
		t.Fatalf("after checkpoint 2: %q", got)
	}
	// An acknowledgement resent with the next: only the new record counts.
	r.add(3, "x0", vals("d", "e"), 2)
	r.add(3, "x1", vals("f"), 1)
	r.add(finalRecords, "x1", vals("g"), 2)
	// A restore of checkpoint 2: what checkpoint 3 would have covered
	// (never completed) and x1's final records are collected again.
	r.release(2)
	r.restart()
	if got := strs(r.released); got != "a,b,c,d" || len(r.pending) != 0 {
		t.Fatalf("after the restart: released %q, pending %v", got, r.pending)
	}
	// The new attempt's executions count from 0 again.
	r.add(4, "y0", vals("e"), 0)
	r.add(finalRecords, "y1", vals("f", "g"), 0)
	r.release(4)
	if got := strs(r.released); got != "a,b,c,d,e" {
		t.Fatalf("after checkpoint 4: %q", got)
	}
	r.release(finalRecords)
	if got := strs(r.released); got != "a,b,c,d,e,f,g" || r.offset != 0 {
		t.Fatalf("at the end: %q (offset %d)", got, r.offset)
	}
}

// TestReleasedRecordsKeepTheNewest: past MaxReleasedBytes the oldest go,
// and the offset counts them.
func TestReleasedRecordsKeepTheNewest(t *testing.T) {
	r := newRecords(nil)
	big := make([]byte, MaxReleasedBytes/4+1)
	for i := range 5 {
		r.add(int64(i+1), "x", [][]byte{big}, int64(i))
		r.release(int64(i + 1))
	}
	if len(r.released) != 3 || r.offset != 2 || r.bytes > MaxReleasedBytes {
		t.Fatalf("kept %d records (%d bytes) after dropping %d", len(r.released), r.bytes, r.offset)
	}
}

// TestRecordsFrom: an answer starts at the index asked for and carries at
// most maxReplyBytes, but at least one record.
func TestRecordsFrom(t *testing.T) {
	res := Result{Records: vals("a", "b", "c"), RecordsOffset: 10, RecordsTotal: 13}
	for _, c := range []struct {
		from       int64
		want       string
		wantOffset int64
	}{
		{0, "a,b,c", 10}, // dropped before 10: the answer starts at 10
		{11, "b,c", 11},
		{13, "", 13},
		{20, "", 13},
	} {
		got := res.RecordsFrom(c.from)
		if strs(got.Records) != c.want || got.RecordsOffset != c.wantOffset {
			t.Errorf("from %d: %q at %d, want %q at %d", c.from, strs(got.Records), got.RecordsOffset, c.want, c.wantOffset)
		}
	}
	huge := Result{Records: [][]byte{make([]byte, maxReplyBytes), make([]byte, 1)}, RecordsTotal: 2}
	if got := huge.RecordsFrom(0); len(got.Records) != 1 || !slices.Equal(got.Records[0], huge.Records[0]) {
		t.Errorf("a reply of %d records, want the first alone", len(got.Records))
	}
}

// TestRecordsNumberedAcrossATakeover: a checkpoint notes the records its
// completion releases and how many are released then; a JobMaster that
// restores it numbers the records collected again from there, whether it
// was handed the earlier ones or not.
func TestRecordsNumberedAcrossATakeover(t *testing.T) {
	old := newRecords(nil)
	old.add(1, "x0", vals("a", "b"), 0)
	old.add(2, "x0", vals("c"), 2)
	old.release(1)
	old.add(3, "x0", vals("d"), 3)
	recs, n := old.releasing(2)
	if strs(recs) != "c" || n != 3 {
		t.Fatalf("checkpoint 2 releases %q, %d in all; want c, 3", strs(recs), n)
	}
	for _, c := range []struct {
		handed     [][]byte
		want       string
		wantOffset int64
	}{
		{vals("a", "b", "c"), "a,b,c,d", 0},
		{nil, "d", 3},
		{vals("c"), "c,d", 2},
	} {
		// A new leader restores checkpoint 2; y0 collects d again.
		r := newRecords(c.handed)
		r.release(2)
		r.skipTo(n)
		r.add(3, "y0", vals("d"), 0)
		r.release(3)
		if strs(r.released) != c.want || r.offset != c.wantOffset {
			t.Errorf("handed %q: %q from %d, want %q from %d", strs(c.handed), strs(r.released), r.offset, c.want, c.wantOffset)
		}
	}
	// The JobMaster that held them restores its own checkpoint: nothing
	// changes.
	old.release(2)
	old.skipTo(n)
	if old.offset != 0 || strs(old.released) != "a,b,c" {
		t.Fatalf("restoring its own checkpoint: %q from %d", strs(old.released), old.offset)
	}
}
