package wasmhost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

func TestCompileRejects(t *testing.T) {
	rt, _ := testGuest(t)
	ctx := context.Background()
	ok := abiModule(nil, "process", i32const(0))
	withFuncs := func(f func(m *hModule)) []byte {
		m := abiModule(nil, "process", i32const(0))
		f(&m)
		return m.bytes()
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"empty", nil, "not a WebAssembly module"},
		{"text", []byte("(module)"), "not a WebAssembly module"},
		{"elf", []byte("\x7fELF\x02\x01\x01\x00\x00\x00"), "not a WebAssembly module"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "binary version 2"},
		{"truncated", ok.bytes()[:40], "invalid module"},
		{"no abi version", withFuncs(func(m *hModule) { m.funcs[0].export = "" }), `no export "sluice_abi_v1"`},
		{"other abi version", withFuncs(func(m *hModule) { m.funcs[0].export = "sluice_abi_v2" }), "module implements sluice_abi_v2"},
		{"env.socket", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "env", name: "socket", params: []byte{tI32}, results: []byte{tI32}}}
		}), `module imports "env.socket": not allowed`},
		{"wasi sockets", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "wasi_snapshot_preview1", name: "sock_accept", params: []byte{tI32, tI32, tI32}, results: []byte{tI32}}}
		}), `module imports "wasi_snapshot_preview1.sock_accept": not allowed`},
		{"unknown host function", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "sluice", name: "exec", params: []byte{tI32}}}
		}), `"sluice.exec": not a host function`},
		{"host function signature", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "sluice", name: "emit", params: []byte{tI64}}}
		}), `imports "sluice.emit" with signature (i64) -> (), want (i32, i32) -> ()`},
		{"wasi signature", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "wasi_snapshot_preview1", name: "fd_write", params: []byte{tI32}}}
		}), `"wasi_snapshot_preview1.fd_write" with signature`},
		{"imported memory", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "env", name: "mem", kind: 2}}
			m.noMemory = true
		}), `module imports memory "env.mem": not allowed`},
		{"imported table", withFuncs(func(m *hModule) { m.imports = []hImport{{module: "env", name: "tab", kind: 1}} }), `module imports table "env.tab"`},
		{"imported global", withFuncs(func(m *hModule) { m.imports = []hImport{{module: "env", name: "g", kind: 3}} }), `module imports global "env.g"`},
		{"command", withFuncs(func(m *hModule) { m.funcs = append(m.funcs, hFunc{export: "_start"}) }), "WASI command"},
		{"missing process", withFuncs(func(m *hModule) { m.funcs[5].export = "process" }), `missing export "sluice_process"`},
		{"bad export signature", withFuncs(func(m *hModule) {
			m.funcs = append(m.funcs, hFunc{export: "sluice_barrier", params: []byte{tI32}, results: []byte{tI32}, body: i32const(0)})
		}), `export "sluice_barrier" has signature (i32) -> (i32), want (i64) -> (i32)`},
		{"start function", withFuncs(func(m *hModule) { m.start = 2 }), "start function"},
		{"reserved export", withFuncs(func(m *hModule) { m.funcs[2].export = "sluice:interrupt" }), "reserved"},
		{"foreign global", withFuncs(func(m *hModule) { m.funcs[5].body = []byte{0x23, 0x00, 0x1a, 0x41, 0x00} }), "invalid index for global.get"},
		// Declared counts far beyond the bytes: wazero's decoder would
		// allocate for them before noticing.
		{"import count bomb", []byte("\x00asm\x01\x00\x00\x00\x02\x05\xff\xff\xff\xff\x0f"), "section 2: truncated"},
		{"name section bomb", []byte("\x00asm\x01\x00\x00\x00\x00\x0c\x04name\x01\x05\xff\xff\xff\xff\x0f"), "name section"},
		{"locals bomb", withFuncs(func(m *hModule) { m.funcs[2].localCount = 1<<32 - 1 }), "above the host's limit of 50000"},
		{"no memory export", withFuncs(func(m *hModule) { m.memoryExport = "mem" }), `missing export "memory"`},
		{"no memory", withFuncs(func(m *hModule) { m.noMemory = true }), "module has no linear memory"},
		{"event timers without their export", withFuncs(func(m *hModule) {
			m.imports = []hImport{{module: "sluice", name: "event_timer_register", params: []byte{tI32, tI32, tI32, tI64}}}
		}), `imports "sluice.event_timer_register" but does not export "sluice_event_timers"`},
		{"bad sluice_watermark signature", withFuncs(func(m *hModule) {
			m.funcs = append(m.funcs, hFunc{export: "sluice_watermark", params: []byte{tI32}, results: []byte{tI32}, body: i32const(0)})
		}), `export "sluice_watermark" has signature (i32) -> (i32), want (i64) -> (i32)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Compile(ctx, tc.wasm)
			if !errors.Is(err, ErrInvalidModule) {
				t.Fatalf("err = %v, want ErrInvalidModule", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if err2 := rt.check(ctx, tc.wasm); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("check = %v, Compile = %v", err2, err)
			}
		})
	}
	if _, err := rt.Compile(ctx, ok.bytes()); err != nil {
		t.Errorf("the minimal hand-made module: %v", err)
	}
	evented := withFuncs(func(m *hModule) {
		m.imports = []hImport{{module: "sluice", name: "event_timer_register", params: []byte{tI32, tI32, tI32, tI64}}}
		m.funcs = append(m.funcs, hFunc{export: "sluice_event_timers", params: []byte{tI32, tI32}, results: []byte{tI32}, body: i32const(0)})
	})
	if _, err := rt.Compile(ctx, evented); err != nil {
		t.Errorf("a module with event timers and their export: %v", err)
	}
}

func TestCompileIsCachedByDigest(t *testing.T) {
	rt, mod := testGuest(t)
	again, err := rt.Compile(context.Background(), shared.wasm)
	if err != nil {
		t.Fatal(err)
	}
	if again != mod {
		t.Error("compiling the same bytes twice gave two modules")
	}
	if mod.Digest() != digest(shared.wasm) || !strings.HasPrefix(mod.Digest(), "sha256-") || len(mod.Digest()) != 7+64 {
		t.Errorf("digest %q", mod.Digest())
	}
}

// FuzzValidate compiles arbitrary bytes: Compile and check must return
// an error or a module, never panic or hang.
func FuzzValidate(f *testing.F) {
	f.Add(abiModule(nil, "process", i32const(0)).bytes())
	f.Add(abiModule([]hImport{{module: "env", name: "socket", params: []byte{tI32}}}, "p", []byte{0x00}).bytes())
	f.Add(abiModule([]hImport{{module: "env", name: "t", kind: 1}, {module: "sluice", name: "emit", params: []byte{tI32, tI32}}}, "p", i32const(1)).bytes())
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x05\x01\x00\x00\x03\x00"))
	ctx := context.Background()
	rt, err := NewRuntime(ctx, NewRuntimeConfig().withMaxMemoryBytes(64<<20))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, wasm []byte) {
		err := rt.check(ctx, wasm)
		if err != nil && !errors.Is(err, ErrInvalidModule) {
			t.Fatalf("check: an error that is not ErrInvalidModule: %v", err)
		}
		if err == nil {
			if _, err := wasmbin.Imports(wasm); err != nil {
				t.Fatalf("a valid module's imports do not parse: %v", err)
			}
		}
	})
}
