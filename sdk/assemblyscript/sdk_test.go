package assemblyscript_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/wasmhost"
)

// These tests build the modules in testdata with the SDK (and the pinned
// compiler, which localtest.ASGuest installs once) and drive them through
// wasmhost as a TaskManager would, one chain at a time.

const opsGuest = "sdk/assemblyscript/testdata/ops"

// opsArgs are job arguments with what a task info reader must decode:
// quotes, backslashes, control characters, non-ASCII letters, a surrogate
// pair and the characters HTML-safe encoders escape.
var opsArgs = []string{`a "q" \ é`, "\x01\n\t<>&😀"}

type harness struct {
	t     *testing.T
	ctx   context.Context
	mod   *wasmhost.Module
	byID  map[int]jobgraph.Vertex
	logMu sync.Mutex
	logs  bytes.Buffer
}

func newHarness(t *testing.T, rel string) *harness {
	t.Helper()
	wasm := localtest.ASGuest(t, rel)
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	g, err := mod.Plan(ctx, opsArgs, wasmhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := jobgraph.Validate(g, 1, 0); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, mod: mod, byID: map[int]jobgraph.Vertex{}}
	for _, v := range g.Vertices {
		h.byID[v.ID] = v
	}
	return h
}

func (h *harness) Write(p []byte) (int, error) {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.logs.Write(p)
}

func (h *harness) logged() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.logs.String()
}

// instance opens an instance of the chain ids over state, appending what it
// emits to out.
func (h *harness) instance(state *wasmhost.State, out *[]abi.Record, ids ...int) *wasmhost.Instance {
	h.t.Helper()
	var chain []jobgraph.Vertex
	for _, id := range ids {
		chain = append(chain, h.byID[id])
	}
	in, err := h.mod.Instantiate(h.ctx, wasmhost.TaskConfig{
		JobID: "j-as", TaskName: "ops", Chain: chain, Subtask: 0, Parallelism: 1, Args: opsArgs, State: state,
		Logger: slog.New(slog.NewTextHandler(h, nil)),
		Emit: func(recs []abi.Record) error {
			for _, r := range recs {
				r.Key = bytes.Clone(r.Key)
				r.Value = bytes.Clone(r.Value)
				*out = append(*out, r)
			}
			return nil
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { in.Close(h.ctx) })
	if err := in.Open(h.ctx); err != nil {
		h.t.Fatal(err)
	}
	return in
}

func show(r abi.Record) string {
	s := string(r.Value)
	if r.HasKey {
		s = string(r.Key) + "/" + s
	}
	if r.HasTime {
		s += fmt.Sprintf("@%d", r.Time)
	}
	return s
}

func showAll(recs []abi.Record) string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = show(r)
	}
	return strings.Join(out, " ")
}

// wantSource is what chain 1..5 emits for opsArgs: the arguments, then the
// numbers 1..10 but the multiples of 5, each with its number as its time,
// keyed by parity, and each followed by a copy with "!" and no time.
func wantSource() string {
	var w []string
	for _, a := range opsArgs {
		w = append(w, "other/"+a, "other/"+a+"!")
	}
	for n := 1; n <= 10; n++ {
		if n%5 == 0 {
			continue
		}
		p := "odd"
		if n%2 == 0 {
			p = "even"
		}
		w = append(w, fmt.Sprintf("%s/%d@%d", p, n, n), fmt.Sprintf("other/%d!", n))
	}
	return strings.Join(w, " ")
}

// TestSourceMapFilterFlatMapKeyBy runs the source chain to its end, with a
// barrier part-way, and then again from the barrier's state: the source
// resumes where its operator state says, so the two runs together emit
// what one run does. The arguments reach the guest through the task info
// intact.
func TestSourceMapFilterFlatMapKeyBy(t *testing.T) {
	h := newHarness(t, opsGuest)
	poll := func(in *wasmhost.Instance, times int) bool {
		for range times {
			done, err := in.SourcePoll(h.ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if done {
				return true
			}
		}
		return false
	}
	var all []abi.Record
	one := h.instance(nil, &all, 1, 2, 3, 4, 5)
	if !poll(one, 100) {
		t.Fatal("the source never ended")
	}
	if got := showAll(all); got != wantSource() {
		t.Fatalf("source chain emitted\n  %s\nwant\n  %s", got, wantSource())
	}

	state := wasmhost.NewState(128, 0, 127)
	var first, rest []abi.Record
	a := h.instance(state, &first, 1, 2, 3, 4, 5)
	poll(a, 2) // 6 source records
	if err := a.Barrier(h.ctx, 7); err != nil {
		t.Fatal(err)
	}
	b := h.instance(state, &rest, 1, 2, 3, 4, 5)
	if !poll(b, 100) {
		t.Fatal("the restored source never ended")
	}
	if got := showAll(append(first, rest...)); got != wantSource() {
		t.Fatalf("before and after the barrier the source emitted\n  %s\nwant\n  %s", got, wantSource())
	}
	if !strings.Contains(h.logged(), "numbers: barrier 7 at 6") {
		t.Errorf("the barrier hook's log line is missing:\n%s", h.logged())
	}
}

func keyed(key, value string, time int64) abi.Record {
	return abi.Record{Key: []byte(key), HasKey: true, Value: []byte(value), Time: time, HasTime: time != 0}
}

// TestReduceUpdatesAndRestore: a reduce emits {key, accumulator} after
// every record, writes its accumulators to keyed state at a barrier, and a
// new instance over that state goes on from them.
func TestReduceUpdatesAndRestore(t *testing.T) {
	h := newHarness(t, opsGuest)
	state := wasmhost.NewState(128, 0, 127)
	var out []abi.Record
	in := h.instance(state, &out, 6)
	if err := in.Process(h.ctx, []abi.Record{keyed("odd", "1", 1), keyed("even", "2", 2), keyed("odd", "3", 3), keyed("other", "x!", 0)}); err != nil {
		t.Fatal(err)
	}
	sums := func(recs []abi.Record) string {
		s := make([]string, len(recs))
		for i, r := range recs {
			s[i] = fmt.Sprintf("%s=%d", r.Key, int64(binary.LittleEndian.Uint64(r.Value)))
		}
		return strings.Join(s, " ")
	}
	if got, want := sums(out), "odd=1 even=2 odd=4 other=0"; got != want {
		t.Fatalf("reduce emitted %s, want %s", got, want)
	}
	if err := in.Barrier(h.ctx, 1); err != nil {
		t.Fatal(err)
	}
	out = nil
	again := h.instance(state, &out, 6)
	if err := again.Process(h.ctx, []abi.Record{keyed("odd", "100", 100), keyed("new", "5", 5), keyed("even", "6", 6)}); err != nil {
		t.Fatal(err)
	}
	if got, want := sums(out), "odd=104 new=5 even=8"; got != want {
		t.Fatalf("after the restore, reduce emitted %s, want %s", got, want)
	}
}

// TestProcessStateTimersCountersSink: a process operator keeps keyed state,
// registers timers that fire with the key current, and emits to a guest
// sink that logs; counters reach the host.
func TestProcessStateTimersCountersSink(t *testing.T) {
	h := newHarness(t, opsGuest)
	var out []abi.Record
	in := h.instance(nil, &out, 8, 9)
	if err := in.Process(h.ctx, []abi.Record{keyed("k1", "x", 0), keyed("k1", "y", 0), keyed("k2", "z", 0)}); err != nil {
		t.Fatal(err)
	}
	if at, ok := in.NextTimer(); !ok || at != 10 {
		t.Fatalf("next timer %d %v, want 10", at, ok)
	}
	if err := in.FireTimers(h.ctx, 10); err != nil {
		t.Fatal(err)
	}
	logs := h.logged()
	for _, want := range []string{"sink: k1=2:y@10", "sink: k2=1:z@10"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if got := in.Counters(); got["timer.records"] != 3 || got["sink.records"] != 2 {
		t.Errorf("counters %v, want timer.records=3 sink.records=2", got)
	}
	if len(out) != 0 {
		t.Errorf("a chain ending in a guest sink emitted %d records", len(out))
	}
	// The timer cleared the keys' state: a new record counts from 1.
	if err := in.Process(h.ctx, []abi.Record{keyed("k1", "w", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := in.FireTimers(h.ctx, 20); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.logged(), "sink: k1=1:w@20") {
		t.Errorf("state survived its delete:\n%s", h.logged())
	}
}

// TestFailAndAbort: fail() makes the call return ERROR with its message;
// an abort (a failed assert) traps, with its message on stderr attached.
func TestFailAndAbort(t *testing.T) {
	h := newHarness(t, opsGuest)
	var out []abi.Record
	in := h.instance(nil, &out, 8, 9)
	err := in.Process(h.ctx, []abi.Record{keyed("k", "fail", 0)})
	var ge *wasmhost.GuestError
	if !errors.As(err, &ge) || !errors.Is(ge.Cause, wasmhost.ErrGuestFailed) || !strings.Contains(ge.Message, "timer: asked to fail on key k") {
		t.Fatalf("fail: %v, want ErrGuestFailed with the message", err)
	}

	in = h.instance(nil, &out, 2, 3, 4, 5)
	err = in.Process(h.ctx, []abi.Record{{Value: []byte("abort")}})
	if !errors.As(err, &ge) || !errors.Is(ge.Cause, wasmhost.ErrTrap) || !strings.Contains(ge.Output, "abort: tag was asked to abort") {
		t.Fatalf("abort: %v, want ErrTrap with the message on stderr", err)
	}
}

// TestKeylessRecordFailsReduce: a record without a key reaching a reduce
// fails the call with a message saying what to do.
func TestKeylessRecordFailsReduce(t *testing.T) {
	h := newHarness(t, opsGuest)
	var out []abi.Record
	in := h.instance(nil, &out, 6)
	err := in.Process(h.ctx, []abi.Record{{Value: []byte("1")}})
	if err == nil || !strings.Contains(err.Error(), `reduce "sum" got a record without a key: put keyBy before it`) {
		t.Fatalf("keyless record: %v", err)
	}
}

// TestABIVersionRefused: a module built with the SDK that declares
// sluice_abi_v2 instead of v1 is refused at compile time, naming both.
func TestABIVersionRefused(t *testing.T) {
	wasm := localtest.ASGuest(t, "sdk/assemblyscript/testdata/abiv2")
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	_, err = rt.Compile(ctx, wasm)
	if err == nil || !strings.Contains(err.Error(), "module implements sluice_abi_v2; this host speaks sluice_abi_v1") {
		t.Fatalf("compile: %v, want the version refused", err)
	}
}
