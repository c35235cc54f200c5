package wasmhost

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/threadprio"
)

// A guest call that runs longer than hogAfter has its OS thread lowered to
// the weakest scheduling priority until it returns, so a spinning or
// runaway guest (one tenant's infinite loop, waiting for its deadline)
// yields the cores to every other task instead of taking one for the whole
// deadline. A normal call handles one batch in milliseconds and is never
// touched. Go cannot preempt compiled Wasm, so the host cannot pause the
// guest itself; the kernel's scheduler can (internal/threadprio, which also
// lends the spinning call's Go scheduler P to the rest of the process). See
// docs/RATIONALE.md.
const hogAfter = 20 * time.Millisecond

// hogWatch watches one call. The calling goroutine is locked to its thread
// for the call, so the thread the watch demotes is the guest's.
type hogWatch struct {
	mu      sync.Mutex
	tid     int
	timer   *time.Timer
	done    bool
	demoted bool
}

// watchHog starts watching the call the calling goroutine is about to
// make; demotions counts the calls demoted.
func watchHog(demotions *atomic.Int64) *hogWatch {
	runtime.LockOSThread()
	h := &hogWatch{tid: threadprio.Self()}
	h.timer = time.AfterFunc(hogAfter, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.done && threadprio.Lower(h.tid) == nil {
			h.demoted = true
			demotions.Add(1)
		}
	})
	return h
}

// cpuTime is the CPU time the watched call's thread has used (for the
// call deadline).
func (h *hogWatch) cpuTime() (time.Duration, bool) { return threadprio.CPUTime(h.tid) }

// end restores the thread. A thread whose priority cannot be raised again
// (raising needs privilege) stays locked to this goroutine, so no other
// goroutine ever runs on it; it ends with the goroutine.
func (h *hogWatch) end() {
	h.timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if !h.demoted {
		runtime.UnlockOSThread()
		return
	}
	if threadprio.Raise(h.tid) == nil {
		runtime.UnlockOSThread()
	}
}
