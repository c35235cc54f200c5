package wasmhost

import (
	"errors"
	"fmt"
)

// maxLocals bounds the locals of one function (the limit V8 and others use).
const maxLocals = 50000

// checkStructure walks every section of a module and checks that each
// vector's declared count fits in the bytes that remain of its section.
//
// wazero's decoder allocates a vector's storage from its declared count
// before reading the elements, so without this a module of a few bytes
// declaring 2^32 imports or locals makes the host allocate gigabytes (found
// by FuzzValidate). With it, what the decoder allocates is proportional to
// the module's size. Function bodies are checked by instrumentCode.
func checkStructure(wasm []byte) error {
	r := &reader{b: wasm[8:]}
	for len(r.b) > 0 {
		id := r.byte()
		body := r.bytes(r.u32())
		if r.err != nil {
			return fmt.Errorf("section %d: %w", id, r.err)
		}
		s := &reader{b: body}
		var err error
		switch id {
		case 0:
			err = checkCustom(s)
		case 1:
			err = eachOf(s, func() {
				if s.byte() != 0x60 {
					s.fail("function type does not start with 0x60")
				}
				s.bytes(s.u32()) // params
				s.bytes(s.u32()) // results
			})
		case 2:
			_, err = parseImportSection(body)
			if err == nil {
				err = countFits(body)
			}
		case 3:
			err = eachOf(s, func() { s.u32() })
		case 4:
			err = eachOf(s, func() { s.byte(); s.limits() })
		case 5:
			err = eachOf(s, func() { s.limits() })
		case 6:
			err = eachOf(s, func() { s.byte(); s.byte(); s.constExpr() })
		case 7:
			err = eachOf(s, func() { s.bytes(s.u32()); s.byte(); s.u32() })
		case 8, 12:
			s.u32()
			err = s.err
		case 9:
			err = eachOf(s, func() { elementSegment(s) })
		case 10:
			err = eachOf(s, func() { s.bytes(s.u32()) }) // bodies: instrumentCode
		case 11:
			err = eachOf(s, func() {
				switch mode := s.u32(); mode {
				case 0:
					s.constExpr()
				case 1:
				case 2:
					s.u32()
					s.constExpr()
				default:
					s.fail(fmt.Sprintf("data segment mode %d", mode))
				}
				s.bytes(s.u32())
			})
		case 13:
			err = eachOf(s, func() { s.byte(); s.u32() })
		default:
			err = fmt.Errorf("unknown section id %d", id)
		}
		if err != nil {
			return fmt.Errorf("section %d: %w", id, err)
		}
	}
	return nil
}

func (r *reader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
}

// eachOf reads a vector whose count must fit the bytes left, calling elem
// per element.
func eachOf(r *reader, elem func()) error {
	n := r.u32()
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

func countFits(body []byte) error {
	r := &reader{b: body}
	if n := r.u32(); r.err == nil && uint64(n) > uint64(len(r.b)) {
		return fmt.Errorf("vector of %d elements in %d bytes", n, len(r.b))
	}
	return r.err
}

// constExpr skips a constant expression up to its end opcode.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return
		}
		if err := skipImmediates(r, op, 1<<32-1); err != nil {
			return
		}
	}
}

func elementSegment(r *reader) {
	mode := r.u32()
	if r.err != nil {
		return
	}
	if mode > 7 {
		r.fail(fmt.Sprintf("element segment mode %d", mode))
		return
	}
	if mode == 2 || mode == 6 {
		r.u32() // table index
	}
	if mode&1 == 0 {
		r.constExpr() // offset
	}
	if mode&3 != 0 {
		r.byte() // elemkind or reftype
	}
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("element vector of %d in %d bytes", n, len(r.b)))
		return
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		if mode&4 != 0 {
			r.constExpr()
		} else {
			r.u32()
		}
	}
}

// checkCustom checks the one custom section wazero decodes, "name".
func checkCustom(r *reader) error {
	name := string(r.bytes(r.u32()))
	if r.err != nil || name != "name" {
		return r.err
	}
	for len(r.b) > 0 && r.err == nil {
		id := r.byte()
		sub := &reader{b: r.bytes(r.u32())}
		if r.err != nil {
			break
		}
		switch id {
		case 1: // function names
			if err := eachOf(sub, func() { sub.u32(); sub.bytes(sub.u32()) }); err != nil {
				return fmt.Errorf("name section: %w", err)
			}
		case 2: // local names
			if err := eachOf(sub, func() {
				sub.u32()
				n := sub.u32()
				if sub.err == nil && uint64(n) > uint64(len(sub.b)) {
					sub.fail("local names do not fit")
				}
				for i := uint32(0); i < n && sub.err == nil; i++ {
					sub.u32()
					sub.bytes(sub.u32())
				}
			}); err != nil {
				return fmt.Errorf("name section: %w", err)
			}
		}
	}
	return r.err
}
