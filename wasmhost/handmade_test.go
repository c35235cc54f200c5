package wasmhost

import "github.com/sluicehq/sluice/wasmhost/internal/wasmbin"

// Hand-assembled modules for what a Go guest cannot express (a real Wasm
// stack overflow, a trap in a named function, bad imports). There is no
// wat2wasm here, so this is a tiny encoder of the binary format.

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

type hImport struct {
	module, name    string
	params, results []byte
	kind            byte // 0 function (default); 1 table; 2 memory; 3 global
}

type hFunc struct {
	name            string // in the name section
	export          string // "" = not exported
	params, results []byte
	locals          []byte
	localCount      uint32 // when set: one entry of this many i32 locals
	body            []byte // instructions, without the final end
}

type hModule struct {
	imports      []hImport
	funcs        []hFunc
	memPages     uint32
	noMemory     bool
	memoryExport string // default "memory"
	start        int    // function index of a start function, when > 0
}

func uleb(dst []byte, v uint64) []byte {
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

func sleb(dst []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}

func name(dst []byte, s string) []byte { return append(uleb(dst, uint64(len(s))), s...) }

func section(dst []byte, id byte, body []byte) []byte {
	dst = append(dst, id)
	dst = uleb(dst, uint64(len(body)))
	return append(dst, body...)
}

func vec(dst []byte, items ...[]byte) []byte {
	dst = uleb(dst, uint64(len(items)))
	for _, it := range items {
		dst = append(dst, it...)
	}
	return dst
}

func functype(params, results []byte) []byte {
	b := []byte{0x60}
	b = append(uleb(b, uint64(len(params))), params...)
	return append(uleb(b, uint64(len(results))), results...)
}

func (m hModule) bytes() []byte {
	out := []byte(wasmbin.Header)
	var types, imports, funcs, exports, codes, names [][]byte
	nImportedFuncs := 0
	for _, im := range m.imports {
		b := name(name(nil, im.module), im.name)
		switch im.kind {
		case 0:
			b = append(b, 0)
			b = uleb(b, uint64(len(types)))
			types = append(types, functype(im.params, im.results))
			nImportedFuncs++
		case 1:
			b = append(b, 1, 0x70, 0, 1)
		case 2:
			b = append(b, 2, 0, 1)
		case 3:
			b = append(b, 3, tI32, 0)
		}
		imports = append(imports, b)
	}
	for i, f := range m.funcs {
		funcs = append(funcs, uleb(nil, uint64(len(types))))
		types = append(types, functype(f.params, f.results))
		idx := uint64(nImportedFuncs + i)
		if f.export != "" {
			exports = append(exports, uleb(append(name(nil, f.export), 0), idx))
		}
		var body []byte
		if f.localCount > 0 {
			body = append(uleb(uleb(nil, 1), uint64(f.localCount)), tI32)
		} else if len(f.locals) == 0 {
			body = uleb(body, 0)
		} else {
			body = uleb(body, uint64(len(f.locals)))
			for _, l := range f.locals {
				body = append(uleb(body, 1), l)
			}
		}
		body = append(append(body, f.body...), 0x0b)
		codes = append(codes, append(uleb(nil, uint64(len(body))), body...))
		if f.name != "" {
			names = append(names, name(uleb(nil, idx), f.name))
		}
	}
	if !m.noMemory {
		me := m.memoryExport
		if me == "" {
			me = "memory"
		}
		exports = append(exports, append(name(nil, me), 2, 0))
	}
	out = section(out, 1, vec(nil, types...))
	if len(imports) > 0 {
		out = section(out, 2, vec(nil, imports...))
	}
	out = section(out, 3, vec(nil, funcs...))
	if !m.noMemory {
		out = section(out, 5, vec(nil, uleb([]byte{0}, uint64(m.memPages))))
	}
	out = section(out, 7, vec(nil, exports...))
	if m.start > 0 {
		out = section(out, 8, uleb(nil, uint64(m.start)))
	}
	out = section(out, 10, vec(nil, codes...))
	if len(names) > 0 {
		sub := vec(nil, names...)
		body := name(nil, "name")
		body = append(body, 1)
		body = append(uleb(body, uint64(len(sub))), sub...)
		out = section(out, 0, body)
	}
	return out
}

// Instruction helpers.
func i32const(v int32) []byte { return sleb([]byte{0x41}, int64(v)) }
func call(idx uint32) []byte  { return uleb([]byte{0x10}, uint64(idx)) }
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

const regionPtr = 1024 // what the hand-made sluice_alloc returns

// abiModule returns a hand-made module that implements the required
// exports of ABI v1; process runs processBody (which must leave an i32
// status) and extra functions follow the ABI ones (the first extra function
// has index 6 + len(imports)).
func abiModule(imports []hImport, processName string, processBody []byte, extra ...hFunc) hModule {
	status := i32const(0)
	funcs := []hFunc{
		{name: "abi_version", export: "sluice_abi_v1"},
		{name: "alloc", export: "sluice_alloc", params: []byte{tI32}, results: []byte{tI32}, body: i32const(regionPtr)},
		{name: "free", export: "sluice_free", params: []byte{tI32}},
		{name: "plan", export: "sluice_plan", params: []byte{tI32, tI32}, results: []byte{tI32}, body: status},
		{name: "open", export: "sluice_open", params: []byte{tI32, tI32}, results: []byte{tI32}, body: status},
		{name: processName, export: "sluice_process", params: []byte{tI32, tI32}, results: []byte{tI32}, body: processBody},
	}
	return hModule{imports: imports, funcs: append(funcs, extra...), memPages: 4}
}
