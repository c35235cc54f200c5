package validate

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

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

// guestExport is an export of ABI v1 with its signature and whether a
// module must have it.
type guestExport struct {
	name     string
	sig      sig
	required bool
}

// guestExports lists the exports of ABI v1.
func guestExports() []guestExport {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	return []guestExport{
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
		{abi.ExportEventTimers, sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}, false},
		{abi.ExportWatermark, sig{[]api.ValueType{i64}, []api.ValueType{i32}}, false},
		{abi.ExportInitialize, sig{}, false},
	}
}

// allowedWASI reports whether a guest may import the WASI preview 1
// function name. The subset is what a Go or wasi-libc program links, minus
// sockets. Nothing in it reaches the host: there are no preopened
// directories (path_* calls fail with EBADF), no environment, no
// arguments, fake clocks unless granted, and stdout and stderr go to the
// task log.
func allowedWASI(name string) bool {
	switch name {
	case "args_get", "args_sizes_get", "environ_get", "environ_sizes_get",
		"clock_res_get", "clock_time_get", "random_get", "poll_oneoff",
		"proc_exit", "proc_raise", "sched_yield",
		"fd_advise", "fd_allocate", "fd_close", "fd_datasync",
		"fd_fdstat_get", "fd_fdstat_set_flags", "fd_fdstat_set_rights",
		"fd_filestat_get", "fd_filestat_set_size", "fd_filestat_set_times",
		"fd_pread", "fd_prestat_dir_name", "fd_prestat_get", "fd_pwrite",
		"fd_read", "fd_readdir", "fd_renumber", "fd_seek", "fd_sync",
		"fd_tell", "fd_write",
		"path_create_directory", "path_filestat_get", "path_filestat_set_times",
		"path_link", "path_open", "path_readlink", "path_remove_directory",
		"path_rename", "path_symlink", "path_unlink_file":
		return true
	}
	return false
}

// ABI checks a compiled module against ABI v1: the version export, the
// signatures of the exports, the memory export and its initial size, and
// that every import is a host function of the ABI or an allowed WASI
// function with the right signature. wasm is the module as the guest wrote
// it (wazero lists only imported functions and memories, so tables, globals
// and tags are found there); hostFuncs maps "module.name" to the host's
// definitions; maxMemoryPages is the most memory an instance may start with.
//
// # Errors
//
// Every problem found, joined with "; ", or only the missing version
// export when there is no sluice_abi_v1 (nothing else means much then).
func ABI(wasm []byte, cm wazero.CompiledModule, hostFuncs map[string]api.FunctionDefinition, maxMemoryPages uint32) error {
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
			return fmt.Errorf("module implements %s; this host speaks %s: rebuild the module with an SDK for %s (docs/ABI.md), or run it on a host that speaks its version",
				strings.Join(other, ", "), abi.Version, abi.Version)
		}
		return fmt.Errorf("module does not declare the Sluice ABI: no export %q (build it with sdk/guest, or see docs/ABI.md)", abi.Version)
	}
	if _, ok := exports["_start"]; ok {
		bad("module is a WASI command (exports _start): build it as a reactor, e.g. go build -buildmode=c-shared")
	}
	for _, e := range guestExports() {
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

	imports, err := wasmbin.Imports(wasm)
	if err != nil {
		bad("import section: %v", err)
	}
	for _, im := range imports {
		if im.Kind != wasmbin.ImportFunc {
			bad("module imports %s %q: not allowed (a guest may import only functions)", im.Kind, im.Module+"."+im.Name)
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
		case mod == abi.WASIModule && allowedWASI(name):
			if want, ok := hostFuncs[full]; ok && !sigOf(d).equal(sigOf(want)) {
				bad("module imports %q with signature %s, want %s", full, sigOf(d), sigOf(want))
			}
		default:
			bad("module imports %q: not allowed", full)
		}
		// An event timer it could register would have nowhere to fire.
		if mod == abi.HostModule && name == abi.ImportEventTimerRegister {
			if _, ok := exports[abi.ExportEventTimers]; !ok {
				bad("module imports %q but does not export %q: event-time timers it registers could never fire; export it (docs/ABI.md, \"Event time\")", full, abi.ExportEventTimers)
			}
		}
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}
