package wasmhost

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/testutil"
)

// hasFrame reports whether a frame of s contains name.
func hasFrame(s Stack, name string) bool {
	for _, f := range s.Frames {
		if strings.Contains(f, name) {
			return true
		}
	}
	return false
}

func TestStackOfALoopingGuestNamesItsFunction(t *testing.T) {
	tt := openTask(t, []string{"hostile", "loop"}, []int{2}, TaskConfig{Limits: Limits{CallTimeout: 5 * time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tt.in.Process(ctx, textRecords("x")) }()
	defer func() {
		cancel()
		<-done
	}()

	// Idle before the loop starts, or caught in it: poll until caught.
	var one StackProfile
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		p, err := tt.in.SampleStacks(context.Background(), 0, 0)
		if err != nil {
			return err
		}
		if p.Total != 1 || len(p.Stacks) != 1 || !hasFrame(p.Stacks[0], "main.plan.hostile") {
			return fmt.Errorf("stack %+v: want one stack in main.plan.hostile", p)
		}
		one = p
		return nil
	})
	fs := one.Stacks[0].Frames
	if fs[len(fs)-1] == "" || strings.Contains(fs[len(fs)-1], "tick") {
		t.Errorf("innermost frame %q: want the guest's function, not the tick", fs[len(fs)-1])
	}
	t.Logf("stack: %s", strings.Join(fs, " <- "))

	p, err := tt.in.SampleStacks(context.Background(), 300*time.Millisecond, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var hot int64
	for _, s := range p.Stacks {
		if hasFrame(s, "main.plan.hostile") {
			hot += s.Count
		}
	}
	if p.Total < 2 || hot*2 <= p.Total {
		t.Fatalf("%d of %d samples in the looping function; want most: %+v", hot, p.Total, p.Stacks)
	}
	// A second sampler waits its turn.
	if _, err := tt.in.SampleStacks(context.Background(), 0, 0); err != nil {
		t.Fatalf("after a sample: %v", err)
	}
}

func TestStackOfAnIdleGuestIsEmpty(t *testing.T) {
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{})
	p, err := tt.in.SampleStacks(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 0 || len(p.Stacks) != 0 {
		t.Fatalf("an idle guest has stacks: %+v", p)
	}
}

// BenchmarkStackSampling measures what stack sampling costs a guest, in
// the same run: the map benchmark's guests (compute: hot loops, the most
// fuel ticks per record; upper: a small map) on a module compiled without
// the $tick listener (as before stack samples existed, but for the call to
// $tick), with it and nobody sampling ("off"), and with a sampler running
// all the time at 10ms ("on"). Rounds alternate the three; the figures are
// the medians of the per-round ratios of the calling thread's CPU time to
// that of the module without the listener.
func BenchmarkStackSampling(b *testing.B) {
	testGuest(b)
	ctx := context.Background()
	plain, err := NewRuntime(ctx, NewRuntimeConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close(ctx)
	plain.noTickListener = true
	plainMod, err := plain.Compile(ctx, shared.wasm)
	if err != nil {
		b.Fatal(err)
	}
	_, mod := testGuest(b)
	for _, tc := range []struct {
		name, mode string
		size       int
	}{{"compute", "bench-compute", 100}, {"upper", "bench", 1000}} {
		b.Run(tc.name, func(b *testing.B) {
			recs := benchBatch(tc.size)
			emit := TaskConfig{Emit: func([]abi.Record) error { return nil }}
			none := openTaskOn(b, plainMod, []string{tc.mode}, []int{2}, emit)
			off := openTaskOn(b, mod, []string{tc.mode}, []int{2}, emit)
			on := openTaskOn(b, mod, []string{tc.mode}, []int{2}, emit)
			sctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for sctx.Err() == nil {
					on.in.SampleStacks(sctx, 100*time.Millisecond, 10*time.Millisecond)
				}
			}()
			defer func() { stop(); <-done }()
			// CPU time of the calling thread, not wall time: on a loaded
			// machine the wall time of a round is mostly other processes'.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			per := func(tt *testTask) time.Duration {
				if err := tt.in.Process(ctx, recs); err != nil {
					b.Fatal(err)
				}
				n := 0
				start, cpu0 := time.Now(), threadCPU()
				for time.Since(start) < 20*time.Millisecond {
					if err := tt.in.Process(ctx, recs); err != nil {
						b.Fatal(err)
					}
					n++
				}
				return (threadCPU() - cpu0) / time.Duration(n)
			}
			var offR, onR []float64
			var noneT []time.Duration
			b.ResetTimer()
			for i := 0; i < max(b.N, 9); i++ {
				n := per(none)
				noneT = append(noneT, n)
				offR = append(offR, float64(per(off))/float64(n))
				onR = append(onR, float64(per(on))/float64(n))
			}
			b.StopTimer()
			med := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
			slices.Sort(noneT)
			b.ReportMetric(med(offR), "off/none")
			b.ReportMetric(med(onR), "on/none")
			b.ReportMetric(float64(noneT[len(noneT)/2].Nanoseconds())/float64(tc.size), "none-cpu-ns/record")
		})
	}
}

// threadCPU is the CPU time the calling OS thread used so far.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
