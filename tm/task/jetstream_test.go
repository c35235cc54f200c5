package task

import (
	"slices"
	"testing"
)

// What the exactly-once sink keeps in a checkpoint is what it gets back
// on restore: every batch not yet published, with its checkpoint, its
// subtask (for the message ids) and its records, keyless ones kept apart
// from empty keys.
func TestJetStreamSinkCheckpointRoundTrip(t *testing.T) {
	s := &jetStreamSink{subtask: 3, exactly: true}
	s.cur = []jsRec{{key: []byte("k"), value: []byte("v1")}, {value: []byte("v2")}, {key: []byte{}, value: nil}}
	s.barrier(7)
	s.cur = []jsRec{{value: []byte("v3")}}
	enc := s.barrier(8)

	r := &jetStreamSink{}
	if err := r.restore(enc); err != nil {
		t.Fatal(err)
	}
	if len(r.pending) != 2 {
		t.Fatalf("restored %d batches, want 2", len(r.pending))
	}
	for i, want := range []struct {
		id   int64
		recs []jsRec
	}{{7, s.pending[0].recs}, {8, s.pending[1].recs}} {
		p := r.pending[i]
		if p.id != want.id || p.subtask != 3 || !p.ready || len(p.recs) != len(want.recs) {
			t.Fatalf("batch %d: id %d subtask %d ready %v %d records, want id %d subtask 3 ready, %d records", i, p.id, p.subtask, p.ready, len(p.recs), want.id, len(want.recs))
		}
		for j, rec := range p.recs {
			w := want.recs[j]
			if (rec.key == nil) != (w.key == nil) || !slices.Equal(rec.key, w.key) || !slices.Equal(rec.value, w.value) {
				t.Fatalf("batch %d record %d: %+v, want %+v", i, j, rec, w)
			}
		}
	}
	for _, bad := range [][]byte{enc[:10], enc[:len(enc)-1]} {
		if err := (&jetStreamSink{}).restore(bad); err == nil {
			t.Fatalf("restore of %d truncated bytes: no error", len(bad))
		}
	}
}
