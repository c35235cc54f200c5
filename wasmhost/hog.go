package wasmhost

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A guest call that runs longer than hogAfter has its OS thread lowered to
// the weakest scheduling priority until it returns, so a spinning or
// runaway guest (one tenant's infinite loop, waiting for its deadline)
// yields the cores to every other task instead of taking one for the whole
// deadline. A normal call handles one batch in milliseconds and is never
// touched. Go cannot preempt compiled Wasm, so the host cannot pause the
// guest itself; the kernel's scheduler can (per-thread nice values on
// Linux; elsewhere a no-op). See docs/RATIONALE.md.
//
// The spinning guest also holds one of the Go scheduler's Ps (GOMAXPROCS)
// for as long as it runs, which a lower priority does not give back: with
// two Ps, the rest of the process would be left one. So a demoted call
// lends its P: GOMAXPROCS goes up by one until the call returns.
const hogAfter = 20 * time.Millisecond

// procsMu serializes the read-modify-write of GOMAXPROCS by demoted calls
// of every Runtime in the process (GOMAXPROCS is the process's).
var procsMu sync.Mutex

func addProcs(delta int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + delta)
}

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
	h := &hogWatch{tid: threadID()}
	h.timer = time.AfterFunc(hogAfter, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.done && setThreadNice(h.tid, hogNice) == nil {
			h.demoted = true
			demotions.Add(1)
			addProcs(1)
		}
	})
	return h
}

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
	addProcs(-1)
	if setThreadNice(h.tid, 0) == nil {
		runtime.UnlockOSThread()
	}
}
