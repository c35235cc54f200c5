package wasmgen

// Module is a module of functions of type () -> () and one memory page.
// Zero fields leave their section out.
type Module struct {
	// Body is the code of every function (without locals declarations or
	// the final end); Functions is how many functions there are (0 means 1).
	Body      []byte
	Functions int
	// Locals is the number of i32 locals each function declares.
	Locals uint32
	// TableMin > 0 adds a funcref table of that many initial elements.
	TableMin uint32
	// DataSegments passive data segments of DataBytes bytes each.
	DataSegments, DataBytes int
	// Types adds that many extra function types.
	Types int
}

// Opcodes of the control instructions the builders use.
const (
	Block byte = 0x02
	Loop  byte = 0x03
	If    byte = 0x04
	End   byte = 0x0b
)

// Nest returns depth control instructions op (block or loop, with an
// empty block type) around inner, each closed by its end.
func Nest(op byte, depth int, inner []byte) []byte {
	b := make([]byte, 0, 3*depth+len(inner))
	for i := 0; i < depth; i++ {
		b = append(b, op, 0x40)
	}
	b = append(b, inner...)
	for i := 0; i < depth; i++ {
		b = append(b, End)
	}
	return b
}

// BrTable returns i32.const 0; br_table with targets+1 labels, all 0, as
// the whole body of a block: block (br_table ...) end.
func BrTable(targets int) []byte {
	b := []byte{Block, 0x40, 0x41, 0x00, 0x0e}
	b = U32(b, uint32(targets))
	for i := 0; i <= targets; i++ {
		b = append(b, 0)
	}
	return append(b, End)
}

// Bytes encodes the module.
func (m Module) Bytes() []byte {
	n := max(m.Functions, 1)
	out := []byte("\x00asm\x01\x00\x00\x00")
	types := U32(nil, uint32(1+m.Types))
	types = append(types, 0x60, 0, 0)
	for i := 0; i < m.Types; i++ {
		types = append(types, 0x60, 1, 0x7f, 0)
	}
	out = section(out, 1, types)
	fns := U32(nil, uint32(n))
	for i := 0; i < n; i++ {
		fns = append(fns, 0)
	}
	out = section(out, 3, fns)
	if m.TableMin > 0 {
		out = section(out, 4, U32([]byte{1, 0x70, 0}, m.TableMin))
	}
	out = section(out, 5, []byte{1, 0, 1})
	if m.DataSegments > 0 {
		out = section(out, 12, U32(nil, uint32(m.DataSegments)))
	}
	body := []byte{}
	if m.Locals > 0 {
		body = append(U32([]byte{1}, m.Locals), 0x7f)
	} else {
		body = append(body, 0)
	}
	body = append(append(body, m.Body...), End)
	one := append(U32(nil, uint32(len(body))), body...)
	code := U32(make([]byte, 0, 5+n*len(one)), uint32(n))
	for i := 0; i < n; i++ {
		code = append(code, one...)
	}
	out = section(out, 10, code)
	if m.DataSegments > 0 {
		seg := append(U32([]byte{1}, uint32(m.DataBytes)), make([]byte, m.DataBytes)...)
		data := U32(nil, uint32(m.DataSegments))
		for i := 0; i < m.DataSegments; i++ {
			data = append(data, seg...)
		}
		out = section(out, 11, data)
	}
	return out
}

func section(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = U32(out, uint32(len(body)))
	return append(out, body...)
}

// U32 appends v as unsigned LEB128.
func U32(dst []byte, v uint32) []byte {
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

// Resumable returns the shape Go's wasm backend gives a function with
// depth call sites: a loop around depth nested blocks, a br_table over
// them at the innermost, and a call of function 0 after each block's end.
func Resumable(depth int) []byte {
	b := []byte{Loop, 0x40}
	for i := 0; i < depth; i++ {
		b = append(b, Block, 0x40)
	}
	b = append(b, 0x41, 0x00, 0x0e)
	b = U32(b, uint32(depth))
	for i := 0; i <= depth; i++ {
		b = U32(b, uint32(i))
	}
	for i := 0; i < depth; i++ {
		b = append(b, End, 0x10, 0x00)
	}
	return append(b, End)
}
