package executor

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice/internal/control"
)

// DefaultWarmLimit is how many modules a ModuleCache may hold before
// warming stops adding to it: warming never grows the cache past it (a
// deployment's own compile always runs).
const DefaultWarmLimit = 16

// warmer is the ModuleCache's background compile queue, guarded by the
// cache's mu. One goroutine at most works through it, started when the
// queue gets work and gone when it is empty, so an idle cache runs none.
type warmer struct {
	limit   int
	queue   []control.ModuleRef
	queued  map[string]bool // digests in queue
	running bool
	wg      sync.WaitGroup
}

// Warm queues modules to fetch and compile in the background, in order,
// one at a time (the runtime's compile gate bounds them beside the
// deployments' own), so a later deployment of one finds it compiled (or joins its compile under way).
// Modules held or queued already are skipped, and so is everything once
// the cache holds, or has queued, DefaultWarmLimit modules. It returns at
// once, with the number of modules it queued. Fetching goes through
// Module, so the tenant's blob key and the digest are checked as for a
// deployment; a failure is dropped (the deployment will report it).
//
// Work ends when ctx does; Wait waits for it.
func (c *ModuleCache) Warm(ctx context.Context, refs []control.ModuleRef) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &c.warm
	n := 0
	for _, r := range refs {
		if _, held := c.mem.items[r.Digest]; held || c.loading[r.Digest] != nil || w.queued[r.Digest] {
			continue
		}
		if len(c.mem.items)+len(c.loading)+len(w.queue) >= w.limit {
			break
		}
		if w.queued == nil {
			w.queued = make(map[string]bool)
		}
		w.queue = append(w.queue, r)
		w.queued[r.Digest] = true
		n++
	}
	if n > 0 && !w.running {
		w.running = true
		w.wg.Add(1)
		go c.warmLoop(ctx)
	}
	return n
}

// Wait waits until no background compile runs.
func (c *ModuleCache) Wait() { c.warm.wg.Wait() }

func (c *ModuleCache) warmLoop(ctx context.Context) {
	defer c.warm.wg.Done()
	for {
		c.mu.Lock()
		w := &c.warm
		if len(w.queue) == 0 || ctx.Err() != nil {
			w.queue, w.queued, w.running = nil, nil, false
			c.mu.Unlock()
			return
		}
		r := w.queue[0]
		w.queue = w.queue[1:]
		delete(w.queued, r.Digest)
		c.mu.Unlock()
		// Failures are the deployment's to report.
		_, _ = c.get(ctx, r.Tenant, r.Digest, false)
	}
}
