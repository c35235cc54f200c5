package testutil

import (
	"runtime"
	"time"
)

// HeapPeak samples the heap in use (runtime.MemStats.HeapInuse) every 2 ms
// until the returned stop is called, which returns the highest value seen
// above the level at the start (after a GC). It is how a test bounds the
// memory a piece of work takes.
func HeapPeak() (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		return peak - base
	}
}
