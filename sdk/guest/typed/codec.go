package typed

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Codec turns values of type T into bytes and back: how a stream's elements
// travel between operators and tasks, and how typed state is stored.
//
// Append appends the encoding of v to dst and returns the extended slice,
// so one buffer serves every record. Decode decodes a whole encoding: b is
// exactly what Append produced, never more.
//
// # Notes
//
// Decode may return values that alias b (the built-in String and Bytes
// codecs do, to save a copy): such a value is valid only as long as b is,
// which for a record handed to your function is the call. Copy (e.g.
// strings.Clone) what you keep beyond it.
//
// # Errors
//
// Decode returns an error, never panics, on malformed input: it wraps
// ErrMalformed and says what was wrong.
type Codec[T any] interface {
	Append(dst []byte, v T) []byte
	Decode(b []byte) (T, error)
}

// ErrMalformed is what every built-in codec's Decode wraps when the bytes
// are not an encoding it produced.
var ErrMalformed = errors.New("malformed encoding")

// fixedSize is implemented by codecs whose encoding always has the same
// length: tuples and structs need no length prefix for them.
type fixedSize interface{ fixedSize() int }

// viewer is implemented by codecs whose encoding of v is v's own bytes
// (String and Bytes): an operator emits them without a copy.
type viewer[T any] interface{ view(v T) []byte }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

func wantLen(what string, b []byte, n int) error {
	if len(b) != n {
		return malformed("%s: %d bytes, want %d", what, len(b), n)
	}
	return nil
}

type int64Codec struct{}

// Int64 is the codec of int64: 8 bytes, little-endian, the encoding of the
// byte-level SDK's guest.Int64 and guest.AsInt64, so a typed job reads the
// state a byte-level one wrote.
func Int64() Codec[int64] { return int64Codec{} }

func (int64Codec) Append(dst []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(v))
}
func (int64Codec) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, wantLen("int64", b, 8)
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}
func (int64Codec) fixedSize() int { return 8 }

type uint64Codec struct{}

// Uint64 is the codec of uint64: 8 bytes, little-endian.
func Uint64() Codec[uint64] { return uint64Codec{} }

func (uint64Codec) Append(dst []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, v)
}
func (uint64Codec) Decode(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, wantLen("uint64", b, 8)
	}
	return binary.LittleEndian.Uint64(b), nil
}
func (uint64Codec) fixedSize() int { return 8 }

type int32Codec struct{}

// Int32 is the codec of int32: 4 bytes, little-endian.
func Int32() Codec[int32] { return int32Codec{} }

func (int32Codec) Append(dst []byte, v int32) []byte {
	return binary.LittleEndian.AppendUint32(dst, uint32(v))
}
func (int32Codec) Decode(b []byte) (int32, error) {
	if len(b) != 4 {
		return 0, wantLen("int32", b, 4)
	}
	return int32(binary.LittleEndian.Uint32(b)), nil
}
func (int32Codec) fixedSize() int { return 4 }

type uint32Codec struct{}

// Uint32 is the codec of uint32: 4 bytes, little-endian.
func Uint32() Codec[uint32] { return uint32Codec{} }

func (uint32Codec) Append(dst []byte, v uint32) []byte {
	return binary.LittleEndian.AppendUint32(dst, v)
}
func (uint32Codec) Decode(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, wantLen("uint32", b, 4)
	}
	return binary.LittleEndian.Uint32(b), nil
}
func (uint32Codec) fixedSize() int { return 4 }

type intCodec struct{}

// Int is the codec of int: as Int64, so it is the same on every platform.
func Int() Codec[int] { return intCodec{} }

func (intCodec) Append(dst []byte, v int) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(int64(v)))
}
func (intCodec) Decode(b []byte) (int, error) {
	if len(b) != 8 {
		return 0, wantLen("int", b, 8)
	}
	n := int64(binary.LittleEndian.Uint64(b))
	if int64(int(n)) != n {
		return 0, malformed("int: %d does not fit this platform's int", n)
	}
	return int(n), nil
}
func (intCodec) fixedSize() int { return 8 }

type varintCodec struct{}

// Varint is a compact codec of int64: zig-zag varint, 1 byte for -64..63
// and at most 10. Use it where most values are small (counts in keys or in
// big state); Int64 is faster to decode.
func Varint() Codec[int64] { return varintCodec{} }

func (varintCodec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }
func (varintCodec) Decode(b []byte) (int64, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, malformed("varint: %d bytes are not one varint", len(b))
	}
	return v, nil
}

type float64Codec struct{}

// Float64 is the codec of float64: its IEEE 754 bits, 8 bytes little-endian.
func Float64() Codec[float64] { return float64Codec{} }

func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
func (float64Codec) Decode(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, wantLen("float64", b, 8)
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
}
func (float64Codec) fixedSize() int { return 8 }

type boolCodec struct{}

// Bool is the codec of bool: one byte, 0 or 1.
func Bool() Codec[bool] { return boolCodec{} }

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}
func (boolCodec) Decode(b []byte) (bool, error) {
	if len(b) != 1 || b[0] > 1 {
		return false, malformed("bool: want one byte 0 or 1, got %d bytes", len(b))
	}
	return b[0] == 1, nil
}
func (boolCodec) fixedSize() int { return 1 }

type stringCodec struct{}

// String is the codec of string: its bytes as they are, so a stream of
// strings is a stream of text lines for the host's text source and its
// collect and file sinks.
//
// # Notes
//
// Decode returns a string that aliases b, without a copy: a string from a
// record is valid during your function's call only. strings.Clone it to keep
// it (a Reduce's or a state's accumulator is copied by the SDK for you).
func String() Codec[string] { return stringCodec{} }

func (stringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringCodec) Decode(b []byte) (string, error)    { return aliasString(b), nil }
func (stringCodec) view(v string) []byte {
	return unsafe.Slice(unsafe.StringData(v), len(v))
}

// aliasString is string(b) without the copy: the string shares b's memory.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

type bytesCodec struct{}

// Bytes is the codec of []byte: the bytes as they are.
//
// # Notes
//
// Decode returns b itself: valid during the call only, like a string.
func Bytes() Codec[[]byte] { return bytesCodec{} }

func (bytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (bytesCodec) Decode(b []byte) ([]byte, error)    { return b[:len(b):len(b)], nil }
func (bytesCodec) view(v []byte) []byte               { return v }

type jsonCodec[T any] struct{}

// JSON is a codec of any T through encoding/json: readable records (a
// stream of JSON values collects as JSON lines) at the cost of speed;
// reflection is slow in Go's Wasm code, so prefer Struct or your own codec
// on hot paths.
//
// # Notes
//
// Append panics if encoding/json cannot encode v (a channel, a cycle): a
// programming error, which fails the task with the panic's message.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

func (jsonCodec[T]) Append(dst []byte, v T) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("typed.JSON: encode %T: %v", v, err))
	}
	return append(dst, b...)
}
func (jsonCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%w: json: %v", ErrMalformed, err)
	}
	return v, nil
}

// Funcs is a Codec made of two functions, for a codec written by hand
// without a type of its own.
type Funcs[T any] struct {
	AppendFunc func(dst []byte, v T) []byte
	DecodeFunc func(b []byte) (T, error)
}

// Append calls AppendFunc.
func (f Funcs[T]) Append(dst []byte, v T) []byte { return f.AppendFunc(dst, v) }

// Decode calls DecodeFunc.
//
// # Errors
//
// Those of DecodeFunc.
func (f Funcs[T]) Decode(b []byte) (T, error) { return f.DecodeFunc(b) }

// appendField appends v's encoding as a part of a composite encoding: as it
// is when c's encoding has a fixed size, else after its length as a
// uvarint.
func appendField[T any](dst []byte, c Codec[T], v T) []byte {
	if _, ok := c.(fixedSize); ok {
		return c.Append(dst, v)
	}
	// Reserve one byte for the length (most fields are shorter than 128
	// bytes) and move the field only when its length needs more.
	at := len(dst)
	dst = c.Append(append(dst, 0), v)
	n := len(dst) - at - 1
	if n < 0x80 {
		dst[at] = byte(n)
		return dst
	}
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	dst = append(dst, l[:k-1]...)
	copy(dst[at+k:], dst[at+1:at+1+n])
	copy(dst[at:], l[:k])
	return dst
}

// field splits the next field of a composite encoding off b.
func field[T any](c Codec[T], b []byte, what string) (part, rest []byte, err error) {
	if f, ok := c.(fixedSize); ok {
		n := f.fixedSize()
		if len(b) < n {
			return nil, nil, malformed("%s: %d bytes left, want %d", what, len(b), n)
		}
		return b[:n:n], b[n:], nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, malformed("%s: bad length", what)
	}
	if n > uint64(len(b)-k) {
		return nil, nil, malformed("%s: length %d overruns the %d bytes left", what, n, len(b)-k)
	}
	end := k + int(n)
	return b[k:end:end], b[end:], nil
}

// Tuple2 is a pair of values, Flink's Tuple2.
type Tuple2[A, B any] struct {
	A A
	B B
}

type tuple2Codec[A, B any] struct {
	a Codec[A]
	b Codec[B]
}

// Pair is the codec of Tuple2[A, B]: A then B, each after its length unless
// its codec's encoding has a fixed size.
func Pair[A, B any](a Codec[A], b Codec[B]) Codec[Tuple2[A, B]] { return tuple2Codec[A, B]{a, b} }

func (c tuple2Codec[A, B]) Append(dst []byte, v Tuple2[A, B]) []byte {
	return appendField(appendField(dst, c.a, v.A), c.b, v.B)
}

func (c tuple2Codec[A, B]) Decode(b []byte) (v Tuple2[A, B], err error) {
	pa, rest, err := field(c.a, b, "tuple field 0")
	if err != nil {
		return v, err
	}
	pb, rest, err := field(c.b, rest, "tuple field 1")
	if err != nil {
		return v, err
	}
	if len(rest) != 0 {
		return v, malformed("tuple: %d trailing bytes", len(rest))
	}
	if v.A, err = c.a.Decode(pa); err != nil {
		return v, fmt.Errorf("tuple field 0: %w", err)
	}
	if v.B, err = c.b.Decode(pb); err != nil {
		return v, fmt.Errorf("tuple field 1: %w", err)
	}
	return v, nil
}

// Tuple3 is a triple of values, Flink's Tuple3.
type Tuple3[A, B, C any] struct {
	A A
	B B
	C C
}

type tuple3Codec[A, B, C any] struct {
	a Codec[A]
	b Codec[B]
	c Codec[C]
}

// Triple is the codec of Tuple3[A, B, C], encoded as Pair encodes.
func Triple[A, B, C any](a Codec[A], b Codec[B], c Codec[C]) Codec[Tuple3[A, B, C]] {
	return tuple3Codec[A, B, C]{a, b, c}
}

func (c tuple3Codec[A, B, C]) Append(dst []byte, v Tuple3[A, B, C]) []byte {
	return appendField(appendField(appendField(dst, c.a, v.A), c.b, v.B), c.c, v.C)
}

func (c tuple3Codec[A, B, C]) Decode(b []byte) (v Tuple3[A, B, C], err error) {
	pa, rest, err := field(c.a, b, "tuple field 0")
	if err != nil {
		return v, err
	}
	pb, rest, err := field(c.b, rest, "tuple field 1")
	if err != nil {
		return v, err
	}
	pc, rest, err := field(c.c, rest, "tuple field 2")
	if err != nil {
		return v, err
	}
	if len(rest) != 0 {
		return v, malformed("tuple: %d trailing bytes", len(rest))
	}
	if v.A, err = c.a.Decode(pa); err != nil {
		return v, fmt.Errorf("tuple field 0: %w", err)
	}
	if v.B, err = c.b.Decode(pb); err != nil {
		return v, fmt.Errorf("tuple field 1: %w", err)
	}
	if v.C, err = c.c.Decode(pc); err != nil {
		return v, fmt.Errorf("tuple field 2: %w", err)
	}
	return v, nil
}

// Field is one field of a struct S for Struct: how to encode it and where
// it is. Make one with FieldOf.
type Field[S any] struct {
	name   string
	append func(dst []byte, s *S) []byte
	decode func(b []byte, s *S) (rest []byte, err error)
}

// FieldOf describes field name of S, encoded with c, at the address ref
// returns:
//
//	typed.FieldOf("x", typed.Int64(), func(p *Point) *int64 { return &p.X })
//
// ref is a function rather than a reflect lookup because reflection is
// slow in Go's Wasm code; it inlines to an offset.
func FieldOf[S, F any](name string, c Codec[F], ref func(s *S) *F) Field[S] {
	return Field[S]{
		name: name,
		append: func(dst []byte, s *S) []byte {
			return appendField(dst, c, *ref(s))
		},
		decode: func(b []byte, s *S) ([]byte, error) {
			part, rest, err := field(c, b, "field "+name)
			if err != nil {
				return nil, err
			}
			v, err := c.Decode(part)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
			*ref(s) = v
			return rest, nil
		},
	}
}

type structCodec[S any] struct{ fields []Field[S] }

// Struct is a binary codec of the struct S made of its fields, in order:
// each field's encoding, after its length unless the field's codec has a
// fixed size. No reflection, no allocation beyond what the field codecs
// do. The encoding is positional: changing the fields changes it, so state
// written with one list is not readable with another.
func Struct[S any](fields ...Field[S]) Codec[S] { return structCodec[S]{fields: fields} }

func (c structCodec[S]) Append(dst []byte, v S) []byte {
	for i := range c.fields {
		dst = c.fields[i].append(dst, &v)
	}
	return dst
}

func (c structCodec[S]) Decode(b []byte) (S, error) {
	var v S
	var err error
	for i := range c.fields {
		if b, err = c.fields[i].decode(b, &v); err != nil {
			var zero S
			return zero, fmt.Errorf("struct %T: %w", v, err)
		}
	}
	if len(b) != 0 {
		var zero S
		return zero, malformed("struct %T: %d trailing bytes", v, len(b))
	}
	return v, nil
}

// Slice is the codec of []T: the number of elements as a uvarint, then each
// element as a struct field is encoded.
func Slice[T any](c Codec[T]) Codec[[]T] { return sliceCodec[T]{c} }

type sliceCodec[T any] struct{ c Codec[T] }

func (s sliceCodec[T]) Append(dst []byte, v []T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	for _, e := range v {
		dst = appendField(dst, s.c, e)
	}
	return dst
}

func (s sliceCodec[T]) Decode(b []byte) ([]T, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, malformed("slice: bad length")
	}
	b = b[k:]
	// Every element takes at least one byte (its length, or a fixed size
	// of at least one), so a count above the bytes left is a lie, not a
	// reason to allocate.
	if n > uint64(len(b)) {
		return nil, malformed("slice: %d elements in %d bytes", n, len(b))
	}
	out := make([]T, 0, n)
	for i := uint64(0); i < n; i++ {
		part, rest, err := field(s.c, b, "slice element")
		if err != nil {
			return nil, err
		}
		v, err := s.c.Decode(part)
		if err != nil {
			return nil, fmt.Errorf("slice element %d: %w", i, err)
		}
		out = append(out, v)
		b = rest
	}
	if len(b) != 0 {
		return nil, malformed("slice: %d trailing bytes", len(b))
	}
	return out, nil
}
