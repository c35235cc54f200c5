package wasmhost

import (
	"context"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/wasmhost/internal/fuelshare"
	"github.com/sluicehq/sluice/wasmhost/internal/rewrite"
)

// CPU shares by fuel. Every instrumented guest comes back to Go at its fuel
// trips (internal/rewrite: $fuel reaches 0 and $tick runs, with the $tick
// listener of stacks.go). The host sets $fuel itself before each call and
// at each trip, so it knows exactly how much fuel the guest spent: the
// count is the same for the same calls with the same input. At a trip the
// runtime's scheduler (internal/fuelshare) decides whether the guest's
// tenant is over its share; if it is, the guest waits there, blocked in Go,
// until the tenants behind it catch up or stop running. That is a real
// preemption point: no thread priority and no GOMAXPROCS change, and the
// kernel never decides which tenant waits. See docs/RATIONALE.md, "Why
// fuel, not nice values?".

// The scheduler's configuration (fuelshare.Config): a tenant may run 4
// trips (over its weight) ahead of the slowest running tenant before it
// waits; a rate-capped tenant spends 8 trips at once at most (or a tenth
// of a second of its rate); a call that has spent 2^20 checks (64 trips:
// a spinning guest's first millisecond or so, more than the calls of a
// batch of records take) is a long call, whose fuel costs its tenant 256
// times as much, and which yields its thread at every trip
// (docs/RATIONALE.md, "Why does a long call cost its tenant more fuel?").
var fuelConfig = fuelshare.Config{
	Lag:        4 * rewrite.FuelInterval,
	Burst:      8 * rewrite.FuelInterval,
	LongCall:   1 << 20,
	LongCharge: 256,
}

// fuelGate is a runtime's fuel scheduler and the guests waiting at their
// trips. Its methods are safe for concurrent use.
type fuelGate struct {
	mu      sync.Mutex
	s       *fuelshare.Scheduler
	waiting int
	wake    chan struct{} // closed, and replaced, when waiting guests should ask again
	// until is the least virtual time a waiting guest needs the slowest
	// running tenant to reach (fuelshare.Decision.Until): a spend below it
	// wakes nobody.
	until float64
	now   func() time.Time
	off   bool // count only (RuntimeConfig.WithFuelShares(false))
}

func newFuelGate(off bool) *fuelGate {
	return &fuelGate{s: fuelshare.New(fuelConfig), wake: make(chan struct{}), until: math.Inf(1), now: time.Now, off: off}
}

func (g *fuelGate) wakeLocked() {
	if g.waiting > 0 {
		close(g.wake)
		g.wake = make(chan struct{})
	}
	g.until = math.Inf(1)
}

func (g *fuelGate) start(tenant string, sh fuelshare.Share) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.s.Start(tenant, sh, g.now())
}

// stop records the fuel a guest spent since its last trip, in a call that
// had spent call before, and that it stopped running guest code.
func (g *fuelGate) stop(tenant string, spent, call int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.s.Spend(tenant, spent, call)
	g.s.Stop(tenant)
	g.wakeLocked()
}

// spend records fuel spent at a trip (call as for stop) and reports
// whether the guest may go on at once.
func (g *fuelGate) spend(tenant string, spent, call int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.s.Spend(tenant, spent, call)
	if g.off {
		return true
	}
	if g.s.VirtualTime(tenant) >= g.until {
		g.wakeLocked()
	}
	return g.decideLocked(tenant).Go
}

// decideLocked asks the scheduler about a guest of tenant and keeps what
// the waiting guests need to know.
func (g *fuelGate) decideLocked(tenant string) fuelshare.Decision {
	d := g.s.Ready(tenant, g.now())
	switch {
	case d.Go:
	case d.Left:
		// The tenant waits for its rate bucket, out of the others'
		// comparison, which may free them.
		g.wakeLocked()
	case d.RetryAt.IsZero():
		g.until = min(g.until, d.Until)
	}
	return d
}

// wait blocks until a guest of tenant may go on, or ctx ends.
func (g *fuelGate) wait(ctx context.Context, tenant string) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		d := g.decideLocked(tenant)
		if d.Go {
			g.mu.Unlock()
			return
		}
		g.waiting++
		wake := g.wake
		g.mu.Unlock()
		var retry <-chan time.Time
		if !d.RetryAt.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(d.RetryAt))
			} else {
				timer.Reset(time.Until(d.RetryAt))
			}
			retry = timer.C
		}
		select {
		case <-wake:
		case <-retry:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// tenants returns the fuel each tenant's guests spent in the runtime.
func (g *fuelGate) tenants() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.s.Tenants()
}

// TenantFuel returns the fuel each tenant's guests spent in this runtime so
// far (TaskConfig.Tenant; "" for instances without one), counted at every
// fuel trip and at the end of every call. It may be called from any
// goroutine.
func (rt *Runtime) TenantFuel() map[string]int64 { return rt.fuel.tenants() }

// fuelMeter counts one instance's fuel. Only the goroutine driving the
// instance touches it (the trips run on it, inside its calls).
type fuelMeter struct {
	global api.MutableGlobal // $fuel: checks left until the next trip
	share  fuelshare.Share
	// callLimit is Limits.CallFuel; callUsed the fuel of the call running.
	callLimit, callUsed int64
	armed               int64 // what $fuel was last set to
	total               int64
	hit                 bool // the call used its fuel limit
	running             bool // the gate counts the instance as running
}

// arm sets $fuel to the checks until the next trip: a full interval, or
// what is left of the call's fuel limit.
func (in *Instance) armFuel() {
	f := &in.meter
	n := int64(rewrite.FuelInterval)
	if f.callLimit > 0 {
		n = min(n, max(f.callLimit-f.callUsed, 1))
	}
	f.armed = n
	f.global.Set(api.EncodeI32(int32(n)))
}

// fuelBegin starts counting a call's fuel.
func (in *Instance) fuelBegin() {
	f := &in.meter
	if f.global == nil {
		return
	}
	f.callUsed, f.hit = 0, false
	in.armFuel()
	in.fuelStart()
}

// fuelStart and fuelStop tell the scheduler the guest runs guest code, or
// no longer does (its call returned, or it waits for the host).
func (in *Instance) fuelStart() {
	if in.meter.global != nil && !in.meter.running {
		in.meter.running = true
		in.m.rt.fuel.start(in.cfg.Tenant, in.meter.share)
	}
}

func (in *Instance) fuelStop() {
	f := &in.meter
	if f.global == nil || !f.running {
		return
	}
	f.running = false
	// The fuel since the last trip, so far: $fuel counts down from armed.
	left := int64(uint32(f.global.Get()))
	spent := max(f.armed-left, 0)
	f.armed = left
	in.addFuel(spent)
	in.m.rt.fuel.stop(in.cfg.Tenant, spent, f.callUsed-spent)
}

func (in *Instance) addFuel(n int64) {
	in.meter.total += n
	in.meter.callUsed += n
	in.fuel.Store(in.meter.total)
}

// fuelEnd ends the count of a call.
func (in *Instance) fuelEnd() { in.fuelStop() }

// fuelTrip runs at every trip of the guest, on its goroutine, inside the
// call: it counts the fuel since the last one, stops the call at its fuel
// limit, and waits while the tenant is over its share.
func (in *Instance) fuelTrip(ctx context.Context) {
	f := &in.meter
	if f.global == nil || !f.running {
		return
	}
	spent := f.armed
	in.addFuel(spent)
	if f.callLimit > 0 && f.callUsed >= f.callLimit {
		// The guest traps right after this trip: at the same check on
		// every run with the same input.
		f.hit = true
		in.deadline.stop.Set(1)
		in.m.rt.fuel.spend(in.cfg.Tenant, spent, f.callUsed-spent)
		in.armFuel()
		return
	}
	if !in.m.rt.fuel.spend(in.cfg.Tenant, spent, f.callUsed-spent) {
		// Time the guest waits for its share is not its own.
		in.deadline.hold()
		in.m.rt.fuel.wait(ctx, in.cfg.Tenant)
		in.deadline.release()
		if ctx.Err() != nil {
			// Stop here, over the share, rather than spin unheld until
			// the context's AfterFunc runs.
			in.deadline.cancel()
		}
	}
	if f.callUsed >= fuelConfig.LongCall {
		// A long call yields its thread to whatever else is ready to
		// run, the host work of other tasks first among it.
		runtime.Gosched()
	}
	in.armFuel()
}
