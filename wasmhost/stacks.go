package wasmhost

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/sluicehq/sluice/wasmhost/internal/rewrite"
)

// Guest stack samples. The instrumented module calls its $tick function
// every rewrite.FuelInterval fuel checks (loop headers and function
// entries); a wazero function listener on $tick alone sees the guest's
// call stack there. With nobody sampling, the listener only counts the
// fuel and asks the fuel scheduler (fuel.go), every FuelInterval checks:
// the guest's own functions carry no listener and run as they did. Samples are therefore taken where the
// guest spends its checks (loop iterations and calls), not at
// wall-clock instants: a guest blocked in a host call (emit waiting for
// credit) or between calls is not sampled at all. See docs/RATIONALE.md.

// Stack is one distinct guest call stack and how many samples found it.
// Frames go from the outermost call to the innermost, each the function's
// name from the module's name section or "$<index>" without one (guest
// text: print it escaped).
type Stack struct {
	Frames []string
	Count  int64
}

// StackProfile is what sampling an instance found.
type StackProfile struct {
	Stacks []Stack // most frequent first
	Total  int64
}

// Bounds of one profile.
const (
	maxStackFrames = 128
	maxStacks      = 4096
	maxFrameName   = 256
	// maxProfileBytes bounds the frame names one profile holds: a deep,
	// varied guest cannot make an answer of hundreds of megabytes.
	maxProfileBytes = 1 << 20
	// oneStackWait bounds how long a one-stack request waits for the guest
	// to reach its next tick: a running guest does within a millisecond.
	oneStackWait = 200 * time.Millisecond
)

// ErrSampling is returned when a sample of the instance is already being
// taken.
var ErrSampling = errors.New("a stack sample of this instance is already being taken")

type stackSampler struct {
	mu     sync.Mutex
	every  time.Duration // 0: one stack, then done
	next   time.Time
	counts map[string]*Stack
	other  *Stack
	total  int64
	bytes  int
	done   chan struct{}
	ended  bool
	frames []string
}

// tickListener is the listener of every instance's $tick.
type tickListener struct{ rt *Runtime }

func (l tickListener) Before(ctx context.Context, _ api.Module, _ api.FunctionDefinition, _ []uint64, it experimental.StackIterator) {
	in, _ := ctx.Value(instKey{}).(*Instance)
	if in == nil {
		return
	}
	if l.rt.sampling.Load() != 0 {
		if s := in.sampler.Load(); s != nil {
			s.record(it)
		}
	}
	// The trip is also the fuel scheduler's preemption point (fuel.go).
	in.fuelTrip(ctx)
}

func (tickListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (tickListener) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

// listenerFactory puts tickListener on the $tick export only.
func (rt *Runtime) listenerFactory() experimental.FunctionListenerFactory {
	return experimental.FunctionListenerFactoryFunc(func(def api.FunctionDefinition) experimental.FunctionListener {
		if slices.Contains(def.ExportNames(), rewrite.TickExport) {
			return tickListener{rt: rt}
		}
		return nil
	})
}

func frameName(def api.FunctionDefinition) string {
	n := def.Name()
	if n == "" {
		return "$" + strconv.FormatUint(uint64(def.Index()), 10)
	}
	if len(n) > maxFrameName {
		n = n[:maxFrameName]
	}
	return n
}

func (s *stackSampler) record(it experimental.StackIterator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if s.every > 0 {
		now := time.Now()
		if now.Before(s.next) {
			return
		}
		s.next = now.Add(s.every)
	}
	fs := s.frames[:0]
	first := true
	deep := false
	for it.Next() {
		if first { // $tick itself
			first = false
			continue
		}
		if len(fs) == maxStackFrames {
			deep = true
			break
		}
		fs = append(fs, frameName(it.Function().Definition()))
	}
	s.frames = fs
	if deep {
		fs = append(fs, "[truncated]")
	}
	slices.Reverse(fs)
	key := strings.Join(fs, "\x00")
	s.total++
	if st, ok := s.counts[key]; ok {
		st.Count++
	} else if len(s.counts) < maxStacks && s.bytes+len(key) <= maxProfileBytes {
		s.counts[key] = &Stack{Frames: slices.Clone(fs), Count: 1}
		s.bytes += len(key)
	} else {
		if s.other == nil {
			s.other = &Stack{Frames: []string{"[other]"}}
		}
		s.other.Count++
	}
	if s.every == 0 {
		s.ended = true
		close(s.done)
	}
}

// SampleStacks samples the instance's guest call stack every interval for
// d, or with d 0 takes the current stack once (waiting for the guest to
// reach its next fuel check, at most 200ms). A guest that runs no code
// meanwhile (it waits for input, or is blocked in a host call) gives an
// empty profile. It may be called from any goroutine while another drives
// the instance; ctx ends the sampling early, with what was found so far.
//
// # Errors
//
// ErrSampling when another sample of the instance is in progress.
func (in *Instance) SampleStacks(ctx context.Context, d, interval time.Duration) (StackProfile, error) {
	s := &stackSampler{every: interval, counts: map[string]*Stack{}, done: make(chan struct{})}
	if d <= 0 {
		s.every = 0
		d = oneStackWait
	} else if s.every <= 0 {
		s.every = time.Millisecond
	}
	if !in.sampler.CompareAndSwap(nil, s) {
		return StackProfile{}, ErrSampling
	}
	rt := in.m.rt
	rt.sampling.Add(1)
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-s.done:
	}
	t.Stop()
	in.sampler.Store(nil)
	rt.sampling.Add(-1)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	p := StackProfile{Total: s.total}
	for _, st := range s.counts {
		p.Stacks = append(p.Stacks, *st)
	}
	if s.other != nil {
		p.Stacks = append(p.Stacks, *s.other)
	}
	slices.SortFunc(p.Stacks, func(a, b Stack) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return slices.Compare(a.Frames, b.Frames)
	})
	return p, nil
}
