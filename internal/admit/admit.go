package admit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrBusy is the error of an Acquire whose key already has as many callers
// waiting as the Gate queues per key.
var ErrBusy = errors.New("too much work in progress")

// Gate admits at most Global holders at once, at most PerKey of them under
// one key. Callers beyond those wait in arrival order, but a waiter whose
// key is at its PerKey bound never holds up a waiter of another key: a
// freed place goes to the first waiter whose key may take it. At most Queue
// callers of one key wait; more are refused with ErrBusy, so a flood of one
// key costs a bounded number of goroutines.
//
// The zero Gate is not usable; create one with New. A Gate is safe for
// concurrent use.
type Gate struct {
	global, perKey, queue int

	mu      sync.Mutex
	total   int
	held    map[string]int
	waiting map[string]int
	waiters []*waiter
}

type waiter struct {
	key   string
	ready chan struct{}
}

// New returns a Gate; a bound below 1 is taken as 1 (queue may be 0: no
// waiting, refuse at once).
func New(global, perKey, queue int) *Gate {
	return &Gate{
		global: max(global, 1), perKey: max(perKey, 1), queue: max(queue, 0),
		held: make(map[string]int), waiting: make(map[string]int),
	}
}

// Acquire waits for a place under key and returns the function that gives
// it back; call it exactly once.
//
// # Errors
//
// ErrBusy (wrapped, with the counts) when Queue callers of key already
// wait; ctx's error when it ends first.
func (g *Gate) Acquire(ctx context.Context, key string) (release func(), err error) {
	g.mu.Lock()
	if g.admissible(key) && !g.queuedAhead(key) {
		g.take(key)
		g.mu.Unlock()
		return g.releaser(key), nil
	}
	if g.waiting[key] >= g.queue {
		held, waiting := g.held[key], g.waiting[key]
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %d running and %d waiting for %q, the most allowed", ErrBusy, held, waiting, key)
	}
	w := &waiter{key: key, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.waiting[key]++
	g.mu.Unlock()

	select {
	case <-w.ready:
		return g.releaser(key), nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready:
		// Admitted while ctx ended: hand the place on.
		g.give(key)
	default:
		g.remove(w)
	}
	return nil, ctx.Err()
}

// Held reports how many places key holds and how many in all.
func (g *Gate) Held(key string) (byKey, total int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[key], g.total
}

// Waiting reports how many callers of key wait for a place.
func (g *Gate) Waiting(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting[key]
}

func (g *Gate) admissible(key string) bool {
	return g.total < g.global && g.held[key] < g.perKey
}

// queuedAhead: an earlier waiter could take the place a newcomer would.
func (g *Gate) queuedAhead(key string) bool {
	for _, w := range g.waiters {
		if g.admissible(w.key) {
			return true
		}
	}
	return false
}

func (g *Gate) take(key string) {
	g.total++
	g.held[key]++
}

func (g *Gate) releaser(key string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.give(key)
			g.mu.Unlock()
		})
	}
}

// give returns key's place and admits the waiters that may now go.
func (g *Gate) give(key string) {
	g.total--
	if g.held[key]--; g.held[key] == 0 {
		delete(g.held, key)
	}
	for i := 0; i < len(g.waiters); {
		w := g.waiters[i]
		if !g.admissible(w.key) {
			i++
			continue
		}
		g.remove(w)
		g.take(w.key)
		close(w.ready)
	}
}

func (g *Gate) remove(w *waiter) {
	for i, o := range g.waiters {
		if o == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			break
		}
	}
	if g.waiting[w.key]--; g.waiting[w.key] == 0 {
		delete(g.waiting, w.key)
	}
}
