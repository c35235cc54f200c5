package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
)

// hostileProcess runs the test guest's hostile map in mode what on one
// record and returns the error and the output.
func hostileProcess(t *testing.T, what string, lim Limits) (*testTask, error) {
	t.Helper()
	tt := openTask(t, []string{"hostile", what}, []int{2}, TaskConfig{Limits: lim})
	err := tt.in.Process(context.Background(), textRecords("x"))
	return tt, err
}

// handmade compiles a hand-assembled module and opens a one-map task on it.
func handmade(t *testing.T, m hModule, lim Limits) *Instance {
	t.Helper()
	rt, _ := testGuest(t)
	ctx := context.Background()
	mod, err := rt.Compile(ctx, m.bytes())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	in, err := mod.Instantiate(ctx, TaskConfig{
		TaskName: "handmade", Parallelism: 1, Limits: lim,
		Chain: []jobgraph.Vertex{{ID: 1, Name: "op", Kind: jobgraph.KindMap}},
		Emit:  func([]abi.Record) error { return nil },
	})
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	t.Cleanup(func() { in.Close(ctx) })
	if err := in.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	return in
}

func requireGuestError(t *testing.T, err error, cause error) *GuestError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %v", cause)
	}
	var ge *GuestError
	if !errors.As(err, &ge) {
		t.Fatalf("error %T %v is not a *GuestError", err, err)
	}
	if !errors.Is(err, cause) {
		t.Fatalf("error cause %v, want %v; error: %v", ge.Cause, cause, err)
	}
	if !strings.HasPrefix(ge.Digest, "sha256-") {
		t.Errorf("digest %q", ge.Digest)
	}
	return ge
}

// stillHealthy shows the host runs guests normally after a hostile one.
func stillHealthy(t *testing.T) {
	t.Helper()
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{})
	if err := tt.in.Process(context.Background(), textRecords("alive")); err != nil {
		t.Fatalf("a healthy guest fails after a hostile one: %v", err)
	}
	if got := values(tt.out); len(got) != 1 || got[0] != "alive" {
		t.Fatalf("healthy guest output %q", got)
	}
}

func TestInfiniteLoopStopsAtDeadline(t *testing.T) {
	// The deadline covers the Go runtime's _initialize too, which a loaded
	// machine can take most of a second over: 2 s leaves it room.
	tt, err := hostileProcess(t, "loop", Limits{CallTimeout: 2 * time.Second})
	ge := requireGuestError(t, err, ErrDeadline)
	if ge.Function != abi.ExportProcess {
		t.Errorf("function %q", ge.Function)
	}
	if err := tt.in.Process(context.Background(), textRecords("y")); !errors.Is(err, ErrDeadline) {
		t.Errorf("a stopped instance answered %v", err)
	}

	// Without a Go runtime: a bare `loop br 0`.
	in := handmade(t, abiModule(nil, "spin", cat([]byte{0x03, 0x40, 0x0c, 0x00, 0x0b}, i32const(0))), Limits{CallTimeout: 100 * time.Millisecond})
	requireGuestError(t, in.Process(context.Background(), textRecords("x")), ErrDeadline)
	stillHealthy(t)
}

// limitTimeout is the call deadline of tests about other limits: long
// enough that a loaded machine under -race reaches the limit under test
// before it.
const limitTimeout = 2 * time.Minute

func TestMemoryBombStopsAtCap(t *testing.T) {
	_, err := hostileProcess(t, "membomb", Limits{MemoryLimitBytes: 48 << 20, CallTimeout: limitTimeout})
	ge := requireGuestError(t, err, ErrMemoryLimit)
	t.Logf("go guest: %v", ge.Message)

	// Grow 16 pages at a time until refused, then trap.
	bomb := cat([]byte{0x03, 0x40}, i32const(16), []byte{0x40, 0x00}, i32const(-1), []byte{0x47, 0x0d, 0x00, 0x0b, 0x00}, i32const(0))
	in := handmade(t, abiModule(nil, "bomb", bomb), Limits{MemoryLimitBytes: 8 << 20, CallTimeout: limitTimeout})
	requireGuestError(t, in.Process(context.Background(), textRecords("x")), ErrMemoryLimit)
	stillHealthy(t)
}

func TestMemoryCapBelowModuleMinimum(t *testing.T) {
	_, mod := testGuest(t)
	_, err := mod.Instantiate(context.Background(), TaskConfig{
		Parallelism: 1, Limits: Limits{MemoryLimitBytes: 1 << 20},
		Chain: []jobgraph.Vertex{{ID: 2, Kind: jobgraph.KindMap}},
	})
	requireGuestError(t, err, ErrMemoryLimit)
}

func TestDeepRecursionOverflowsStack(t *testing.T) {
	// A Wasm function that calls itself forever: wazero's stack ceiling.
	// Many parameters make each frame big, so the ceiling comes sooner.
	const params = 200
	rec := hFunc{name: "recurse_forever", params: bytes.Repeat([]byte{tI64}, params)}
	var args []byte
	for i := 0; i < params; i++ {
		rec.body = uleb(append(rec.body, 0x20), uint64(i)) // local.get i
		args = append(args, 0x42, 0)                       // i64.const 0
	}
	rec.body = append(rec.body, call(6)...)
	in := handmade(t, abiModule(nil, "process", cat(args, call(6), i32const(0)), rec), Limits{CallTimeout: limitTimeout})
	ge := requireGuestError(t, in.Process(context.Background(), textRecords("x")), ErrStackOverflow)
	t.Logf("wasm: %v", ge)

	// A Go guest: its goroutine stack lives in linear memory and the SDK
	// caps it, so the Go runtime reports the overflow and exits.
	_, err := hostileProcess(t, "recurse", Limits{CallTimeout: limitTimeout})
	ge = requireGuestError(t, err, ErrStackOverflow)
	if !strings.Contains(ge.Output, "stack overflow") {
		t.Errorf("stderr tail lacks the Go runtime's report:\n%s", ge.Output)
	}
	stillHealthy(t)
}

func TestBadPointersTrapTheGuest(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"emit-out-of-range", "outside guest memory"},
		{"emit-overflow", "outside guest memory"},
		{"emit-garbage", "malformed batch"},
		{"state-overflow", "state_get"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, err := hostileProcess(t, tc.mode, Limits{})
			ge := requireGuestError(t, err, ErrTrap)
			if !strings.Contains(ge.Message, tc.want) {
				t.Errorf("message %q lacks %q", ge.Message, tc.want)
			}
			if !strings.Contains(ge.Stack, "main.plan.hostile") {
				t.Errorf("stack does not name the guest function:\n%s", ge.Stack)
			}
		})
	}
	// Hand-made: emit with ptr+len wrapping around 2^32.
	imp := []hImport{{module: "sluice", name: "emit", params: []byte{tI32, tI32}}}
	in := handmade(t, abiModule(imp, "process", cat(i32const(-16), i32const(32), call(0), i32const(0))), Limits{})
	ge := requireGuestError(t, in.Process(context.Background(), textRecords("x")), ErrTrap)
	if !strings.Contains(ge.Message, "outside guest memory") {
		t.Errorf("message %q", ge.Message)
	}
	stillHealthy(t)
}

func TestTrapNamesTheGuestFunction(t *testing.T) {
	in := handmade(t, abiModule(nil, "crash_in_operator", []byte{0x00}), Limits{})
	ge := requireGuestError(t, in.Process(context.Background(), textRecords("x")), ErrTrap)
	if ge.Function != abi.ExportProcess || !strings.Contains(ge.Stack, "crash_in_operator") || !strings.Contains(ge.Message, "unreachable") {
		t.Errorf("error does not name the function:\n%v", ge)
	}
	if !strings.Contains(ge.Error(), "crash_in_operator") {
		t.Errorf("Error() lacks the stack:\n%s", ge.Error())
	}

	// A panic in Go user code: the SDK recovers it and reports the Go stack.
	_, err := hostileProcess(t, "panic", Limits{})
	ge = requireGuestError(t, err, ErrGuestFailed)
	if !strings.Contains(ge.Message, "assignment to entry in nil map") || !strings.Contains(ge.Message, "main.plan.hostile") {
		t.Errorf("panic report:\n%s", ge.Message)
	}
}

func TestExit(t *testing.T) {
	_, err := hostileProcess(t, "exit", Limits{})
	ge := requireGuestError(t, err, ErrExit)
	if !strings.Contains(ge.Message, "exit code 3") {
		t.Errorf("message %q", ge.Message)
	}
	stillHealthy(t)
}

func TestNoFileSystemNoEnvironment(t *testing.T) {
	for mode, check := range map[string]func(string) bool{
		"openfile":  func(s string) bool { return strings.HasPrefix(s, "open failed:") },
		"writefile": func(s string) bool { return strings.HasPrefix(s, "write: ") && s != "write: <nil>" },
		"env":       func(s string) bool { return s == `environ=0 HOME=""` },
	} {
		tt, err := hostileProcess(t, mode, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if out := values(tt.out); len(out) != 1 || !check(out[0]) {
			t.Errorf("%s: guest saw %q", mode, out)
		}
	}
}

func TestGuestOutputGoesToTheTaskLogBounded(t *testing.T) {
	var buf testutil.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	tt := openTask(t, []string{"hostile", "stdout"}, []int{2}, TaskConfig{Logger: logger, Limits: Limits{MaxLogBytes: 10 << 10}})
	if err := tt.in.Process(context.Background(), textRecords("x")); err != nil {
		t.Fatal(err)
	}
	tt.in.Close(context.Background())
	logs := buf.String()
	if !strings.Contains(logs, `msg="line 0 xxx`) || !strings.Contains(logs, "stream=stdout") {
		t.Errorf("stdout not logged:\n%.500s", logs)
	}
	if !strings.Contains(logs, "guest output dropped from here on") || !strings.Contains(logs, "guest output dropped") {
		t.Errorf("no truncation note:\n%.500s", logs)
	}
	if strings.Contains(logs, "line 999") {
		t.Error("output beyond the budget was logged")
	}
	if len(logs) > 40<<10 {
		t.Errorf("%d bytes of log for a 10 KiB budget", len(logs))
	}
}

func TestManyInstancesConcurrentlyLeakNothing(t *testing.T) {
	_, mod := testGuest(t)
	ctx := context.Background()
	g, err := mod.Plan(ctx, []string{"identity"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	chain := []jobgraph.Vertex{g.Vertices[1]}
	run := func(n int) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var got int
				in, err := mod.Instantiate(ctx, TaskConfig{
					TaskName: "leak", Parallelism: 1, Chain: chain, Args: []string{"identity"},
					// 200 runtimes starting at once on a loaded machine under
					// -race can each take longer than the default deadline;
					// this test is about leaks, not deadlines.
					Limits: Limits{CallTimeout: 5 * time.Minute},
					Emit:   func(recs []abi.Record) error { got += len(recs); return nil },
				})
				if err != nil {
					errs <- err
					return
				}
				defer in.Close(ctx)
				if err := in.Open(ctx); err != nil {
					errs <- err
					return
				}
				if err := in.Process(ctx, textRecords("a", "b", "c")); err != nil {
					errs <- err
					return
				}
				if got != 3 {
					errs <- errors.New("lost records")
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(20) // warm up pools and caches
	before := heapInUse()
	goroutines := runtime.NumGoroutine()
	run(200)
	after := heapInUse()
	t.Logf("heap in use: %d MiB before, %d MiB after 200 instances", before>>20, after>>20)
	if after > before+32<<20 {
		t.Errorf("heap grew by %d MiB after 200 closed instances", (after-before)>>20)
	}
	// Goroutines wazero starts per call end shortly after the call.
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := runtime.NumGoroutine(); n > goroutines+2 {
			return fmt.Errorf("%d goroutines, want at most 2 above the %d there were before", n, goroutines)
		}
		return nil
	})
}

func heapInUse() uint64 {
	var m runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A spinning guest must not stop the world: Go cannot preempt compiled Wasm,
// so a garbage collection that starts while a guest spins waits for the guest
// to come back to Go — and the deadline timer cannot run until it does.
func TestInfiniteLoopDuringGCStopsAtDeadline(t *testing.T) {
	// The guest calls now_ms, then spins: the host call tells the test the
	// guest has entered its loop.
	now := []hImport{{module: abi.HostModule, name: abi.ImportNow, results: []byte{tI64}}}
	spin := cat(call(0), []byte{0x1a}, []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}, i32const(0)) // now_ms; drop; loop br 0 end
	in := handmade(t, abiModule(now, "spin", spin), Limits{CallTimeout: 300 * time.Millisecond})
	before := in.stats.hostCalls.Load()
	done := make(chan error, 1)
	go func() { done <- in.Process(context.Background(), textRecords("x")) }()
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := in.stats.hostCalls.Load(); n <= before {
			return fmt.Errorf("%d host calls, the %d before the guest ran: it has not called now_ms yet", n, before)
		}
		return nil
	})
	runtime.GC()
	requireGuestError(t, <-done, ErrDeadline)
	stillHealthy(t)
}
