package validate

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

// MaxLocals is the default bound on the locals of one function (the limit
// V8 and others use).
const MaxLocals = 50000

// MaxTableElements bounds each table of an instance: wazero keeps tables in
// host memory, outside the instance's memory cap, so a table could otherwise
// grow to 2^27 entries (1 GiB). A table may not start above it; the
// runtime has the rewriter cap every table's maximum at it.
const MaxTableElements = 1 << 20

// Structure checks what must hold before wazero's decoder may read wasm,
// in one pass that allocates nothing in proportion to the module: the
// header, that each vector's declared count fits in the bytes that remain
// of its section, every instruction of every function (their opcodes and
// immediates, and that blocks close), and that the module's Shape is within
// lim. It returns the Shape it measured, up to the first excess.
//
// wazero's decoder allocates a vector's storage from its declared count
// before reading the elements, so without this a module of a few bytes
// declaring 2^32 imports or locals makes the host allocate gigabytes (found
// by FuzzValidate). With it, what the decoder allocates is proportional to
// the module's size, and what the compiler spends is bounded by lim (see
// Shape). ctx is checked between functions.
//
// # Errors
//
// The first problem found, naming its section or function; a *LimitError
// when the module is above one of lim; ctx's error when it ends.
func Structure(ctx context.Context, wasm []byte, lim Shape) (Shape, error) {
	var got Shape
	if err := wasmbin.CheckHeader(wasm); err != nil {
		return got, err
	}
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return got, err
	}
	var importedFuncs uint32
	for _, sec := range secs {
		if err := section(sec); err != nil {
			return got, fmt.Errorf("section %d: %w", sec.ID, err)
		}
		var err error
		switch sec.ID {
		case wasmbin.SectionType:
			err = types(sec.Body, lim, &got)
		case wasmbin.SectionImport:
			importedFuncs, err = imports(sec.Body, lim, &got)
		case wasmbin.SectionFunction:
			err = over("Functions", &got.Functions, uint64(count(sec.Body)), lim.Functions, -1, false)
		case wasmbin.SectionTable:
			err = tables(sec.Body, lim, &got)
		case wasmbin.SectionGlobal:
			err = over("Globals", &got.Globals, uint64(count(sec.Body)), lim.Globals, -1, false)
		case wasmbin.SectionExport:
			err = over("Exports", &got.Exports, uint64(count(sec.Body)), lim.Exports, -1, false)
		case wasmbin.SectionElement:
			err = elements(sec.Body, lim, &got)
		case wasmbin.SectionData:
			err = over("DataSegments", &got.DataSegments, uint64(count(sec.Body)), lim.DataSegments, -1, false)
		case wasmbin.SectionCode:
			err = code(ctx, sec.Body, importedFuncs, lim, &got)
		}
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// count reads the element count of a vector section that section checked.
func count(body []byte) uint32 { return wasmbin.NewReader(body).U32() }

func types(body []byte, lim Shape, got *Shape) error {
	r := wasmbin.NewReader(body)
	n := r.U32()
	if err := over("Types", &got.Types, uint64(n), lim.Types, -1, false); err != nil {
		return err
	}
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		r.Byte()
		arity := uint64(len(r.Name())) + uint64(len(r.Name()))
		if err := over("TypeArity", &got.TypeArity, arity, lim.TypeArity, -1, false); err != nil {
			return fmt.Errorf("type %d: %w", i, err)
		}
	}
	return r.Err()
}

func imports(body []byte, lim Shape, got *Shape) (funcs uint32, err error) {
	imps, err := wasmbin.ImportSection(body)
	if err != nil {
		return 0, err
	}
	for _, im := range imps {
		if im.Kind == wasmbin.ImportFunc {
			funcs++
		}
	}
	return funcs, over("Imports", &got.Imports, uint64(len(imps)), lim.Imports, -1, false)
}

func elements(body []byte, lim Shape, got *Shape) error {
	r := wasmbin.NewReader(body)
	n := r.U32()
	if err := over("Elements", &got.Elements, uint64(n), lim.Elements, -1, false); err != nil {
		return err
	}
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		items := elementSegment(r)
		if err := over("ElementItems", &got.ElementItems, uint64(items), lim.ElementItems, -1, true); err != nil {
			return err
		}
	}
	return r.Err()
}

// code decodes every function body of a code section (whose vectors
// section checked): its locals, and each instruction, keeping the control
// depth. Function indexes in errors are the module's, imports first.
func code(ctx context.Context, body []byte, importedFuncs uint32, lim Shape, got *Shape) error {
	if err := over("CodeBytes", &got.CodeBytes, uint64(len(body)), lim.CodeBytes, -1, false); err != nil {
		return err
	}
	r := wasmbin.NewReader(body)
	n := r.U32()
	if err := over("Functions", &got.Functions, uint64(n), lim.Functions, -1, false); err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		fn := int64(importedFuncs) + int64(i)
		b := r.Name()
		if r.Err() != nil {
			return fmt.Errorf("code section: function %d: %w", fn, r.Err())
		}
		if err := over("BodyBytes", &got.BodyBytes, uint64(len(b)), lim.BodyBytes, fn, false); err != nil {
			return err
		}
		if err := function(b, fn, lim, got); err != nil {
			return err
		}
	}
	return nil
}

// function checks one body: locals, then instructions up to the end that
// closes the body, which must be its last byte.
func function(body []byte, fn int64, lim Shape, got *Shape) error {
	r := wasmbin.NewReader(body)
	decls := r.U32()
	var sum uint64
	for j := uint32(0); j < decls && r.Err() == nil; j++ {
		sum += uint64(r.U32())
		r.Byte()
	}
	if r.Err() != nil {
		return fmt.Errorf("function %d: locals: %w", fn, r.Err())
	}
	if err := over("Locals", &got.Locals, sum, lim.Locals, fn, false); err != nil {
		return err
	}
	// loops[i] says whether the block opened at depth i+1 is a loop; it
	// grows only up to lim.Nesting, so it costs at most that many bytes.
	var loops []bool
	depth, loopDepth := uint64(1), uint64(0) // the body's own block
	for depth > 0 {
		op := r.Byte()
		if r.Err() != nil {
			return fmt.Errorf("function %d: %w (a block is not closed)", fn, r.Err())
		}
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			depth++
			if err := over("Nesting", &got.Nesting, depth-1, lim.Nesting, fn, false); err != nil {
				return err
			}
			loops = append(loops, op == 0x03)
			if op == 0x03 {
				loopDepth++
				if err := over("LoopNesting", &got.LoopNesting, loopDepth, lim.LoopNesting, fn, false); err != nil {
					return err
				}
			}
		case wasmbin.OpEnd:
			depth--
			if n := len(loops); n > 0 {
				if loops[n-1] {
					loopDepth--
				}
				loops = loops[:n-1]
			}
			continue
		case 0x0e: // br_table: count its targets before reading them
			n := uint64(wasmbin.NewReader(r.Rest()).U32()) + 1
			if err := over("BrTableTargets", &got.BrTableTargets, n, lim.BrTableTargets, fn, false); err != nil {
				return err
			}
		}
		if err := r.Immediates(op, 1<<32-1); err != nil {
			return fmt.Errorf("function %d: %w", fn, err)
		}
	}
	if r.Len() != 0 {
		return fmt.Errorf("function %d: %d bytes after the end of its body", fn, r.Len())
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

// elementSegment skips one element segment and returns its item count.
func elementSegment(r *wasmbin.Reader) uint32 {
	mode := r.U32()
	if r.Err() != nil {
		return 0
	}
	if mode > 7 {
		r.Fail(fmt.Sprintf("element segment mode %d", mode))
		return 0
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
		return 0
	}
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		if mode&4 != 0 {
			r.ConstExpr()
		} else {
			r.U32()
		}
	}
	return n
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

// tables checks that a table section (whose vectors section checked) has
// few enough tables, and limits the rewriter can cap.
func tables(body []byte, lim Shape, got *Shape) error {
	r := wasmbin.NewReader(body)
	n := r.U32()
	if err := over("Tables", &got.Tables, uint64(n), lim.Tables, -1, false); err != nil {
		return err
	}
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
		if err := over("TableElements", &got.TableElements, uint64(min), min32(lim.TableElements, MaxTableElements), -1, false); err != nil {
			return fmt.Errorf("table %d: %w", i, err)
		}
	}
	if r.Err() != nil {
		return fmt.Errorf("table section: %w", r.Err())
	}
	return nil
}

func min32(a, b uint32) uint32 { return min(a, b) }
