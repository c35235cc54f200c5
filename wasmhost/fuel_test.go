package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/wasmhost/internal/rewrite"
)

// spinModule is a bare `loop br 0`: one fuel check per iteration, forever.
func spinModule() hModule {
	return abiModule(nil, "spin", cat([]byte{0x03, 0x40, 0x0c, 0x00, 0x0b}, i32const(0)))
}

// tenantInstance compiles m and opens a one-map task of tenant on it.
func tenantInstance(t *testing.T, m hModule, tenant string, lim Limits) *Instance {
	t.Helper()
	rt, _ := testGuest(t)
	ctx := context.Background()
	mod, err := rt.Compile(ctx, m.bytes())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	in, err := mod.Instantiate(ctx, TaskConfig{
		TaskName: "spin", Tenant: tenant, Parallelism: 1, Limits: lim,
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

// TestFuelIsDeterministic: the same calls with the same input spend the
// same fuel, to the check, in two instances; the count is exact, not a
// multiple of the trip interval.
func TestFuelIsDeterministic(t *testing.T) {
	ctx := context.Background()
	run := func() int64 {
		tt := openTask(t, []string{"bench-compute"}, []int{2}, TaskConfig{Tenant: "determinism"})
		for i := range 20 {
			if err := tt.in.Process(ctx, textRecords(strings.Repeat(fmt.Sprintf("line %d ", i), 50), "a", "b")); err != nil {
				t.Fatal(err)
			}
		}
		return tt.in.Fuel()
	}
	a, b := run(), run()
	if a != b {
		t.Fatalf("fuel %d, then %d for the same calls", a, b)
	}
	if a < 10*rewrite.FuelInterval {
		t.Fatalf("fuel %d: want many trips' worth", a)
	}
	t.Logf("fuel %d (%d trips and %d)", a, a/rewrite.FuelInterval, a%rewrite.FuelInterval)
}

// TestCallFuelLimitTrapsAtTheSamePlace: a call over Limits.CallFuel traps
// with ErrFuelLimit after exactly that many checks, with the same stack
// and the same fuel on every run, long before its wall deadline.
func TestCallFuelLimitTrapsAtTheSamePlace(t *testing.T) {
	const limit = 30_000_017 // not a multiple of the trip interval
	type result struct {
		stack     string
		fuel, use int64
	}
	run := func() result {
		tt := openTask(t, []string{"hostile", "loop"}, []int{2}, TaskConfig{Limits: Limits{CallFuel: limit, CallTimeout: limitTimeout}})
		before := tt.in.Fuel()
		err := tt.in.Process(context.Background(), textRecords("x"))
		ge := requireGuestError(t, err, ErrFuelLimit)
		if errors.Is(err, ErrDeadline) || !strings.Contains(ge.Message, "fuel limit of 30000017") {
			t.Errorf("message %q", ge.Message)
		}
		if !errors.Is(tt.in.Process(context.Background(), textRecords("y")), ErrFuelLimit) {
			t.Error("a stopped instance answered")
		}
		t.Logf("fuel before the call (instantiation and open): %d", before)
		return result{stack: ge.Stack, fuel: tt.in.Fuel(), use: tt.in.Fuel() - before}
	}
	a, b := run(), run()
	if a != b {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
	if a.use != limit {
		t.Errorf("the call spent %d fuel, want its limit %d", a.use, limit)
	}
	if !strings.Contains(a.stack, "hostile") {
		t.Errorf("stack %q does not name the guest's loop", a.stack)
	}
	// The limit covers every call: a guest's instantiation too.
	_, mod := testGuest(t)
	chain := []jobgraph.Vertex{{ID: 2, Name: "identity", Kind: jobgraph.KindMap}}
	_, err := mod.Instantiate(context.Background(), TaskConfig{Parallelism: 1, Chain: chain, Limits: Limits{CallFuel: 1000}})
	if ge := requireGuestError(t, err, ErrFuelLimit); ge.Function != abi.ExportInitialize {
		t.Errorf("function %q, want %s", ge.Function, abi.ExportInitialize)
	}
	stillHealthy(t)
}

// spinUntil runs in's spinning call in the background until the returned
// stop is called.
func spinUntil(t *testing.T, in *Instance) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := in.Process(ctx, textRecords("x"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("spin ended with %v, want its cancel", err)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// TestWeightsSplitFuelOneToThree: two tenants with weights 1 and 3 spin
// side by side in one runtime; their fuel, counted once both run, is in the
// ratio 1:3 within 10% whatever the machine's load (fuel, not time).
func TestWeightsSplitFuelOneToThree(t *testing.T) {
	lim := Limits{CallTimeout: 10 * time.Minute}
	la, lb := lim, lim
	la.CPUWeight, lb.CPUWeight = 1, 3
	a := tenantInstance(t, spinModule(), "ratio-a", la)
	b := tenantInstance(t, spinModule(), "ratio-b", lb)
	rt := a.m.rt
	openA, openB := a.Fuel(), b.Fuel()
	stopA, stopB := spinUntil(t, a), spinUntil(t, b)
	defer stopA()
	defer stopB()
	// Count from the moment both spin (both made trips): before, one may
	// have run alone.
	var a0, b0 int64
	testutil.CheckFor(t, time.Minute, time.Millisecond, func() error {
		a0, b0 = a.Fuel(), b.Fuel()
		if a0 < openA+2*rewrite.FuelInterval || b0 < openB+2*rewrite.FuelInterval {
			return fmt.Errorf("fuel a %d, b %d: both do not spin yet", a0, b0)
		}
		return nil
	})
	const enough = 10_000 * rewrite.FuelInterval // far above the scheduler's slack
	var da, db int64
	testutil.CheckFor(t, 5*time.Minute, 10*time.Millisecond, func() error {
		da, db = a.Fuel()-a0, b.Fuel()-b0
		if da+db < enough {
			return fmt.Errorf("fuel a %d, b %d since both ran: not enough yet", da, db)
		}
		return nil
	})
	ratio := float64(db) / float64(da)
	t.Logf("fuel a %d, b %d: b/a %.3f", da, db, ratio)
	if ratio < 3*0.9 || ratio > 3*1.1 {
		t.Errorf("b/a fuel %.3f, want 3 within 10%%", ratio)
	}
	if tf := rt.TenantFuel(); tf["ratio-a"] < a0+da || tf["ratio-b"] < b0+db {
		t.Errorf("tenant fuel %v below the instances' (a %d, b %d)", tf, a0+da, b0+db)
	}
}

// TestTenantAloneIsNotHeld: a tenant's spinning guest beside another
// tenant's idle instance (open, but in no call) is never held: it spends
// at its own pace, as alone.
func TestTenantAloneIsNotHeld(t *testing.T) {
	lim := Limits{CallTimeout: 10 * time.Minute}
	heavy := lim
	heavy.CPUWeight = 100
	tenantInstance(t, spinModule(), "idle-heavy", heavy) // opened, then idle
	a := tenantInstance(t, spinModule(), "busy-light", lim)
	stop := spinUntil(t, a)
	defer stop()
	// Far beyond the slack the heavy tenant would allow a light one that
	// it ran beside.
	testutil.CheckFor(t, 5*time.Minute, 10*time.Millisecond, func() error {
		if f := a.Fuel(); f < 1000*fuelConfig.Lag {
			return fmt.Errorf("fuel %d: held?", f)
		}
		return nil
	})
}

// TestFuelPerSecondCapsATenant: a capped tenant alone never spends more
// than its rate over the time it ran, plus its burst.
func TestFuelPerSecondCapsATenant(t *testing.T) {
	const rate = 20_000_000
	in := tenantInstance(t, spinModule(), "capped", Limits{CallTimeout: 10 * time.Minute, FuelPerSecond: rate})
	before := in.Fuel()
	t0 := time.Now()
	stop := spinUntil(t, in)
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if in.Fuel()-before < 4*rate/10 {
			return errors.New("not running long enough yet")
		}
		return nil
	})
	stop()
	spent, took := in.Fuel()-before, time.Since(t0)
	if limit := int64(rate*took.Seconds()) + max(fuelConfig.Burst, rate/10) + rewrite.FuelInterval; spent > limit {
		t.Fatalf("spent %d fuel in %v at a cap of %d/s: above %d", spent, took, rate, limit)
	}
	t.Logf("spent %d fuel in %v at a cap of %d/s", spent, took, rate)
}
