package wasmbin

import (
	"bytes"
	"errors"
	"fmt"
)

// Header is the Wasm magic and binary version 1 every module starts with.
const Header = "\x00asm\x01\x00\x00\x00"

// Section ids of the binary format.
const (
	SectionCustom    byte = 0
	SectionType      byte = 1
	SectionImport    byte = 2
	SectionFunction  byte = 3
	SectionTable     byte = 4
	SectionMemory    byte = 5
	SectionGlobal    byte = 6
	SectionExport    byte = 7
	SectionStart     byte = 8
	SectionElement   byte = 9
	SectionCode      byte = 10
	SectionData      byte = 11
	SectionDataCount byte = 12
	SectionTag       byte = 13
)

// CheckHeader is the cheap check before anything else: the Wasm magic and
// binary version 1.
//
// # Errors
//
// When wasm does not start with the magic, or declares another version.
func CheckHeader(wasm []byte) error {
	if len(wasm) < len(Header) || !bytes.Equal(wasm[:4], []byte(Header[:4])) {
		return errors.New("not a WebAssembly module (no \\0asm magic)")
	}
	if !bytes.Equal(wasm[4:8], []byte(Header[4:])) {
		return fmt.Errorf("unsupported WebAssembly binary version %d (want 1)", wasm[4])
	}
	return nil
}

// Section is one section of a module; Body aliases the module's bytes.
type Section struct {
	ID   byte
	Body []byte
}

// Sections splits a module whose header CheckHeader accepted into its
// sections, in order. It does not look inside them.
//
// # Errors
//
// When a section's size runs past the end of the module.
func Sections(wasm []byte) ([]Section, error) {
	var secs []Section
	r := NewReader(wasm[len(Header):])
	for r.Len() > 0 {
		id := r.Byte()
		body := r.Name()
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		secs = append(secs, Section{id, body})
	}
	return secs, nil
}

// ImportKind is what an import brings in.
type ImportKind byte

// The kinds of import.
const (
	ImportFunc   ImportKind = 0
	ImportTable  ImportKind = 1
	ImportMemory ImportKind = 2
	ImportGlobal ImportKind = 3
	ImportTag    ImportKind = 4
)

func (k ImportKind) String() string {
	switch k {
	case ImportFunc:
		return "function"
	case ImportTable:
		return "table"
	case ImportMemory:
		return "memory"
	case ImportGlobal:
		return "global"
	case ImportTag:
		return "tag"
	}
	return fmt.Sprintf("kind %d", byte(k))
}

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         ImportKind
}

// Imports lists the import section of a module whose header CheckHeader
// accepted (none when it has no import section).
//
// # Errors
//
// When the sections or the import section do not parse.
func Imports(wasm []byte) ([]Import, error) {
	r := NewReader(wasm[len(Header):])
	for r.err == nil && r.Len() > 0 {
		id := r.Byte()
		body := r.Name()
		if r.err != nil {
			return nil, r.err
		}
		if id == SectionImport {
			return ImportSection(body)
		}
	}
	return nil, r.err
}

// ImportSection parses the body of an import section.
//
// # Errors
//
// When it is truncated or names an unknown kind of import.
func ImportSection(body []byte) ([]Import, error) {
	s := NewReader(body)
	n := s.U32()
	var out []Import
	for i := uint32(0); i < n && s.err == nil; i++ {
		im := Import{Module: string(s.Name()), Name: string(s.Name()), Kind: ImportKind(s.Byte())}
		switch im.Kind {
		case ImportFunc:
			s.U32()
		case ImportTable:
			s.Byte()
			s.Limits()
		case ImportMemory:
			s.Limits()
		case ImportGlobal:
			s.Byte()
			s.Byte()
		case ImportTag:
			s.Byte()
			s.U32()
		default:
			return nil, fmt.Errorf("unknown import kind %d", im.Kind)
		}
		out = append(out, im)
	}
	return out, s.err
}

// CustomName returns the name of a custom section from its body.
func CustomName(body []byte) (string, bool) {
	r := NewReader(body)
	n := r.Name()
	return string(n), r.err == nil
}

// ExportsName reports whether an export section body exports name.
func ExportsName(body []byte, name string) bool {
	r := NewReader(body)
	n := r.U32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if string(r.Name()) == name {
			return true
		}
		r.Byte()
		r.U32()
	}
	return false
}
