package wasmhost

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/threadprio"
	"github.com/tetratelabs/wazero/api"
)

// flag is the interrupt global, outside a module.
type flag struct {
	api.MutableGlobal
	v uint64
}

func (f *flag) Get() uint64  { return f.v }
func (f *flag) Set(v uint64) { f.v = v }

// The timer's callback (expire) is called by hand, with a budget of an
// hour so the real timer never fires: what is checked is the accounting,
// not the machine's timing.
func TestDeadlineCountsTheThreadsCPUTime(t *testing.T) {
	var cpu time.Duration
	clock := func() (time.Duration, bool) { return cpu, true }
	newDeadline := func(cpuClock func() (time.Duration, bool)) *deadline {
		d := &deadline{stop: &flag{}}
		d.begin(time.Hour, cpuClock)
		t.Cleanup(func() { d.end() })
		return d
	}

	t.Run("starved call is not stopped", func(t *testing.T) {
		cpu = 0
		d := newDeadline(clock)
		cpu = 10 * time.Minute // the timer fires with 10 of 60 minutes used
		d.expire(d.gen)
		if d.hit || d.stop.Get() != 0 {
			t.Fatal("a call that used 10 of its 60 CPU minutes was stopped")
		}
		if d.left != 50*time.Minute {
			t.Fatalf("left %v, want 50m", d.left)
		}
		cpu = 61 * time.Minute
		d.expire(d.gen)
		if !d.hit || d.stop.Get() != 1 {
			t.Fatal("a call past its CPU budget was not stopped")
		}
	})
	t.Run("pause takes the host's time out", func(t *testing.T) {
		cpu = 0
		d := newDeadline(clock)
		cpu = 5 * time.Minute
		d.pause()
		cpu = 30 * time.Minute // downstream work on the same thread
		d.resume()
		cpu = 31 * time.Minute
		d.pause()
		if d.left != 54*time.Minute {
			t.Fatalf("left %v, want 54m (60 - 5 - 1)", d.left)
		}
	})
	t.Run("wall backstop", func(t *testing.T) {
		cpu = 0
		d := newDeadline(clock)
		d.wallEnd = time.Now().Add(-time.Second)
		d.expire(d.gen)
		if !d.hit {
			t.Fatal("a call past the wall backstop was not stopped")
		}
	})
	t.Run("without a CPU clock wall time counts", func(t *testing.T) {
		d := newDeadline(nil)
		d.expire(d.gen)
		if !d.hit {
			t.Fatal("the timer fired without a CPU clock and the call went on")
		}
	})
	t.Run("this thread's clock moves", func(t *testing.T) {
		if _, ok := threadprio.CPUTime(threadprio.Self()); !ok {
			t.Skip("no per-thread CPU clock here")
		}
		h := lockThread()
		defer h.unlock()
		before, _ := h.cpuTime()
		for x := 0; ; x++ {
			now, _ := h.cpuTime()
			if now > before {
				return
			}
			if x > 1e9 {
				t.Fatal("the thread's CPU clock did not move in a billion reads")
			}
		}
	})
}
