package wasmhost

import (
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/internal/threadprio"
)

// Call deadlines: internal/rewrite adds an interrupt global to every module,
// checked at each function entry and loop header, and the deadline below
// sets it when a call's time is up; the guest traps and the host reports
// ErrDeadline. wazero's own mechanism (WithCloseOnContextDone) made Go guests
// 10 to 40 times slower (see internal/rewrite's package doc). Setting a flag
// also lets the host pause the deadline while the guest waits on it (emit
// under back-pressure).

// The budget is the guest thread's CPU time where the system can tell it
// (Linux: the calling goroutine is locked to its thread for the call, see
// callThread), so a call starved of a core on a loaded machine is not
// stopped for time it spent waiting; a spinning guest uses CPU and is
// stopped as before. A wall-clock backstop of wallBackstop times the budget
// stops any call in the end; the time a guest waits at a fuel trip for its
// tenant's share (fuel.go) moves the backstop too.

// wallBackstop bounds a call's wall time as a multiple of its budget.
const wallBackstop = 8

// deadline stops a call into the guest when its time is up, by setting the
// instance's interrupt global. Pause and resume take time the guest spends
// waiting on the host out of its budget.
type deadline struct {
	mu        sync.Mutex
	stop      api.MutableGlobal
	timer     *time.Timer
	gen       uint64
	armed     bool // the timer runs
	inCall    bool
	left      time.Duration
	since     time.Time     // when the clock last started
	cpuSince  time.Duration // the thread's CPU time then
	wallEnd   time.Time     // the backstop
	hit       bool          // the deadline passed
	cancelled bool          // the caller's context ended
	heldAt    time.Time     // when hold began; zero when not held
	// cpu reads the guest thread's CPU time; ok false means wall time
	// counts.
	cpu func() (time.Duration, bool)
}

// begin starts the clock of a call with budget; cpu reads the calling
// thread's CPU time (nil: wall time).
func (d *deadline) begin(budget time.Duration, cpu func() (time.Duration, bool)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inCall, d.hit, d.cancelled = true, false, false
	d.left = budget
	d.cpu = cpu
	d.wallEnd = time.Now().Add(wallBackstop * budget)
	d.armLocked()
}

func (d *deadline) armLocked() {
	d.gen++
	d.armed = true
	d.since = time.Now()
	d.cpuSince, _ = d.readCPU()
	if d.left <= 0 {
		d.hit = true
		d.stop.Set(1)
		return
	}
	d.startTimerLocked(d.gen, d.left)
}

func (d *deadline) startTimerLocked(gen uint64, after time.Duration) {
	d.timer = time.AfterFunc(after, func() { d.expire(gen) })
}

// expire runs when the timer fires: the budget is spent unless the thread
// used less CPU than the wall time that passed, in which case the clock
// waits for the CPU time left (up to the backstop).
func (d *deadline) expire(gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.armed || d.gen != gen {
		return
	}
	now := time.Now()
	if used, ok := d.cpuUsedLocked(); ok && now.Before(d.wallEnd) && d.left-used > time.Millisecond {
		d.left -= used
		d.since = now
		d.cpuSince += used
		d.startTimerLocked(gen, min(d.left, d.wallEnd.Sub(now)))
		return
	}
	d.hit = true
	d.stop.Set(1)
}

func (d *deadline) readCPU() (time.Duration, bool) {
	if d.cpu == nil {
		return 0, false
	}
	return d.cpu()
}

// cpuUsedLocked is the thread's CPU time since the clock last started.
func (d *deadline) cpuUsedLocked() (time.Duration, bool) {
	now, ok := d.readCPU()
	if !ok {
		return 0, false
	}
	return now - d.cpuSince, true
}

func (d *deadline) disarmLocked() {
	if d.armed {
		d.armed = false
		if d.timer != nil {
			d.timer.Stop()
		}
		if used, ok := d.cpuUsedLocked(); ok {
			d.left -= used
		} else {
			d.left -= time.Since(d.since)
		}
	}
}

// pause stops the clock while the guest waits for the host.
func (d *deadline) pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disarmLocked()
}

func (d *deadline) resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inCall && !d.armed && !d.hit {
		d.armLocked()
	}
}

// hold stops the clock, and the backstop, while the guest waits at a fuel
// trip for its tenant's share; release starts them again.
func (d *deadline) hold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disarmLocked()
	d.heldAt = time.Now()
}

func (d *deadline) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.heldAt.IsZero() {
		d.wallEnd = d.wallEnd.Add(time.Since(d.heldAt))
		d.heldAt = time.Time{}
	}
	if d.inCall && !d.armed && !d.hit {
		d.armLocked()
	}
}

// cancel interrupts the call because the caller's context ended.
func (d *deadline) cancel() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inCall {
		d.cancelled = true
		d.stop.Set(1)
	}
}

// end stops the clock and clears the interrupt; it reports whether the
// deadline passed or the context ended during the call.
func (d *deadline) end() (hit, cancelled bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disarmLocked()
	d.inCall = false
	hit, cancelled = d.hit, d.cancelled
	if hit || cancelled {
		d.stop.Set(0)
	}
	return hit, cancelled
}

// callThread keeps a guest call on one OS thread, so the deadline can read
// the call's CPU time from the thread's clock. Nothing else about the
// thread changes: its priority stays, and so does GOMAXPROCS (the fuel
// scheduler shares the CPU among tenants, fuel.go).
type callThread struct{ tid int }

// lockThread locks the calling goroutine to its thread for a call.
func lockThread() callThread {
	runtime.LockOSThread()
	return callThread{tid: threadprio.Self()}
}

// cpuTime is the CPU time the call's thread has used.
func (c callThread) cpuTime() (time.Duration, bool) { return threadprio.CPUTime(c.tid) }

func (c callThread) unlock() { runtime.UnlockOSThread() }
