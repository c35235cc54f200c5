package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Every export's statuses against docs/ABI.md section 3, on a hand-made
// module whose exports each run a body the test chooses.

// Function indices of exportsModule: the imports, then the exports in this
// order.
const (
	fnEmit = iota
	fnSetPlan
	fnFail
	nExportsImports
)

// Addresses of the bytes the bodies store before passing them to imports.
const (
	addrBatch = 0    // memory starts zeroed: 4 zero bytes are an empty batch
	addrPlan  = 2048 // "{}"
	addrFail  = 3072 // "boom"
)

// i32store stores v at addr.
func i32store(addr, v int32) []byte {
	return cat(i32const(addr), i32const(v), []byte{0x36, 0x02, 0x00})
}

// Bodies that call an import, leaving nothing on the stack.
var (
	callEmit    = cat(i32const(addrBatch), i32const(4), call(fnEmit))
	callSetPlan = cat(i32store(addrPlan, 0x7d7b), i32const(addrPlan), i32const(2), call(fnSetPlan))
	callFail    = cat(i32store(addrFail, 0x6d6f6f62), i32const(addrFail), i32const(4), call(fnFail))
)

// exportsModule has every export of ABI v1. bodies maps an export's name to
// its body, which for an export with a status must leave it (i32); the
// others return OK (and sluice_plan declares "{}").
func exportsModule(bodies map[string][]byte) hModule {
	ok := i32const(0)
	body := func(export string, def []byte) []byte {
		if b, found := bodies[export]; found {
			return b
		}
		return def
	}
	I, L := []byte{tI32}, []byte{tI64}
	return hModule{
		imports: []hImport{
			{module: abi.HostModule, name: abi.ImportEmit, params: []byte{tI32, tI32}},
			{module: abi.HostModule, name: abi.ImportSetPlan, params: []byte{tI32, tI32}},
			{module: abi.HostModule, name: abi.ImportFail, params: []byte{tI32, tI32}},
		},
		funcs: []hFunc{
			{export: abi.Version},
			{export: abi.ExportInitialize, body: body(abi.ExportInitialize, nil)},
			{export: abi.ExportAlloc, params: I, results: I, body: body(abi.ExportAlloc, i32const(regionPtr))},
			{export: abi.ExportFree, params: I, body: body(abi.ExportFree, nil)},
			{export: abi.ExportPlan, params: []byte{tI32, tI32}, results: I, body: body(abi.ExportPlan, cat(callSetPlan, ok))},
			{export: abi.ExportOpen, params: []byte{tI32, tI32}, results: I, body: body(abi.ExportOpen, ok)},
			{export: abi.ExportProcess, params: []byte{tI32, tI32}, results: I, body: body(abi.ExportProcess, ok)},
			{export: abi.ExportSourcePoll, params: I, results: I, body: body(abi.ExportSourcePoll, ok)},
			{export: abi.ExportEndInput, results: I, body: body(abi.ExportEndInput, ok)},
			{export: abi.ExportBarrier, params: L, results: I, body: body(abi.ExportBarrier, ok)},
			{export: abi.ExportTimers, params: []byte{tI32, tI32}, results: I, body: body(abi.ExportTimers, ok)},
			{export: abi.ExportClose, results: I, body: body(abi.ExportClose, ok)},
		},
		memPages: 4,
	}
}

// handRuntime is a runtime of its own for hand-made modules.
func handRuntime(t *testing.T) *Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := NewRuntime(ctx, NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	return rt
}

// exportsTask compiles m and instantiates it for a one-operator keyed task
// (so timers work); emitted counts the records it emits.
func exportsTask(t *testing.T, rt *Runtime, m hModule) (in *Instance, emits *int) {
	t.Helper()
	ctx := context.Background()
	mod, err := rt.Compile(ctx, m.bytes())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	emits = new(int)
	in, err = mod.Instantiate(ctx, TaskConfig{
		TaskName: "statuses", Parallelism: 1,
		Chain: []jobgraph.Vertex{{ID: 1, Name: "op", Kind: jobgraph.KindProcess}},
		Emit:  func([]abi.Record) error { *emits++; return nil },
	})
	if err != nil {
		return nil, emits
	}
	t.Cleanup(func() { in.Close(ctx) })
	return in, emits
}

// callExport runs export the way the TaskManager (or the JobManager, for
// sluice_plan) does: the instance is opened first for every export that
// comes after sluice_open.
func callExport(t *testing.T, rt *Runtime, m hModule, export string) (done bool, err error) {
	t.Helper()
	ctx := context.Background()
	if export == abi.ExportPlan {
		mod, err := rt.Compile(ctx, m.bytes())
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		_, err = mod.Plan(ctx, nil, Limits{})
		return false, err
	}
	mod, err := rt.Compile(ctx, m.bytes())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	in, err := mod.Instantiate(ctx, TaskConfig{
		TaskName: "statuses", Parallelism: 1,
		Chain: []jobgraph.Vertex{{ID: 1, Name: "op", Kind: jobgraph.KindProcess}},
		Emit:  func([]abi.Record) error { return nil },
	})
	if err != nil || export == abi.ExportInitialize {
		if in != nil {
			in.Close(ctx)
		}
		return false, err
	}
	defer in.Close(ctx)
	if err := in.Open(ctx); err != nil || export == abi.ExportOpen {
		return false, err
	}
	switch export {
	case abi.ExportProcess:
		return false, in.Process(ctx, textRecords("x"))
	case abi.ExportSourcePoll:
		return in.SourcePoll(ctx, 10)
	case abi.ExportEndInput:
		return false, in.EndInput(ctx)
	case abi.ExportBarrier:
		return false, in.Barrier(ctx, 1)
	case abi.ExportTimers:
		if err := in.State().registerTimer(1, []byte("k"), 5, 0); err != nil {
			t.Fatal(err)
		}
		return false, in.FireTimers(ctx, 10)
	case abi.ExportClose:
		return false, in.Close(ctx)
	}
	t.Fatalf("no way to call %s", export)
	return false, nil
}

// TestEveryExportsStatuses: OK passes everywhere, ERROR fails with the
// guest's reason, DONE passes only from sluice_source_poll (and means the
// source ended), anything else fails; each failure names the export.
func TestEveryExportsStatuses(t *testing.T) {
	rt := handRuntime(t)
	exports := []string{abi.ExportPlan, abi.ExportOpen, abi.ExportProcess, abi.ExportSourcePoll,
		abi.ExportEndInput, abi.ExportBarrier, abi.ExportTimers, abi.ExportClose}
	for _, export := range exports {
		for _, st := range []int32{abi.StatusOK, abi.StatusError, abi.StatusDone, 3, -1} {
			t.Run(fmt.Sprintf("%s/%d", export, st), func(t *testing.T) {
				body := i32const(st)
				if st == abi.StatusError {
					body = cat(callFail, body)
				}
				if export == abi.ExportPlan {
					body = cat(callSetPlan, body)
				}
				done, err := callExport(t, rt, exportsModule(map[string][]byte{export: body}), export)
				switch {
				case st == abi.StatusOK:
					if err != nil || done {
						t.Fatalf("OK: done %v, err %v", done, err)
					}
				case st == abi.StatusError:
					ge := requireGuestError(t, err, ErrGuestFailed)
					if ge.Function != export || ge.Message != "boom" {
						t.Fatalf("ERROR: function %q message %q, want %s and the guest's reason", ge.Function, ge.Message, export)
					}
				case st == abi.StatusDone && export == abi.ExportSourcePoll:
					if err != nil || !done {
						t.Fatalf("DONE from the source: done %v, err %v", done, err)
					}
				case st == abi.StatusDone:
					ge := requireGuestError(t, err, ErrTrap)
					want := export + " returned status 2 (DONE), which only sluice_source_poll may return"
					if ge.Function != export || !strings.Contains(err.Error(), want) {
						t.Fatalf("DONE: %v\nwant %q", err, want)
					}
				default:
					ge := requireGuestError(t, err, ErrTrap)
					if want := fmt.Sprintf("%s returned unknown status %d", export, st); ge.Function != export || !strings.Contains(ge.Message, want) {
						t.Fatalf("status %d: %v\nwant %q", st, err, want)
					}
				}
			})
		}
	}
}

// TestStatusDoneFailsTheInstance: after a wrong DONE the instance is
// unusable, as after any failure: no later call runs the guest.
func TestStatusDoneFailsTheInstance(t *testing.T) {
	in, _ := exportsTask(t, handRuntime(t), exportsModule(map[string][]byte{abi.ExportProcess: i32const(abi.StatusDone)}))
	ctx := context.Background()
	if err := in.Open(ctx); err != nil {
		t.Fatal(err)
	}
	first := in.Process(ctx, textRecords("a"))
	requireGuestError(t, first, ErrTrap)
	if err := in.Process(ctx, textRecords("b")); !errors.Is(err, ErrTrap) {
		t.Fatalf("a second batch: %v; want the first error again", err)
	}
	if err := in.EndInput(ctx); !errors.Is(err, ErrTrap) {
		t.Fatalf("end of input after the failure: %v; want the first error", err)
	}
}

// TestStatuslessExports: sluice_alloc, sluice_free and _initialize return
// no status; a bad region or a trap in them fails the call.
func TestStatuslessExports(t *testing.T) {
	rt := handRuntime(t)
	unreachable := []byte{0x00}
	cases := []struct {
		name   string
		export string
		body   []byte
		want   string
	}{
		{"alloc returns 0", abi.ExportAlloc, i32const(0), "returned [0x0, +65536)"},
		{"alloc returns a region outside memory", abi.ExportAlloc, i32const(4*65536 - 16), "which is not inside"},
		{"alloc traps", abi.ExportAlloc, cat(unreachable, i32const(0)), "unreachable"},
		{"_initialize traps", abi.ExportInitialize, unreachable, "unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := callExport(t, rt, exportsModule(map[string][]byte{tc.export: tc.body}), abi.ExportProcess)
			ge := requireGuestError(t, err, ErrTrap)
			if ge.Function != tc.export || !strings.Contains(ge.Message, tc.want) {
				t.Fatalf("%v\nwant function %s and %q", err, tc.export, tc.want)
			}
		})
	}
	t.Run("free traps", func(t *testing.T) {
		// The host frees its region when a batch outgrows it.
		in, _ := exportsTask(t, rt, exportsModule(map[string][]byte{abi.ExportFree: unreachable}))
		ctx := context.Background()
		if err := in.Open(ctx); err != nil {
			t.Fatal(err)
		}
		big := textRecords(strings.Repeat("x", 100<<10))
		ge := requireGuestError(t, in.Process(ctx, big), ErrTrap)
		if ge.Function != abi.ExportFree {
			t.Fatalf("function %q, want %s: %v", ge.Function, abi.ExportFree, ge)
		}
	})
}

// TestEmitOnlyWhereAllowed: emit works during the calls that carry records,
// timers, end of input and barriers, and traps in every other export.
func TestEmitOnlyWhereAllowed(t *testing.T) {
	rt := handRuntime(t)
	allowed := map[string]bool{
		abi.ExportProcess: true, abi.ExportSourcePoll: true, abi.ExportTimers: true,
		abi.ExportEndInput: true, abi.ExportBarrier: true,
	}
	for _, export := range []string{abi.ExportInitialize, abi.ExportAlloc, abi.ExportFree, abi.ExportPlan, abi.ExportOpen,
		abi.ExportProcess, abi.ExportSourcePoll, abi.ExportEndInput, abi.ExportBarrier, abi.ExportTimers, abi.ExportClose} {
		t.Run(export, func(t *testing.T) {
			var body []byte
			drive := export // the export the test drives
			switch export {
			case abi.ExportInitialize:
				body = callEmit
			case abi.ExportAlloc:
				body, drive = cat(callEmit, i32const(regionPtr)), abi.ExportOpen
			case abi.ExportFree:
				body, drive = callEmit, ""
			case abi.ExportPlan:
				body = cat(callSetPlan, callEmit, i32const(0))
			default:
				body = cat(callEmit, i32const(0))
			}
			m := exportsModule(map[string][]byte{export: body})
			var err error
			if drive == "" {
				// sluice_free runs when a batch outgrows the region.
				in, _ := exportsTask(t, rt, m)
				ctx := context.Background()
				if err = in.Open(ctx); err == nil {
					err = in.Process(ctx, textRecords(strings.Repeat("x", 100<<10)))
				}
			} else {
				_, err = callExport(t, rt, m, drive)
			}
			if allowed[export] {
				if err != nil {
					t.Fatalf("emit during %s: %v", export, err)
				}
				return
			}
			ge := requireGuestError(t, err, ErrTrap)
			want := "sluice.emit: called during " + export
			if ge.Function != export || !strings.Contains(ge.Message, want) {
				t.Fatalf("%v\nwant function %s and %q", err, export, want)
			}
		})
	}
}

// TestSetPlanTwiceFailsThePlan: the graph is declared exactly once.
func TestSetPlanTwiceFailsThePlan(t *testing.T) {
	rt := handRuntime(t)
	_, err := callExport(t, rt, exportsModule(map[string][]byte{
		abi.ExportPlan: cat(callSetPlan, callSetPlan, i32const(0)),
	}), abi.ExportPlan)
	ge := requireGuestError(t, err, ErrTrap)
	if !strings.Contains(ge.Message, "set_plan: called a second time") {
		t.Fatalf("%v", err)
	}
	// And once is enough even for an empty graph, which jobgraph.Validate
	// rejects later with its own message.
	if _, err := callExport(t, rt, exportsModule(nil), abi.ExportPlan); err != nil {
		t.Fatalf("one set_plan: %v", err)
	}
	// set_plan outside sluice_plan traps.
	_, err = callExport(t, rt, exportsModule(map[string][]byte{abi.ExportOpen: cat(callSetPlan, i32const(0))}), abi.ExportOpen)
	if ge := requireGuestError(t, err, ErrTrap); !strings.Contains(ge.Message, "called outside sluice_plan") {
		t.Fatalf("%v", err)
	}
}

// TestTaskInfoIsPlainJSON: the task info escapes what JSON requires and no
// more, so a guest's own JSON reader sees arguments as the user typed them.
func TestTaskInfoIsPlainJSON(t *testing.T) {
	ctx := context.Background()
	mod, err := handRuntime(t).Compile(ctx, exportsModule(nil).bytes())
	if err != nil {
		t.Fatal(err)
	}
	in, err := mod.Instantiate(ctx, TaskConfig{
		JobID: "j-1", TaskName: "count (2/4)", Subtask: 1, Parallelism: 4,
		Chain: []jobgraph.Vertex{{ID: 4, Kind: jobgraph.KindReduce}, {ID: 5, Kind: jobgraph.KindMap}},
		Args:  []string{"--input", `a<b>&c "q" \ ü` + "\x01\xff"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	b, err := in.taskInfo()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"job_id":"j-1","task":"count (2/4)","chain":[4,5],"subtask":1,"parallelism":4,"max_parallelism":128,` +
		`"key_group_start":32,"key_group_end":63,"args":["--input","a<b>&c \"q\" \\ ü\u0001\ufffd"]}`
	if string(b) != want {
		t.Fatalf("task info\n%s\nwant\n%s", b, want)
	}
}

// TestPlanOutputIsShownWhenThePlanFails: what a failing plan logged or
// printed is part of its error, since nobody sees a plan's log otherwise.
func TestPlanOutputIsShownWhenThePlanFails(t *testing.T) {
	const addrMsg = 4000
	logHello := cat(i32store(addrMsg, 0x6c6c6568), i32store(addrMsg+4, 0x6f), // "hello"
		i32const(abi.LevelWarn), i32const(addrMsg), i32const(5), call(3))
	m := exportsModule(map[string][]byte{abi.ExportPlan: cat(logHello, callFail, i32const(abi.StatusError))})
	m.imports = append(m.imports, hImport{module: abi.HostModule, name: abi.ImportLog, params: []byte{tI32, tI32, tI32}})
	_, err := callExport(t, handRuntime(t), m, abi.ExportPlan)
	ge := requireGuestError(t, err, ErrGuestFailed)
	if ge.Message != "boom" || !strings.Contains(ge.Output, "hello\n") {
		t.Fatalf("message %q, output %q; want boom and the plan's log", ge.Message, ge.Output)
	}
}
