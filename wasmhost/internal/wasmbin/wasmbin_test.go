package wasmbin

import (
	"errors"
	"strings"
	"testing"
)

func TestU32(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		err  string
	}{
		{"\x00", 0, ""},
		{"\x7f", 127, ""},
		{"\x80\x01", 128, ""},
		{"\xff\xff\xff\xff\x0f", 1<<32 - 1, ""},
		{"\xff\xff\xff\xff\x1f", 0, "overflows 32 bits"},
		{"\xff\xff\xff\xff\xff\x00", 0, "too long"},
		{"\x80", 0, "truncated"},
		{"", 0, "truncated"},
	} {
		r := NewReader([]byte(tc.in))
		got := r.U32()
		switch {
		case tc.err == "" && (r.Err() != nil || got != tc.want):
			t.Errorf("U32(%q) = %d, %v; want %d", tc.in, got, r.Err(), tc.want)
		case tc.err != "" && (r.Err() == nil || !strings.Contains(r.Err().Error(), tc.err)):
			t.Errorf("U32(%q) error %v, want %q", tc.in, r.Err(), tc.err)
		}
	}
	for _, v := range []uint32{0, 1, 127, 128, 1 << 14, 1<<32 - 1} {
		if r := NewReader(AppendU32(nil, v)); r.U32() != v || r.Err() != nil || r.Len() != 0 {
			t.Errorf("AppendU32(%d) does not read back", v)
		}
	}
}

func TestReadsAfterAFailureReturnZero(t *testing.T) {
	r := NewReader([]byte{1, 2})
	if r.Bytes(3) != nil || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("Bytes past the end: %v", r.Err())
	}
	if r.Byte() != 0 || r.U32() != 0 || r.Len() != 2 {
		t.Error("a read after a failure consumed bytes or returned a value")
	}
}

func TestCheckHeader(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "no \\0asm magic",
		"(module)":                "no \\0asm magic",
		"\x00asm\x02\x00\x00\x00": "version 2",
		Header:                    "",
	} {
		err := CheckHeader([]byte(in))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckHeader(%q) = %v, want %q", in, err, want)
		}
	}
}

func module(secs ...[]byte) []byte {
	b := []byte(Header)
	for _, s := range secs {
		b = append(b, s...)
	}
	return b
}

func section(id byte, body []byte) []byte {
	return append(AppendU32([]byte{id}, uint32(len(body))), body...)
}

func name(s string) []byte { return append(AppendU32(nil, uint32(len(s))), s...) }

func TestSectionsAndImports(t *testing.T) {
	var imports []byte
	imports = AppendU32(imports, 3)
	imports = append(append(append(imports, name("sluice")...), name("emit")...), byte(ImportFunc), 0)
	imports = append(append(append(imports, name("env")...), name("mem")...), byte(ImportMemory), 1, 1, 2)
	imports = append(append(append(imports, name("env")...), name("g")...), byte(ImportGlobal), 0x7f, 0)
	wasm := module(section(SectionType, []byte{0}), section(SectionImport, imports))
	secs, err := Sections(wasm)
	if err != nil || len(secs) != 2 || secs[0].ID != SectionType || secs[1].ID != SectionImport {
		t.Fatalf("Sections = %v, %v", secs, err)
	}
	ims, err := Imports(wasm)
	if err != nil {
		t.Fatal(err)
	}
	want := []Import{{"sluice", "emit", ImportFunc}, {"env", "mem", ImportMemory}, {"env", "g", ImportGlobal}}
	if len(ims) != len(want) {
		t.Fatalf("Imports = %v", ims)
	}
	for i := range want {
		if ims[i] != want[i] {
			t.Errorf("import %d = %v, want %v", i, ims[i], want[i])
		}
	}
	if _, err := Sections(wasm[:len(wasm)-1]); err == nil || !strings.Contains(err.Error(), "section 2: truncated") {
		t.Errorf("truncated module: %v", err)
	}
	if _, err := ImportSection([]byte{1, 0, 0, 9}); err == nil || !strings.Contains(err.Error(), "unknown import kind 9") {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestImmediates(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte // opcode, immediates, then one trailing byte
		err  string
	}{
		{"nop", []byte{0x01, 0xee}, ""},
		{"loop void", []byte{0x03, 0x40, 0xee}, ""},
		{"block type index", []byte{0x02, 0x81, 0x01, 0xee}, ""},
		{"br_table", []byte{0x0e, 0x02, 0, 1, 2, 0xee}, ""},
		{"i32.load memarg", []byte{0x28, 0x02, 0x10, 0xee}, ""},
		{"i64.const", []byte{0x42, 0xff, 0xff, 0x7f, 0xee}, ""},
		{"f64.const", []byte{0x44, 1, 2, 3, 4, 5, 6, 7, 8, 0xee}, ""},
		{"memory.copy", []byte{0xfc, 10, 0, 0, 0xee}, ""},
		{"v128.const", append([]byte{0xfd, 0x0c}, make([]byte, 17)...), ""},
		{"global.get in range", []byte{0x23, 0x01, 0xee}, ""},
		{"global.get out of range", []byte{0x23, 0x02, 0xee}, "global index 2 out of range"},
		{"unknown", []byte{0xff, 0xee}, "unsupported instruction 0xff"},
		{"unknown 0xfc", []byte{0xfc, 99, 0xee}, "unsupported instruction 0xfc 99"},
		{"truncated", []byte{0x44, 1, 2}, "truncated"},
	} {
		r := NewReader(tc.in)
		err := r.Immediates(r.Byte(), 2)
		switch {
		case tc.err == "" && (err != nil || r.Len() != 1):
			t.Errorf("%s: %v, %d bytes left, want 1", tc.name, err, r.Len())
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestConstExpr(t *testing.T) {
	r := NewReader([]byte{0x41, 0x2a, OpEnd, 0xee})
	if r.ConstExpr(); r.Err() != nil || r.Len() != 1 {
		t.Errorf("i32.const 42 end: %v, %d left", r.Err(), r.Len())
	}
	r = NewReader([]byte{0xff, OpEnd})
	if r.ConstExpr(); r.Err() == nil {
		t.Error("an unknown opcode in a constant expression was accepted")
	}
}

func TestVectorCountMustFit(t *testing.T) {
	r := NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0})
	called := false
	if err := r.Vector(func() { called = true }); err == nil || called {
		t.Errorf("a vector of 2^32-1 in 1 byte: %v (elements read: %v)", err, called)
	}
	r = NewReader([]byte{1, 7, 8})
	if err := r.Vector(func() { r.Byte() }); err == nil || !strings.Contains(err.Error(), "1 trailing bytes") {
		t.Errorf("trailing bytes: %v", err)
	}
}

// FuzzReader walks arbitrary bytes as a module down to every instruction
// of every function body: every path must end in an error or the end of
// the input, never a panic or a loop.
func FuzzReader(f *testing.F) {
	code := AppendU32(nil, 1)
	body := []byte{0, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00, 0x0b}
	code = append(AppendU32(code, uint32(len(body))), body...)
	f.Add(module(section(SectionType, []byte{1, 0x60, 0, 1, 0x7f}), section(SectionCode, code)))
	f.Add(module(section(SectionImport, []byte{1, 1, 'a', 1, 'b', 2, 0, 1})))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if CheckHeader(wasm) != nil {
			return
		}
		secs, err := Sections(wasm)
		if err != nil {
			return
		}
		Imports(wasm)
		for _, s := range secs {
			switch s.ID {
			case SectionImport:
				ImportSection(s.Body)
			case SectionExport:
				ExportsName(s.Body, "x")
			case SectionCustom:
				CustomName(s.Body)
			case SectionCode:
				r := NewReader(s.Body)
				r.Vector(func() {
					fr := NewReader(r.Name())
					for n := fr.U32(); n > 0 && fr.Err() == nil; n-- {
						fr.U32()
						fr.Byte()
					}
					for fr.Err() == nil && fr.Len() > 0 {
						if fr.Immediates(fr.Byte(), 1<<32-1) != nil {
							break
						}
					}
				})
			}
		}
	})
}
