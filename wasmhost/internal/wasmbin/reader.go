package wasmbin

import (
	"errors"
	"fmt"
)

// ErrTruncated is the error of a read past the end of its bytes.
var ErrTruncated = errors.New("truncated")

// Reader reads the values of the binary format from a byte slice. The
// first failed read sets Err; every read after it returns a zero value, so
// a caller may read a whole structure and check Err once.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first error a read met, or nil.
func (r *Reader) Err() error { return r.err }

// Len returns how many bytes are left.
func (r *Reader) Len() int { return len(r.b) }

// Rest returns the bytes left, without consuming them.
func (r *Reader) Rest() []byte { return r.b }

// Fail sets Err to msg unless a read failed before.
func (r *Reader) Fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.err = ErrTruncated
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// U32 reads an unsigned LEB128 integer of at most 32 bits.
func (r *Reader) U32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.Byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if v > 0xffffffff {
				r.err = errors.New("LEB128 overflows 32 bits")
			}
			return uint32(v)
		}
	}
	r.err = errors.New("LEB128 too long")
	return 0
}

// SkipLEB128 skips a LEB128 integer of up to 64 bits, signed or not (the
// host never needs the value of an s32, s33 or s64 immediate).
func (r *Reader) SkipLEB128() {
	for i := 0; i < 10; i++ {
		if c := r.Byte(); r.err != nil || c < 0x80 {
			return
		}
	}
	r.err = errors.New("LEB128 too long")
}

// Bytes reads n bytes. The result aliases the Reader's slice.
func (r *Reader) Bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = ErrTruncated
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// Name reads a length-prefixed byte string (a name or a section body).
func (r *Reader) Name() []byte { return r.Bytes(r.U32()) }

// Limits skips the limits of a table or memory: flags, min and an
// optional max.
func (r *Reader) Limits() {
	flags := r.Byte()
	r.SkipLEB128()
	if flags&1 != 0 {
		r.SkipLEB128()
	}
}

// Vector reads a vector whose declared count must fit in the bytes left
// (each element takes at least one byte), calling elem per element, and
// then requires the Reader to be empty: it reads a whole section body.
//
// Checking the count first matters: a decoder that allocates a vector's
// storage from its declared count before reading it (wazero's does) would
// otherwise allocate gigabytes for a few bytes of input.
//
// # Errors
//
// The first failed read, a count that does not fit, or trailing bytes.
func (r *Reader) Vector(elem func()) error {
	n := r.U32()
	if r.err == nil && uint64(n) > uint64(len(r.b)) {
		return fmt.Errorf("vector of %d elements in %d bytes", n, len(r.b))
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		elem()
	}
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return r.err
}

// AppendU32 appends v as unsigned LEB128.
func AppendU32(dst []byte, v uint32) []byte { return AppendU64(dst, uint64(v)) }

// AppendU64 appends v as unsigned LEB128.
func AppendU64(dst []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			dst = append(dst, c|0x80)
			continue
		}
		return append(dst, c)
	}
}
