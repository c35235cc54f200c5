package validate

import (
	"fmt"

	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

// MaxLocals bounds the locals of one function (the limit V8 and others use).
const MaxLocals = 50000

// MaxTableElements bounds each table of an instance: wazero keeps tables in
// host memory, outside the instance's memory cap, so a table could otherwise
// grow to 2^27 entries (1 GiB). A table may not start above it; the
// runtime has the rewriter cap every table's maximum at it.
const MaxTableElements = 1 << 20

// Structure checks what must hold before wazero's decoder may read wasm:
// the header, that each vector's declared count fits in the bytes that
// remain of its section, the locals of every function and the initial size
// of every table.
//
// wazero's decoder allocates a vector's storage from its declared count
// before reading the elements, so without this a module of a few bytes
// declaring 2^32 imports or locals makes the host allocate gigabytes (found
// by FuzzValidate). With it, what the decoder allocates is proportional to
// the module's size. Instructions are not checked here: the rewriter
// decodes every one.
//
// # Errors
//
// The first problem found, naming its section.
func Structure(wasm []byte) error {
	if err := wasmbin.CheckHeader(wasm); err != nil {
		return err
	}
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return err
	}
	for _, sec := range secs {
		if err := section(sec); err != nil {
			return fmt.Errorf("section %d: %w", sec.ID, err)
		}
		var err error
		switch sec.ID {
		case wasmbin.SectionTable:
			err = tables(sec.Body)
		case wasmbin.SectionCode:
			err = locals(sec.Body)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// section checks the vectors of one section.
func section(sec wasmbin.Section) error {
	s := wasmbin.NewReader(sec.Body)
	switch sec.ID {
	case wasmbin.SectionCustom:
		return custom(s)
	case wasmbin.SectionType:
		return s.Vector(func() {
			if s.Byte() != 0x60 {
				s.Fail("function type does not start with 0x60")
			}
			s.Name() // params
			s.Name() // results
		})
	case wasmbin.SectionImport:
		if _, err := wasmbin.ImportSection(sec.Body); err != nil {
			return err
		}
		return countFits(sec.Body)
	case wasmbin.SectionFunction:
		return s.Vector(func() { s.U32() })
	case wasmbin.SectionTable:
		return s.Vector(func() { s.Byte(); s.Limits() })
	case wasmbin.SectionMemory:
		return s.Vector(func() { s.Limits() })
	case wasmbin.SectionGlobal:
		return s.Vector(func() { s.Byte(); s.Byte(); s.ConstExpr() })
	case wasmbin.SectionExport:
		return s.Vector(func() { s.Name(); s.Byte(); s.U32() })
	case wasmbin.SectionStart, wasmbin.SectionDataCount:
		s.U32()
		return s.Err()
	case wasmbin.SectionElement:
		return s.Vector(func() { elementSegment(s) })
	case wasmbin.SectionCode:
		return s.Vector(func() { s.Name() }) // bodies: see locals
	case wasmbin.SectionData:
		return s.Vector(func() {
			switch mode := s.U32(); mode {
			case 0:
				s.ConstExpr()
			case 1:
			case 2:
				s.U32()
				s.ConstExpr()
			default:
				s.Fail(fmt.Sprintf("data segment mode %d", mode))
			}
			s.Name()
		})
	case wasmbin.SectionTag:
		return s.Vector(func() { s.Byte(); s.U32() })
	}
	return fmt.Errorf("unknown section id %d", sec.ID)
}

func countFits(body []byte) error {
	r := wasmbin.NewReader(body)
	if n := r.U32(); r.Err() == nil && uint64(n) > uint64(r.Len()) {
		return fmt.Errorf("vector of %d elements in %d bytes", n, r.Len())
	}
	return r.Err()
}

func elementSegment(r *wasmbin.Reader) {
	mode := r.U32()
	if r.Err() != nil {
		return
	}
	if mode > 7 {
		r.Fail(fmt.Sprintf("element segment mode %d", mode))
		return
	}
	if mode == 2 || mode == 6 {
		r.U32() // table index
	}
	if mode&1 == 0 {
		r.ConstExpr() // offset
	}
	if mode&3 != 0 {
		r.Byte() // elemkind or reftype
	}
	n := r.U32()
	if r.Err() == nil && uint64(n) > uint64(r.Len()) {
		r.Fail(fmt.Sprintf("element vector of %d in %d bytes", n, r.Len()))
		return
	}
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		if mode&4 != 0 {
			r.ConstExpr()
		} else {
			r.U32()
		}
	}
}

// custom checks the one custom section wazero decodes, "name".
func custom(r *wasmbin.Reader) error {
	name := string(r.Name())
	if r.Err() != nil || name != "name" {
		return r.Err()
	}
	for r.Len() > 0 && r.Err() == nil {
		id := r.Byte()
		sub := wasmbin.NewReader(r.Name())
		if r.Err() != nil {
			break
		}
		switch id {
		case 1: // function names
			if err := sub.Vector(func() { sub.U32(); sub.Name() }); err != nil {
				return fmt.Errorf("name section: %w", err)
			}
		case 2: // local names
			if err := sub.Vector(func() {
				sub.U32()
				n := sub.U32()
				if sub.Err() == nil && uint64(n) > uint64(sub.Len()) {
					sub.Fail("local names do not fit")
				}
				for i := uint32(0); i < n && sub.Err() == nil; i++ {
					sub.U32()
					sub.Name()
				}
			}); err != nil {
				return fmt.Errorf("name section: %w", err)
			}
		}
	}
	return r.Err()
}

// tables checks that every table of a table section (whose vectors section
// checked) has limits the rewriter can cap.
func tables(body []byte) error {
	r := wasmbin.NewReader(body)
	n := r.U32()
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		r.Byte() // reftype
		flags := r.Byte()
		min := r.U32()
		if flags&1 != 0 {
			r.U32()
		}
		if r.Err() != nil {
			break
		}
		if flags&^1 != 0 {
			return fmt.Errorf("table %d: unsupported limits flags %#x", i, flags)
		}
		if min > MaxTableElements {
			return fmt.Errorf("table %d starts with %d elements, more than %d", i, min, MaxTableElements)
		}
	}
	if r.Err() != nil {
		return fmt.Errorf("table section: %w", r.Err())
	}
	return nil
}

// locals checks the local declarations at the start of every function body
// of a code section (whose vectors section checked).
func locals(body []byte) error {
	r := wasmbin.NewReader(body)
	n := r.U32()
	for i := uint32(0); i < n; i++ {
		fr := wasmbin.NewReader(r.Name())
		if r.Err() != nil {
			return fmt.Errorf("code section: function %d: %w", i, r.Err())
		}
		decls := fr.U32()
		var sum uint64
		for j := uint32(0); j < decls && fr.Err() == nil; j++ {
			sum += uint64(fr.U32())
			fr.Byte()
		}
		if fr.Err() != nil {
			return fmt.Errorf("function %d: locals: %w", i, fr.Err())
		}
		if sum > MaxLocals {
			return fmt.Errorf("function %d has %d locals, more than %d", i, sum, MaxLocals)
		}
	}
	return nil
}
