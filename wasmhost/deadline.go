package wasmhost

import (
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
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
// hog.go), so a call starved of a core on a loaded machine, or demoted by
// hog.go, is not stopped for time it spent waiting; a spinning guest uses
// CPU and is stopped as before. A wall-clock backstop of wallBackstop times
// the budget stops any call in the end.

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
