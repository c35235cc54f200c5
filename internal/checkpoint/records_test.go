package checkpoint

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/blob"
)

// TestReleasedThrough: the records of checkpoints up to n, in checkpoint
// order; later ones (their metadata may not exist) are left out.
func TestReleasedThrough(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, _, released, err := ResultKeys("default", "job1")
	if err != nil {
		t.Fatal(err)
	}
	for n, recs := range map[int64][]string{2: {"a", "b"}, 10: {"c"}, 11: {"d"}} {
		var rs [][]byte
		for _, r := range recs {
			rs = append(rs, []byte(r))
		}
		if err := PutRecords(ctx, store, ReleasedKey(released, n), rs); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReleasedThrough(ctx, store, released, 10)
	if err != nil || !slices.EqualFunc(got, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, bytes.Equal) {
		t.Fatalf("released through 10: %q, %v; want a, b, c", got, err)
	}
	if err := store.Put(ctx, ReleasedKey(released, 3), bytes.NewReader([]byte("junk")), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := ReleasedThrough(ctx, store, released, 10); err == nil {
		t.Fatal("a damaged object read without an error")
	}
}

// FuzzDecodeRecords: any records object either decodes to records that
// encode back to the same records, or is refused; nothing panics.
func FuzzDecodeRecords(f *testing.F) {
	f.Add(EncodeRecords([][]byte{[]byte("a"), {}, []byte("bc")}))
	f.Add([]byte("SLREC\x01\x05ab"))
	f.Add([]byte("nope"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeRecords(b)
		if err != nil {
			return
		}
		// A uvarint may be written with more bytes than needed, so compare
		// the records, not the bytes.
		again, err := DecodeRecords(EncodeRecords(recs))
		if err != nil || !slices.EqualFunc(again, recs, bytes.Equal) {
			t.Fatalf("records %q decode again as %q, %v", recs, again, err)
		}
	})
}
