//go:build !wasip1

package jobtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/sdk/guest/internal/native"
	"github.com/sluicehq/sluice/wasmhost"
)

// fakeModule is a guest whose exports are the test's functions, to break
// the ABI's rules in ways the Go SDK never does.
type fakeModule struct {
	h        native.Host
	plan     func(h native.Host) int32
	open     func(h native.Host) int32
	process  func(h native.Host) int32
	released bool
}

func call(h native.Host, fn func(native.Host) int32) int32 {
	if fn == nil {
		return abi.StatusOK
	}
	return fn(h)
}

func (f *fakeModule) Plan([]byte) int32        { return call(f.h, f.plan) }
func (f *fakeModule) Open([]byte) int32        { return call(f.h, f.open) }
func (f *fakeModule) Process([]byte) int32     { return call(f.h, f.process) }
func (f *fakeModule) SourcePoll(int32) int32   { return abi.StatusOK }
func (f *fakeModule) EndInput() int32          { return abi.StatusOK }
func (f *fakeModule) Barrier(int64) int32      { return abi.StatusOK }
func (f *fakeModule) Timers([]byte) int32      { return abi.StatusOK }
func (f *fakeModule) Close() int32             { return abi.StatusOK }
func (f *fakeModule) Release()                 { f.released = true }
func (f *fakeModule) EventTimers([]byte) int32 { return abi.StatusOK }
func (f *fakeModule) Watermark(int64) int32    { return abi.StatusOK }
func (f *fakeModule) HasWatermark() bool       { return false }
func (f *fakeModule) bind(h native.Host) (native.Module, error) {
	f.h = h
	return f, nil
}

// recovering runs fn as the Go SDK runs an export: a panic (a trap of the
// host) becomes fail and StatusError.
func recovering(fn func(native.Host) int32) func(native.Host) int32 {
	return func(h native.Host) (st int32) {
		defer func() {
			if r := recover(); r != nil {
				h.Fail("panic")
				st = abi.StatusError
			}
		}()
		return fn(h)
	}
}

var fakeChain = []jobgraph.Vertex{{ID: 1, Name: "m", Kind: jobgraph.KindMap}, {ID: 2, Name: "p", Kind: jobgraph.KindProcess}}

// The native host keeps docs/ABI.md's rules: each broken rule fails the
// task with the cause and message the Wasm host gives.
func TestNativeHostKeepsTheABIRules(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		open, process func(native.Host) int32
		limits        wasmhost.Limits
		cause         error
		msg           string
	}{
		{name: "emit during open", open: func(h native.Host) int32 { h.Emit(abi.AppendBatch(nil, nil)); return 0 },
			cause: wasmhost.ErrTrap, msg: "sluice.emit: called during sluice_open; records may be emitted only during"},
		{name: "malformed emit", process: func(h native.Host) int32 { h.Emit([]byte{1, 0}); return 0 },
			cause: wasmhost.ErrTrap, msg: "sluice.emit:"},
		{name: "DONE from process", process: func(native.Host) int32 { return abi.StatusDone },
			cause: wasmhost.ErrTrap, msg: "sluice_process returned status 2 (DONE), which only sluice_source_poll may return"},
		{name: "unknown status", process: func(native.Host) int32 { return 7 },
			cause: wasmhost.ErrTrap, msg: "returned unknown status 7"},
		{name: "error without a reason", process: func(native.Host) int32 { return abi.StatusError },
			cause: wasmhost.ErrGuestFailed, msg: "(the guest gave no reason"},
		{name: "error with a reason", process: func(h native.Host) int32 { h.Fail("bad input"); return abi.StatusError },
			cause: wasmhost.ErrGuestFailed, msg: "bad input"},
		{name: "keyed state of a map", process: func(h native.Host) int32 { h.StatePut(1, "s", []byte("k"), nil); return 0 },
			cause: wasmhost.ErrTrap, msg: "sluice.state_put: vertex 1 is a map; keyed state and timers belong to reduce and process operators"},
		{name: "a vertex of another task", process: func(h native.Host) int32 { h.OpStatePut(9, "s", nil); return 0 },
			cause: wasmhost.ErrTrap, msg: "sluice.op_state_put: vertex 9 is not an operator of this task"},
		{name: "set_plan in a task", open: func(h native.Host) int32 { h.SetPlan([]byte("{}")); return 0 },
			cause: wasmhost.ErrTrap, msg: "sluice.set_plan: called outside sluice_plan"},
		{name: "a trap the guest recovers from", process: recovering(func(h native.Host) int32 { h.TimerRegister(1, []byte("k"), 5); return 0 }),
			cause: wasmhost.ErrTrap, msg: "sluice.timer_register: vertex 1 is a map"},
		{name: "state limit", limits: wasmhost.Limits{MaxStateBytes: 200},
			process: func(h native.Host) int32 { h.StatePut(2, "s", []byte("k"), make([]byte, 200)); return 0 },
			cause:   wasmhost.ErrMemoryLimit, msg: "sluice.state_put: state limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeModule{open: tc.open, process: tc.process}
			n, err := newNativeInstance(wasmhost.TaskConfig{Chain: fakeChain, Parallelism: 1, Limits: tc.limits,
				Emit: func([]abi.Record) error { return nil }}, f.bind)
			if err != nil {
				t.Fatal(err)
			}
			err = n.Open(ctx)
			if err == nil {
				err = n.Process(ctx, []abi.Record{{Value: []byte("x")}})
			}
			var ge *wasmhost.GuestError
			if !errors.As(err, &ge) || !errors.Is(err, tc.cause) || !strings.Contains(ge.Message, tc.msg) {
				t.Fatalf("error %v, want %v with %q", err, tc.cause, tc.msg)
			}
			// The instance is unusable afterwards, and Close calls nothing.
			if err2 := n.Process(ctx, []abi.Record{{}}); err2 != err {
				t.Errorf("after the failure: %v", err2)
			}
			if err := n.Close(ctx); err != nil || !f.released {
				t.Errorf("close: %v, released %v", err, f.released)
			}
		})
	}
}

func TestNativePlanRules(t *testing.T) {
	twice := &fakeModule{plan: func(h native.Host) int32 { h.SetPlan([]byte("{}")); h.SetPlan([]byte("{}")); return 0 }}
	if _, err := nativePlan(nil, twice.bind); !errors.Is(err, wasmhost.ErrTrap) || !strings.Contains(err.Error(), "called a second time") {
		t.Errorf("set_plan twice: %v", err)
	}
	none := &fakeModule{}
	if _, err := nativePlan(nil, none.bind); err == nil || !strings.Contains(err.Error(), "returned without calling sluice.set_plan") {
		t.Errorf("no set_plan: %v", err)
	}
	state := &fakeModule{plan: func(h native.Host) int32 { h.OpStateGet(1, "s", nil); return 0 }}
	if _, err := nativePlan(nil, state.bind); !errors.Is(err, wasmhost.ErrTrap) || !strings.Contains(err.Error(), "state is not available during sluice_plan") {
		t.Errorf("state in plan: %v", err)
	}
	if !twice.released || !none.released || !state.released {
		t.Error("a plan's module was not released")
	}
}

// state_scan hands out entries across calls with the host's cursor, asks
// for a bigger buffer with -n, and starts over after returning 0.
func TestNativeStateScan(t *testing.T) {
	ctx := context.Background()
	var lens []int32
	f := &fakeModule{process: func(h native.Host) int32 {
		for _, k := range []string{"a", "b", "c"} {
			h.StatePut(2, "s", []byte(k), []byte("value-"+k))
		}
		small, big := make([]byte, 8), make([]byte, 30)
		lens = append(lens, h.StateScan(2, "s", small)) // too small for one entry
		for i := 0; i < 3; i++ {
			lens = append(lens, h.StateScan(2, "s", big)) // one entry each (20 bytes), then 0
		}
		lens = append(lens, h.StateScan(2, "s", big)) // all handed out
		return 0
	}}
	n, err := newNativeInstance(wasmhost.TaskConfig{Chain: fakeChain, Parallelism: 1}, f.bind)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	if err := n.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Process(ctx, []abi.Record{{}}); err != nil {
		t.Fatal(err)
	}
	// An entry is flags 1, key length 4, key 1, value length 4, value 7:
	// 17 bytes, 21 with the batch's count; the buffer of 30 holds one.
	if got := fmt.Sprint(lens); got != "[-21 21 21 21 0]" {
		t.Errorf("scan lengths %s, want [-21 21 21 21 0]", got)
	}
}
