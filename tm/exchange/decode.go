package exchange

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/internal/abi"
)

// decodeBatch is abi.DecodeBatch for the receive path: it decodes the batch
// b into dst[:0] in place (no per-record struct copies), about five times
// faster on 100-byte records, which matters at a gigabyte per second. It
// accepts and rejects exactly what abi.DecodeBatch does and returns the
// same records (FuzzDecodeBatchEquivalence); errors wrap
// abi.ErrMalformedBatch.
func decodeBatch(dst []abi.Record, b []byte) ([]abi.Record, error) {
	if len(b) < 4 {
		return dst[:0], fmt.Errorf("%w: %d bytes, shorter than the 4-byte count", abi.ErrMalformedBatch, len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if n*5 > uint64(len(b)) {
		return dst[:0], fmt.Errorf("%w: count %d does not fit in %d bytes", abi.ErrMalformedBatch, n, len(b))
	}
	if uint64(cap(dst)) < n {
		dst = make([]abi.Record, n)
	}
	dst = dst[:n]
	for i := range dst {
		r := &dst[i]
		*r = abi.Record{}
		if len(b) < 1 {
			return dst[:0], malformed(i, "truncated flags")
		}
		flags := b[0]
		b = b[1:]
		if flags&^7 != 0 {
			return dst[:0], malformed(i, fmt.Sprintf("unknown flags %#x", flags))
		}
		if flags&1 != 0 {
			if len(b) < 4 {
				return dst[:0], malformed(i, "key: truncated length")
			}
			k := uint64(binary.LittleEndian.Uint32(b))
			b = b[4:]
			if k > uint64(len(b)) {
				return dst[:0], malformed(i, "key: length exceeds the bytes left")
			}
			r.Key, r.HasKey = b[:k:k], true
			b = b[k:]
		}
		if flags&2 != 0 {
			if len(b) < 8 {
				return dst[:0], malformed(i, "truncated time")
			}
			r.Time, r.HasTime = int64(binary.LittleEndian.Uint64(b)), true
			b = b[8:]
		}
		if flags&4 != 0 {
			var err error
			if r.Headers, b, err = abi.DecodeHeaders(nil, b); err != nil {
				return dst[:0], malformed(i, err.Error())
			}
		}
		if len(b) < 4 {
			return dst[:0], malformed(i, "value: truncated length")
		}
		k := uint64(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if k > uint64(len(b)) {
			return dst[:0], malformed(i, "value: length exceeds the bytes left")
		}
		r.Value = b[:k:k]
		b = b[k:]
	}
	if len(b) != 0 {
		return dst[:0], fmt.Errorf("%w: %d trailing bytes", abi.ErrMalformedBatch, len(b))
	}
	return dst, nil
}

func malformed(i int, msg string) error {
	return fmt.Errorf("%w: record %d: %s", abi.ErrMalformedBatch, i, msg)
}
