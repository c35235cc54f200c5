package wasmhost

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/internal/abi"
)

var wasmMagic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// checkHeader is the cheap check before compiling: the Wasm magic and
// binary version 1.
func checkHeader(wasm []byte) error {
	if len(wasm) < len(wasmMagic) || !bytes.Equal(wasm[:4], wasmMagic[:4]) {
		return errors.New("not a WebAssembly module (no \\0asm magic)")
	}
	if !bytes.Equal(wasm[4:8], wasmMagic[4:]) {
		return fmt.Errorf("unsupported WebAssembly binary version %d (want 1)", wasm[4])
	}
	return nil
}

// sig is a function signature in the notation of docs/ABI.md.
type sig struct {
	params, results []api.ValueType
}

func (s sig) String() string {
	name := func(ts []api.ValueType) string {
		n := make([]string, len(ts))
		for i, t := range ts {
			n[i] = api.ValueTypeName(t)
		}
		return strings.Join(n, ", ")
	}
	return fmt.Sprintf("(%s) -> (%s)", name(s.params), name(s.results))
}

func sigOf(d api.FunctionDefinition) sig { return sig{d.ParamTypes(), d.ResultTypes()} }

func (s sig) equal(o sig) bool {
	return bytes.Equal(s.params, o.params) && bytes.Equal(s.results, o.results)
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// guestExports are the exports of ABI v1 with their signatures and whether a
// module must have them.
var guestExports = []struct {
	name     string
	sig      sig
	required bool
}{
	{abi.Version, sig{}, true},
	{abi.ExportAlloc, sig{[]api.ValueType{i32}, []api.ValueType{i32}}, true},
	{abi.ExportFree, sig{[]api.ValueType{i32}, nil}, true},
	{abi.ExportPlan, sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}, true},
	{abi.ExportOpen, sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}, true},
	{abi.ExportProcess, sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}, true},
	{abi.ExportSourcePoll, sig{[]api.ValueType{i32}, []api.ValueType{i32}}, false},
	{abi.ExportEndInput, sig{nil, []api.ValueType{i32}}, false},
	{abi.ExportBarrier, sig{[]api.ValueType{i64}, []api.ValueType{i32}}, false},
	{abi.ExportTimers, sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}, false},
	{abi.ExportClose, sig{nil, []api.ValueType{i32}}, false},
	{abi.ExportInitialize, sig{}, false},
}

// allowedWASI is the WASI preview 1 subset a guest may import. It is what a
// Go or wasi-libc program links, minus sockets. Nothing in it reaches the
// host: there are no preopened directories (path_* calls fail with EBADF),
// no environment, no arguments, fake clocks unless granted, and stdout and
// stderr go to the task log.
var allowedWASI = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true, "random_get": true, "poll_oneoff": true,
	"proc_exit": true, "proc_raise": true, "sched_yield": true,
	"fd_advise": true, "fd_allocate": true, "fd_close": true, "fd_datasync": true,
	"fd_fdstat_get": true, "fd_fdstat_set_flags": true, "fd_fdstat_set_rights": true,
	"fd_filestat_get": true, "fd_filestat_set_size": true, "fd_filestat_set_times": true,
	"fd_pread": true, "fd_prestat_dir_name": true, "fd_prestat_get": true, "fd_pwrite": true,
	"fd_read": true, "fd_readdir": true, "fd_renumber": true, "fd_seek": true, "fd_sync": true,
	"fd_tell": true, "fd_write": true,
	"path_create_directory": true, "path_filestat_get": true, "path_filestat_set_times": true,
	"path_link": true, "path_open": true, "path_readlink": true, "path_remove_directory": true,
	"path_rename": true, "path_symlink": true, "path_unlink_file": true,
}

// validate checks a compiled module against ABI v1: the version export, the
// signatures of the exports, and that every import is a host function of the
// ABI or an allowed WASI function with the right signature. hostFuncs maps
// "module.name" to the host's definitions.
func validate(wasm []byte, cm wazero.CompiledModule, hostFuncs map[string]api.FunctionDefinition, maxMemoryPages uint32) error {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	exports := cm.ExportedFunctions()
	if _, ok := exports[abi.Version]; !ok {
		var other []string
		for name := range exports {
			if strings.HasPrefix(name, "sluice_abi_") {
				other = append(other, name)
			}
		}
		if len(other) > 0 {
			sort.Strings(other)
			return fmt.Errorf("module implements %s; this host speaks %s", strings.Join(other, ", "), abi.Version)
		}
		return fmt.Errorf("module does not declare the Sluice ABI: no export %q (build it with sdk/guest, or see docs/ABI.md)", abi.Version)
	}
	if _, ok := exports["_start"]; ok {
		bad("module is a WASI command (exports _start): build it as a reactor, e.g. go build -buildmode=c-shared")
	}
	for _, e := range guestExports {
		d, ok := exports[e.name]
		switch {
		case !ok && e.required:
			bad("missing export %q %s", e.name, e.sig)
		case ok && !sigOf(d).equal(e.sig):
			bad("export %q has signature %s, want %s", e.name, sigOf(d), e.sig)
		}
	}
	mem, ok := cm.ExportedMemories()[abi.ExportMemory]
	if !ok {
		bad("missing export %q: the guest must export its linear memory", abi.ExportMemory)
	} else if mem.Min() > maxMemoryPages {
		bad("memory needs %d pages at start, more than the host's limit of %d", mem.Min(), maxMemoryPages)
	}

	imports, err := parseImports(wasm)
	if err != nil {
		bad("import section: %v", err)
	}
	for _, im := range imports {
		if im.kind != importFunc {
			bad("module imports %s %q: not allowed (a guest may import only functions)", im.kind, im.module+"."+im.name)
		}
	}
	for _, d := range cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		full := mod + "." + name
		switch {
		case mod == abi.HostModule:
			want, ok := hostFuncs[full]
			if !ok {
				bad("module imports %q: not a host function of %s", full, abi.Version)
			} else if !sigOf(d).equal(sigOf(want)) {
				bad("module imports %q with signature %s, want %s", full, sigOf(d), sigOf(want))
			}
		case mod == abi.WASIModule && allowedWASI[name]:
			if want, ok := hostFuncs[full]; ok && !sigOf(d).equal(sigOf(want)) {
				bad("module imports %q with signature %s, want %s", full, sigOf(d), sigOf(want))
			}
		default:
			bad("module imports %q: not allowed", full)
		}
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

type importKind byte

const (
	importFunc   importKind = 0
	importTable  importKind = 1
	importMemory importKind = 2
	importGlobal importKind = 3
	importTag    importKind = 4
)

func (k importKind) String() string {
	switch k {
	case importFunc:
		return "function"
	case importTable:
		return "table"
	case importMemory:
		return "memory"
	case importGlobal:
		return "global"
	case importTag:
		return "tag"
	}
	return fmt.Sprintf("kind %d", byte(k))
}

type wasmImport struct {
	module, name string
	kind         importKind
}

// parseImports lists the import section of a module. wazero exposes only
// imported functions and memories, so tables, globals and tags are found
// here.
func parseImports(wasm []byte) ([]wasmImport, error) {
	r := &reader{b: wasm[8:]}
	for r.err == nil && len(r.b) > 0 {
		id := r.byte()
		body := r.bytes(r.u32())
		if r.err != nil {
			return nil, r.err
		}
		if id == 2 {
			return parseImportSection(body)
		}
	}
	return nil, r.err
}

func parseImportSection(body []byte) ([]wasmImport, error) {
	s := &reader{b: body}
	n := s.u32()
	var out []wasmImport
	for i := uint32(0); i < n && s.err == nil; i++ {
		im := wasmImport{module: string(s.bytes(s.u32())), name: string(s.bytes(s.u32())), kind: importKind(s.byte())}
		switch im.kind {
		case importFunc:
			s.u32()
		case importTable:
			s.byte()
			s.limits()
		case importMemory:
			s.limits()
		case importGlobal:
			s.byte()
			s.byte()
		case importTag:
			s.byte()
			s.u32()
		default:
			return nil, fmt.Errorf("unknown import kind %d", im.kind)
		}
		out = append(out, im)
	}
	return out, s.err
}

type reader struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errTruncated
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) u32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if v > 0xffffffff {
				r.err = errors.New("LEB128 overflows 32 bits")
			}
			return uint32(v)
		}
	}
	r.err = errors.New("LEB128 too long")
	return 0
}

func (r *reader) u64() {
	for i := 0; i < 10; i++ {
		if c := r.byte(); r.err != nil || c < 0x80 {
			return
		}
	}
	r.err = errors.New("LEB128 too long")
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errTruncated
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) limits() {
	flags := r.byte()
	r.u64()
	if flags&1 != 0 {
		r.u64()
	}
}
