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
	since     time.Time
	hit       bool // the deadline passed
	cancelled bool // the caller's context ended
}

func (d *deadline) begin(budget time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inCall, d.hit, d.cancelled = true, false, false
	d.left = budget
	d.armLocked()
}

func (d *deadline) armLocked() {
	d.gen++
	gen := d.gen
	d.armed = true
	d.since = time.Now()
	if d.left <= 0 {
		d.hit = true
		d.stop.Set(1)
		return
	}
	d.timer = time.AfterFunc(d.left, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.armed && d.gen == gen {
			d.hit = true
			d.stop.Set(1)
		}
	})
}

func (d *deadline) disarmLocked() {
	if d.armed {
		d.armed = false
		if d.timer != nil {
			d.timer.Stop()
		}
		d.left -= time.Since(d.since)
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
