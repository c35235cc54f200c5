package abi

import (
	"bytes"
	"errors"
	"testing"
)

func TestBatchRoundTrip(t *testing.T) {
	recs := []Record{
		{Value: []byte("plain")},
		{Key: []byte("k"), HasKey: true, Value: []byte("keyed")},
		{Key: []byte{}, HasKey: true, Value: nil},
		{Time: -5, HasTime: true, Value: []byte{0, 1, 2}},
		{Key: []byte("both"), HasKey: true, Time: 1 << 40, HasTime: true, Value: bytes.Repeat([]byte("x"), 1000)},
		{Value: []byte("with headers"), Time: 3, HasTime: true, Headers: []Header{{Key: []byte("trace"), Value: []byte("t-1")}, {Key: []byte("trace"), Value: []byte{}}, {Key: []byte{}, Value: []byte("v")}}},
	}
	b := AppendBatch(nil, recs)
	size := 4
	for i := range recs {
		size += RecordSize(&recs[i])
	}
	if len(b) != size {
		t.Fatalf("encoded %d bytes, RecordSize sums to %d", len(b), size)
	}
	got, err := DecodeBatch(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		w, g := recs[i], got[i]
		if w.HasKey != g.HasKey || w.HasTime != g.HasTime || !bytes.Equal(w.Key, g.Key) || w.Time != g.Time || !bytes.Equal(w.Value, g.Value) || len(w.Headers) != len(g.Headers) {
			t.Errorf("record %d: got %+v, want %+v", i, g, w)
			continue
		}
		for j, h := range w.Headers {
			if !bytes.Equal(h.Key, g.Headers[j].Key) || !bytes.Equal(h.Value, g.Headers[j].Value) {
				t.Errorf("record %d header %d: got %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, h.Key, h.Value)
			}
		}
	}
	if again := AppendBatch(nil, got); !bytes.Equal(again, b) {
		t.Error("re-encoding the decoded batch changed its bytes")
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":                {},
		"short count":          {1, 0},
		"count too big":        {0xff, 0xff, 0xff, 0x7f, 0},
		"unknown flag":         {1, 0, 0, 0, 8, 0, 0, 0, 0},
		"no header":            {1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0},
		"header overruns":      {1, 0, 0, 0, 4, 1, 0, 0, 0, 5, 0, 0, 0, 'k', 0, 0, 0, 0, 0, 0, 0, 0},
		"header count too big": {1, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0},
		"header without value": {1, 0, 0, 0, 4, 1, 0, 0, 0, 1, 0, 0, 0, 'k'},
		"value overruns":       {1, 0, 0, 0, 0, 9, 0, 0, 0, 'a'},
		"trailing":             {0, 0, 0, 0, 1},
		"truncated time":       {1, 0, 0, 0, 2, 1, 2, 3},
	} {
		if _, err := DecodeBatch(nil, b); !errors.Is(err, ErrMalformedBatch) {
			t.Errorf("%s: err = %v, want ErrMalformedBatch", name, err)
		}
		if _, err := CheckBatch(b); !errors.Is(err, ErrMalformedBatch) {
			t.Errorf("%s: CheckBatch err = %v, want ErrMalformedBatch", name, err)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, []Record{{Value: []byte("a")}, {Key: []byte("k"), HasKey: true, HasTime: true, Time: 7}}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add(AppendBatch(nil, []Record{{Value: []byte("h"), Headers: []Header{{Key: []byte("a"), Value: []byte("b")}}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(nil, b)
		// CheckBatch accepts exactly what DecodeBatch accepts.
		if n, cerr := CheckBatch(b); (cerr == nil) != (err == nil) || (err == nil && n != len(recs)) {
			t.Fatalf("CheckBatch = %d, %v; DecodeBatch = %d records, %v", n, cerr, len(recs), err)
		}
		if err != nil {
			return
		}
		// Anything accepted re-encodes to exactly the same bytes.
		if again := AppendBatch(nil, recs); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding changed the batch: %x -> %x", b, again)
		}
	})
}

// BenchmarkIntoGuest compares the host's two ways of putting a batch of
// 1,024 text lines (about 48 bytes each, as the word count's) into guest
// memory: encoding records (AppendBatch, what wasmhost's Process does) and
// checking and copying bytes already encoded (CheckBatch and copy, what
// ProcessEncoded does with a text source's or the exchange's batch).
func BenchmarkIntoGuest(b *testing.B) {
	recs := make([]Record, 1024)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{'a' + byte(i%26)}, 40+i%17)
	}
	enc := AppendBatch(nil, recs)
	view := make([]byte, len(enc))
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			size := 4
			for i := range recs {
				size += RecordSize(&recs[i])
			}
			if len(AppendBatch(view[:0], recs)) != size {
				b.Fatal("size")
			}
		}
	})
	b.Run("check-copy", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			if _, err := CheckBatch(enc); err != nil {
				b.Fatal(err)
			}
			copy(view, enc)
		}
	})
}
