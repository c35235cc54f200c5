package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record is one element of a stream. Key and Value alias the buffer they were
// decoded from; copy them to keep them past that buffer's lifetime.
type Record struct {
	Key     []byte // valid when HasKey
	Value   []byte
	Time    int64 // milliseconds since the Unix epoch; valid when HasTime
	HasKey  bool
	HasTime bool
	// Headers are the record's headers (a Kafka record's, say), in order;
	// nil for none. They alias the buffer too.
	Headers []Header
}

// Header is one of a record's headers: a key and a value, both bytes (a
// key may repeat).
type Header struct{ Key, Value []byte }

const (
	flagKey     = 1 << 0
	flagTime    = 1 << 1
	flagHeaders = 1 << 2
	knownFlags  = flagKey | flagTime | flagHeaders
)

// ErrMalformedBatch is returned by DecodeBatch for bytes that are not a batch.
var ErrMalformedBatch = errors.New("malformed batch")

// AppendBatch appends the encoding of recs to dst and returns the result.
//
// A batch is: u32 record count, then per record: u8 flags (bit 0 key present,
// bit 1 time present, bit 2 headers present), [u32 key length, key bytes],
// [i64 time], [u32 header count, per header u32 key length, key bytes, u32
// value length, value bytes], u32 value length, value bytes. All integers
// are little-endian. A record with Headers of length 0 has no bit 2.
func AppendBatch(dst []byte, recs []Record) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(recs)))
	for i := range recs {
		dst = AppendRecord(dst, &recs[i])
	}
	return dst
}

// AppendRecord appends one record's encoding (without the batch header).
func AppendRecord(dst []byte, r *Record) []byte {
	var flags byte
	if r.HasKey {
		flags |= flagKey
	}
	if r.HasTime {
		flags |= flagTime
	}
	if len(r.Headers) > 0 {
		flags |= flagHeaders
	}
	dst = append(dst, flags)
	if r.HasKey {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Key)))
		dst = append(dst, r.Key...)
	}
	if r.HasTime {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.Time))
	}
	if len(r.Headers) > 0 {
		dst = AppendHeaders(dst, r.Headers)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Value)))
	return append(dst, r.Value...)
}

// AppendHeaders appends the encoding of a record's headers (bit 2's block)
// to dst.
func AppendHeaders(dst []byte, hs []Header) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(hs)))
	for _, h := range hs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	return dst
}

// HeadersSize is the number of bytes AppendHeaders adds for hs.
func HeadersSize(hs []Header) int {
	n := 4
	for _, h := range hs {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// DecodeHeaders decodes the headers block at the start of b (bit 2's),
// appending to dst, and returns the headers and the bytes after the block.
// The headers alias b. A block of zero headers is refused: bit 2 means at
// least one.
func DecodeHeaders(dst []Header, b []byte) ([]Header, []byte, error) {
	rest, err := scanHeaders(b, func(h Header) { dst = append(dst, h) })
	return dst, rest, err
}

// scanHeaders reads the headers block at the start of b, passing each
// header to each (when not nil), and returns the bytes after it.
func scanHeaders(b []byte, each func(Header)) ([]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("headers: truncated count")
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	switch {
	case n == 0:
		return nil, errors.New("headers: bit 2 with no header")
	case uint64(n)*8 > uint64(len(b)):
		return nil, fmt.Errorf("headers: count %d does not fit in %d bytes", n, len(b))
	}
	for i := uint32(0); i < n; i++ {
		var h Header
		var err error
		if h.Key, b, err = lengthPrefixed(b); err != nil {
			return nil, fmt.Errorf("header %d key: %v", i, err)
		}
		if h.Value, b, err = lengthPrefixed(b); err != nil {
			return nil, fmt.Errorf("header %d value: %v", i, err)
		}
		if each != nil {
			each(h)
		}
	}
	return b, nil
}

// RecordSize is the number of bytes AppendRecord adds for r.
func RecordSize(r *Record) int {
	n := 1 + 4 + len(r.Value)
	if r.HasKey {
		n += 4 + len(r.Key)
	}
	if r.HasTime {
		n += 8
	}
	if len(r.Headers) > 0 {
		n += HeadersSize(r.Headers)
	}
	return n
}

// DecodeBatch appends the records of the batch b to dst and returns it. The
// records alias b. It fails with ErrMalformedBatch if b is truncated, has
// trailing bytes, unknown flags, or lengths that do not fit.
func DecodeBatch(dst []Record, b []byte) ([]Record, error) {
	if len(b) < 4 {
		return dst, fmt.Errorf("%w: %d bytes, shorter than the 4-byte count", ErrMalformedBatch, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	// Each record takes at least 5 bytes, so a count that cannot fit is
	// rejected before anything is allocated for it.
	if uint64(n)*5 > uint64(len(b)) {
		return dst, fmt.Errorf("%w: count %d does not fit in %d bytes", ErrMalformedBatch, n, len(b))
	}
	for i := uint32(0); i < n; i++ {
		var r Record
		var err error
		if r, b, err = decodeRecord(b); err != nil {
			return dst, fmt.Errorf("%w: record %d: %v", ErrMalformedBatch, i, err)
		}
		dst = append(dst, r)
	}
	if len(b) != 0 {
		return dst, fmt.Errorf("%w: %d trailing bytes", ErrMalformedBatch, len(b))
	}
	return dst, nil
}

// CheckBatch reports whether b is a well-formed batch, accepting and
// rejecting exactly what DecodeBatch does (FuzzDecodeBatch), without
// building the records; it returns the record count. It reads only the
// records' headers, so it costs a few nanoseconds a record.
func CheckBatch(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: %d bytes, shorter than the 4-byte count", ErrMalformedBatch, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n)*5 > uint64(len(b)) {
		return 0, fmt.Errorf("%w: count %d does not fit in %d bytes", ErrMalformedBatch, n, len(b))
	}
	for i := uint32(0); i < n; i++ {
		if len(b) < 1 {
			return 0, checkErr(i, "truncated flags")
		}
		flags := b[0]
		b = b[1:]
		if flags&^knownFlags != 0 {
			return 0, checkErr(i, fmt.Sprintf("unknown flags %#x", flags))
		}
		if flags&flagKey != 0 {
			if len(b) < 4 {
				return 0, checkErr(i, "key: truncated length")
			}
			k := uint64(binary.LittleEndian.Uint32(b))
			if b = b[4:]; k > uint64(len(b)) {
				return 0, checkErr(i, "key: length exceeds the bytes left")
			}
			b = b[k:]
		}
		if flags&flagTime != 0 {
			if len(b) < 8 {
				return 0, checkErr(i, "truncated time")
			}
			b = b[8:]
		}
		if flags&flagHeaders != 0 {
			var err error
			if b, err = scanHeaders(b, nil); err != nil {
				return 0, checkErr(i, err.Error())
			}
		}
		if len(b) < 4 {
			return 0, checkErr(i, "value: truncated length")
		}
		k := uint64(binary.LittleEndian.Uint32(b))
		if b = b[4:]; k > uint64(len(b)) {
			return 0, checkErr(i, "value: length exceeds the bytes left")
		}
		b = b[k:]
	}
	if len(b) != 0 {
		return 0, fmt.Errorf("%w: %d trailing bytes", ErrMalformedBatch, len(b))
	}
	return int(n), nil
}

func checkErr(i uint32, msg string) error {
	return fmt.Errorf("%w: record %d: %s", ErrMalformedBatch, i, msg)
}

func decodeRecord(b []byte) (Record, []byte, error) {
	var r Record
	if len(b) < 1 {
		return r, nil, errors.New("truncated flags")
	}
	flags := b[0]
	b = b[1:]
	if flags&^knownFlags != 0 {
		return r, nil, fmt.Errorf("unknown flags %#x", flags)
	}
	if flags&flagKey != 0 {
		var err error
		if r.Key, b, err = lengthPrefixed(b); err != nil {
			return r, nil, fmt.Errorf("key: %v", err)
		}
		r.HasKey = true
	}
	if flags&flagTime != 0 {
		if len(b) < 8 {
			return r, nil, errors.New("truncated time")
		}
		r.Time = int64(binary.LittleEndian.Uint64(b))
		r.HasTime = true
		b = b[8:]
	}
	var err error
	if flags&flagHeaders != 0 {
		if r.Headers, b, err = DecodeHeaders(nil, b); err != nil {
			return r, nil, err
		}
	}
	if r.Value, b, err = lengthPrefixed(b); err != nil {
		return r, nil, fmt.Errorf("value: %v", err)
	}
	return r, b, nil
}

func lengthPrefixed(b []byte) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errors.New("truncated length")
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return nil, nil, fmt.Errorf("length %d exceeds the %d bytes left", n, len(b))
	}
	return b[:n:n], b[n:], nil
}
