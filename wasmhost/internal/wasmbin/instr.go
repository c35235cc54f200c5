package wasmbin

import "fmt"

// Opcodes the host looks at.
const (
	OpLoop byte = 0x03
	OpEnd  byte = 0x0b
)

// Immediates consumes the immediates of opcode op, which the caller has
// just read. A global.get or global.set of an index at or above globals is
// refused: the rewriter passes the module's own count, so no guest
// instruction can name a global the host added.
//
// # Errors
//
// An opcode outside the proposals wazero runs (core 2.0: bulk memory,
// reference types, SIMD, tail calls), a global index out of range, or a
// failed read.
func (r *Reader) Immediates(op byte, globals uint32) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op == 0xd2 || (op >= 0x20 && op <= 0x22) || op == 0x25 || op == 0x26:
		r.U32()
	case op == 0x23 || op == 0x24: // global.get, global.set
		if idx := r.U32(); r.err == nil && idx >= globals {
			return fmt.Errorf("global index %d out of range", idx)
		}
	case op == 0x0e: // br_table
		n := r.U32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.U32()
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.U32()
		r.U32()
	case op == 0x1c: // select t*
		n := r.U32()
		r.Bytes(n)
	case op >= 0x28 && op <= 0x3e:
		r.memarg()
	case op == 0x3f || op == 0x40:
		r.U32()
	case op == 0x41:
		r.SkipLEB128() // s32
	case op == 0x42:
		r.SkipLEB128() // s64
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op == 0xd0: // ref.null t
		r.Byte()
	case op == 0xfc:
		switch sub := r.U32(); {
		case sub <= 7:
		case sub == 8: // memory.init
			r.U32()
			r.U32()
		case sub == 9 || sub == 13 || sub == 15 || sub == 16 || sub == 17:
			r.U32()
		case sub == 10 || sub == 12 || sub == 14: // memory.copy, table.init, table.copy
			r.U32()
			r.U32()
		case sub == 11: // memory.fill
			r.U32()
		default:
			return fmt.Errorf("unsupported instruction 0xfc %d", sub)
		}
	case op == 0xfd:
		switch sub := r.U32(); {
		case sub <= 0x0b || sub == 0x5c || sub == 0x5d:
			r.memarg()
		case sub == 0x0c || sub == 0x0d:
			r.Bytes(16)
		case sub >= 0x15 && sub <= 0x22:
			r.Byte()
		case sub >= 0x54 && sub <= 0x5b:
			r.memarg()
			r.Byte()
		case sub > 0xff:
			return fmt.Errorf("unsupported instruction 0xfd %d", sub)
		}
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
	case op >= 0x45 && op <= 0xc4:
	default:
		return fmt.Errorf("unsupported instruction %#x", op)
	}
	return r.err
}

// ConstExpr skips a constant expression up to and including its end
// opcode; a failure is in Err.
func (r *Reader) ConstExpr() {
	for r.err == nil {
		op := r.Byte()
		if op == OpEnd {
			return
		}
		if err := r.Immediates(op, 1<<32-1); err != nil {
			r.Fail(err.Error())
			return
		}
	}
}

func (r *Reader) blockType() {
	if len(r.b) == 0 {
		if r.err == nil {
			r.err = ErrTruncated
		}
		return
	}
	switch r.b[0] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.Byte()
	default:
		r.SkipLEB128() // s33 type index
	}
}

func (r *Reader) memarg() {
	align := r.U32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.U32()
	}
	r.SkipLEB128()
}
