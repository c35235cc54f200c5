package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
)

// TestProcessEncodedIsProcess: an encoded batch reaches the guest as the
// same records as Process's (the identity operator returns them
// unchanged), a malformed one is refused before the guest runs and leaves
// the instance usable, and an empty one calls nothing.
func TestProcessEncodedIsProcess(t *testing.T) {
	ctx := context.Background()
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{})
	recs := []abi.Record{
		{Value: []byte("plain")},
		{Key: []byte("k"), HasKey: true, Value: []byte("keyed")},
		{Key: []byte{}, HasKey: true, Value: nil},
		{Time: -5, HasTime: true, Value: []byte{0, 1, 2, 255}},
		{Key: []byte("both"), HasKey: true, Time: 1 << 40, HasTime: true, Value: bytes.Repeat([]byte("x"), 100000)},
	}
	want := abi.AppendBatch(nil, recs)
	for round := 0; round < 3; round++ {
		tt.out = nil
		if err := tt.in.ProcessEncoded(ctx, want); err != nil {
			t.Fatal(err)
		}
		if got := abi.AppendBatch(nil, tt.out); !bytes.Equal(got, want) {
			t.Fatalf("round %d: output batch differs from input (%d vs %d bytes)", round, len(got), len(want))
		}
	}
	calls := tt.in.callStats().Calls
	for name, b := range map[string][]byte{
		"truncated": want[:len(want)-1],
		"trailing":  append(append([]byte(nil), want...), 0),
		"flags":     {1, 0, 0, 0, 4, 0, 0, 0, 0},
	} {
		if err := tt.in.ProcessEncoded(ctx, b); !errors.Is(err, abi.ErrMalformedBatch) {
			t.Errorf("%s: %v, want ErrMalformedBatch", name, err)
		}
	}
	if err := tt.in.ProcessEncoded(ctx, []byte{0, 0, 0, 0}); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	if got := tt.in.callStats().Calls; got != calls {
		t.Errorf("the refused and empty batches made %d calls into the guest", got-calls)
	}
	tt.out = nil
	if err := tt.in.ProcessEncoded(ctx, want); err != nil {
		t.Fatalf("after the refused batches: %v", err)
	}
	if len(tt.out) != len(recs) {
		t.Fatalf("after the refused batches: %d records out, want %d", len(tt.out), len(recs))
	}
}
