package validate

import (
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

func module(secs ...[]byte) []byte {
	b := []byte(wasmbin.Header)
	for _, s := range secs {
		b = append(b, s...)
	}
	return b
}

func sect(id byte, body ...byte) []byte {
	return append(wasmbin.AppendU32([]byte{id}, uint32(len(body))), body...)
}

// oneFunc is a module with one function () -> () of body (locals
// declarations included, end excluded) and one memory page.
func oneFunc(body ...byte) []byte {
	body = append(body, 0x0b)
	code := append(wasmbin.AppendU32([]byte{1}, uint32(len(body))), body...)
	return module(
		sect(wasmbin.SectionType, 1, 0x60, 0, 0),
		sect(wasmbin.SectionFunction, 1, 0),
		sect(wasmbin.SectionMemory, 1, 0, 1),
		sect(wasmbin.SectionCode, code...),
	)
}

func TestStructure(t *testing.T) {
	u := func(v uint32) []byte { return wasmbin.AppendU32(nil, v) }
	for _, tc := range []struct {
		name string
		wasm []byte
		want string // "" accepts
	}{
		{"minimal", oneFunc(0), ""},
		{"empty module", module(), ""},
		{"no magic", []byte("(module)"), "not a WebAssembly module"},
		{"import count bomb", []byte("\x00asm\x01\x00\x00\x00\x02\x05\xff\xff\xff\xff\x0f"), "section 2: truncated"},
		{"name section bomb", []byte("\x00asm\x01\x00\x00\x00\x00\x0c\x04name\x01\x05\xff\xff\xff\xff\x0f"), "section 0: name section: vector of 4294967295 elements"},
		{"type count bomb", module(sect(wasmbin.SectionType, 0xff, 0xff, 0x03)), "section 1: vector of 65535 elements in 0 bytes"},
		{"trailing bytes", module(sect(wasmbin.SectionFunction, 1, 0, 0)), "section 3: 1 trailing bytes"},
		{"unknown section", module(sect(14)), "unknown section id 14"},
		{"data segment mode", module(sect(wasmbin.SectionData, 1, 3)), "data segment mode 3"},
		{"locals bomb", oneFunc(append(append([]byte{1}, u(1<<32-1)...), 0x7f)...), "function 0: locals 4294967295 is above the host's limit of 50000 (module limit Locals"},
		{"locals at the limit", oneFunc(append(append([]byte{1}, u(MaxLocals)...), 0x7f)...), ""},
		{"big table", module(sect(wasmbin.SectionTable, append([]byte{1, 0x70, 0}, u(MaxTableElements+1)...)...)), "table 0: initial table elements 1048577 is above the host's limit of 1048576"},
		{"shared table", module(sect(wasmbin.SectionTable, 1, 0x70, 3, 1, 2)), "table 0: unsupported limits flags 0x3"},
	} {
		_, err := Structure(context.Background(), tc.wasm, DefaultLimits())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzStructure: Structure returns, never panics, for any bytes.
func FuzzStructure(f *testing.F) {
	f.Add(oneFunc(0))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x0c\x04name\x01\x05\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, wasm []byte) { Structure(context.Background(), wasm, DefaultLimits()) })
}

func TestABI(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	export := func(name string, kind, idx byte) []byte {
		return append(append(wasmbin.AppendU32(nil, uint32(len(name))), name...), kind, idx)
	}
	withExports := func(exports ...[]byte) []byte {
		body := wasmbin.AppendU32(nil, uint32(len(exports)))
		for _, e := range exports {
			body = append(body, e...)
		}
		return module(
			sect(wasmbin.SectionType, 1, 0x60, 0, 0),
			sect(wasmbin.SectionFunction, 1, 0),
			sect(wasmbin.SectionMemory, 1, 0, 1),
			sect(wasmbin.SectionExport, body...),
			sect(wasmbin.SectionCode, 1, 2, 0, 0x0b),
		)
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"no version", withExports(), `no export "sluice_abi_v1"`},
		{"other version", withExports(export("sluice_abi_v2", 0, 0)), "module implements sluice_abi_v2; this host speaks sluice_abi_v1"},
		{"version only", withExports(export("sluice_abi_v1", 0, 0)), `missing export "sluice_alloc" (i32) -> (i32); missing export "sluice_free"`},
		{"command", withExports(export("sluice_abi_v1", 0, 0), export("_start", 0, 0)), "WASI command"},
		{"memory not exported", withExports(export("sluice_abi_v1", 0, 0)), `missing export "memory"`},
		{"memory too big", withExports(export("sluice_abi_v1", 0, 0), export("memory", 2, 0)), ""},
	} {
		cm, err := r.CompileModule(ctx, tc.wasm)
		if err != nil {
			t.Fatalf("%s: compile: %v", tc.name, err)
		}
		maxPages := uint32(1)
		if tc.name == "memory too big" {
			maxPages = 0
			tc.want = "memory needs 1 pages at start, more than the host's limit of 0"
		}
		err = ABI(tc.wasm, cm, map[string]api.FunctionDefinition{}, maxPages)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		cm.Close(ctx)
	}
}
