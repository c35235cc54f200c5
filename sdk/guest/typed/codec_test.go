package typed

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

type point struct {
	X, Y int64
	Name string
	Tags []string
	On   bool
}

func pointCodec() Codec[point] {
	return Struct(
		FieldOf("x", Int64(), func(p *point) *int64 { return &p.X }),
		FieldOf("y", Varint(), func(p *point) *int64 { return &p.Y }),
		FieldOf("name", String(), func(p *point) *string { return &p.Name }),
		FieldOf("tags", Slice(String()), func(p *point) *[]string { return &p.Tags }),
		FieldOf("on", Bool(), func(p *point) *bool { return &p.On }),
	)
}

func roundTrip[T any](t *testing.T, c Codec[T], vs ...T) {
	t.Helper()
	for _, v := range vs {
		prefix := []byte("prefix")
		b := c.Append(bytes.Clone(prefix), v)
		if !bytes.HasPrefix(b, prefix) {
			t.Fatalf("%T: Append(%v) overwrote the caller's bytes", c, v)
		}
		got, err := c.Decode(b[len(prefix):])
		if err != nil {
			t.Fatalf("%T: decode %v: %v", c, v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%T: round trip of %#v gave %#v", c, v, got)
		}
	}
}

func TestCodecsRoundTrip(t *testing.T) {
	roundTrip(t, Int64(), 0, 1, -1, math.MaxInt64, math.MinInt64)
	roundTrip(t, Uint64(), 0, math.MaxUint64)
	roundTrip(t, Int32(), 0, math.MinInt32, math.MaxInt32)
	roundTrip(t, Uint32(), 0, math.MaxUint32)
	roundTrip(t, Int(), 0, -7, math.MaxInt)
	roundTrip(t, Varint(), 0, 63, -64, 1<<40, math.MinInt64)
	roundTrip(t, Float64(), 0, -1.5, math.Inf(1), math.SmallestNonzeroFloat64)
	roundTrip(t, Bool(), true, false)
	roundTrip(t, String(), "", "word", strings.Repeat("ü", 300))
	roundTrip(t, Bytes(), []byte{}, []byte{0, 1, 2})
	roundTrip(t, Pair(String(), Int64()), Tuple2[string, int64]{"the", 3}, Tuple2[string, int64]{})
	roundTrip(t, Pair(Int64(), String()), Tuple2[int64, string]{3, strings.Repeat("x", 200)})
	roundTrip(t, Triple(String(), String(), Float64()), Tuple3[string, string, float64]{"a", "", 2.5})
	roundTrip(t, KeyValue(String(), Slice(Int32())), KV[string, []int32]{"k", []int32{1, 2, 3}})
	roundTrip(t, Slice(Pair(String(), Bool())), []Tuple2[string, bool]{{"a", true}, {strings.Repeat("long", 100), false}})
	roundTrip(t, pointCodec(), point{X: 1, Y: -2, Name: "p", Tags: []string{"a", "bb"}, On: true}, point{Tags: []string{}})
	roundTrip(t, JSON[point](), point{X: 1, Name: "j", Tags: []string{"t"}})
	roundTrip(t, Funcs[int]{
		AppendFunc: func(dst []byte, v int) []byte { return append(dst, byte(v)) },
		DecodeFunc: func(b []byte) (int, error) { return int(b[0]), nil },
	}, 7)
}

// A field length that needs more than one varint byte moves the field:
// the boundaries around 128 bytes.
func TestFieldLengthBoundaries(t *testing.T) {
	c := Pair(String(), String())
	for _, n := range []int{0, 1, 126, 127, 128, 129, 16383, 16384, 1 << 20} {
		roundTrip(t, c, Tuple2[string, string]{strings.Repeat("a", n), strings.Repeat("b", n+1)})
	}
}

// Strings decode without a copy: they alias the encoding.
func TestStringsAliasTheirBytes(t *testing.T) {
	b := []byte("alias")
	s, _ := String().Decode(b)
	b[0] = 'A'
	if s != "Alias" {
		t.Errorf("decoded string %q does not alias its bytes", s)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"short int64", decodeErr(Int64(), []byte{1, 2}), "int64: 2 bytes, want 8"},
		{"long int32", decodeErr(Int32(), make([]byte, 5)), "int32: 5 bytes, want 4"},
		{"bool 2", decodeErr(Bool(), []byte{2}), "bool: want one byte 0 or 1"},
		{"varint trailing", decodeErr(Varint(), []byte{1, 1}), "varint: 2 bytes are not one varint"},
		{"pair length overruns", decodeErr(Pair(String(), Int64()), []byte{9, 'a'}), "tuple field 0: length 9 overruns the 1 bytes left"},
		{"pair trailing", decodeErr(Pair(Int64(), Int64()), make([]byte, 17)), "tuple: 1 trailing bytes"},
		{"pair short fixed", decodeErr(Pair(Int64(), Int64()), make([]byte, 12)), "tuple field 1: 4 bytes left, want 8"},
		{"slice count lies", decodeErr(Slice(Int64()), []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), "slice: 4294967295 elements in 0 bytes"},
		{"struct field", decodeErr(pointCodec(), append(make([]byte, 8), 1, 1)), "struct typed.point: malformed encoding: field name: bad length"},
		{"json", decodeErr(JSON[point](), []byte("{")), "json:"},
		{"empty uvarint", decodeErr(Pair(String(), String()), nil), "tuple field 0: bad length"},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrMalformed) || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrMalformed and %q", tt.name, tt.err, tt.want)
		}
	}
}

func decodeErr[T any](c Codec[T], b []byte) error {
	_, err := c.Decode(b)
	return err
}

// FuzzStructDecode: the binary codecs never panic on malformed input; they
// return ErrMalformed, and what decodes encodes back to the same bytes.
func FuzzStructDecode(f *testing.F) {
	c := pointCodec()
	f.Add(c.Append(nil, point{X: 1, Y: 2, Name: "n", Tags: []string{"a"}, On: true}))
	f.Add([]byte{})
	f.Add(make([]byte, 9))
	nested := Slice(Pair(String(), Triple(Int32(), Bytes(), Varint())))
	f.Add(nested.Append(nil, []Tuple2[string, Tuple3[int32, []byte, int64]]{{"k", Tuple3[int32, []byte, int64]{1, []byte{2}, 3}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := c.Decode(b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("struct: %v does not wrap ErrMalformed", err)
			}
		} else if again := c.Append(nil, p); !bytes.Equal(again, b) {
			// Varints have one encoding, and so does every field here.
			t.Fatalf("struct: %x decodes to %+v, which encodes to %x", b, p, again)
		}
		if _, err := nested.Decode(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("nested: %v does not wrap ErrMalformed", err)
		}
	})
}

func BenchmarkStructCodec(b *testing.B) {
	c := pointCodec()
	p := point{X: 1, Y: 2, Name: "name", Tags: []string{"a", "b"}, On: true}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = c.Append(buf[:0], p)
		if _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
