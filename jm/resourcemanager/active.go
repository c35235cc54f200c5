package resourcemanager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Defaults of active mode (a Config with a Driver).
const (
	DefaultMaxTaskManagers         = 8
	DefaultTaskManagerSlots        = 2
	DefaultTaskManagerIdleTimeout  = 30 * time.Second
	DefaultTaskManagerStartTimeout = 2 * time.Minute
	// maxDriverBackoff bounds the wait after failed driver requests.
	maxDriverBackoff = 30 * time.Second
)

// A worker is a TaskManager the driver started (or one it recovered):
//
//	RequestTaskManager ok       RegisterTaskManager
//	 ─────────────────► STARTING ─────────────────► REGISTERED ──┐ used > 0:
//	                      │  no registration           │  ▲  ◄───┘ idleSince reset
//	                      │  within StartTimeout       │  │
//	                      ▼                            │  └─ a slot is taken
//	                   released ◄── idle for ──────────┤
//	                      ▲         IdleTimeout, no    │ heartbeat timeout
//	                      │         request waiting    ▼
//	                      └───────────────────── (dead: released too)
//
// A driver's OnTerminated forgets a worker in any state; the allocations
// it held are lost, and waiting requests ask for a replacement.
type worker struct {
	registered bool
	// recovered: an earlier JobManager started it. One that does not
	// register is forgotten, not stopped: it may serve another
	// JobManager of the cluster (this one may be an HA standby).
	recovered bool
	since     time.Time // requested, or (registered) idle since; zero while used
}

// activeState is the ResourceManager's active-mode bookkeeping, guarded by
// its lock.
type activeState struct {
	ready    bool // Initialize returned
	workers  map[string]*worker
	starting int // requests in flight
	// endedEarly holds workers the driver reported terminated before
	// RequestTaskManager returned them; emptied when no request is in
	// flight.
	endedEarly map[string]string
	failures   int // consecutive failed requests
	retryAt    time.Time
}

func (c *Config) activeDefaults() {
	if c.Driver == nil {
		return
	}
	if c.MaxTaskManagers <= 0 {
		c.MaxTaskManagers = DefaultMaxTaskManagers
	}
	if c.TaskManagerSpec.Slots <= 0 {
		c.TaskManagerSpec.Slots = DefaultTaskManagerSlots
	}
	if c.TaskManagerIdleTimeout <= 0 {
		c.TaskManagerIdleTimeout = DefaultTaskManagerIdleTimeout
	}
	if c.TaskManagerStartTimeout <= 0 {
		c.TaskManagerStartTimeout = DefaultTaskManagerStartTimeout
	}
}

// StartDriver initializes the driver (a no-op without one): from then on,
// slot requests that cannot be met start TaskManagers registering with
// jobManagerAddress, and idle ones are released. The JobManager calls it
// once it serves, so the TaskManagers started can register.
//
// # Errors
//
// The driver's Initialize error; active mode stays off then.
func (rm *ResourceManager) StartDriver(ctx context.Context, jobManagerAddress string) error {
	d := rm.cfg.Driver
	if d == nil {
		return nil
	}
	recovered, err := d.Initialize(ctx, DriverEnv{
		JobManagerAddress: jobManagerAddress,
		OnTerminated:      rm.workerTerminated,
		Logger:            rm.log.With("driver", d.Name()),
	})
	if err != nil {
		return fmt.Errorf("initialize the %s driver: %w", d.Name(), err)
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	now := rm.cfg.Now()
	for _, id := range recovered {
		_, reg := rm.sm.Used(id)
		rm.act.workers[id] = &worker{registered: reg, recovered: true, since: now}
	}
	rm.act.ready = true
	rm.log.Info("active mode", "driver", d.Name(), "max_taskmanagers", rm.cfg.MaxTaskManagers,
		"slots_per_taskmanager", rm.cfg.TaskManagerSpec.Slots, "idle_timeout", rm.cfg.TaskManagerIdleTimeout, "recovered", len(recovered))
	rm.scaleUpLocked()
	return nil
}

// capacityLocked is the most slots the cluster could offer: what is
// registered, plus what the driver may still start.
func (rm *ResourceManager) capacityLocked() int {
	regWorkers := 0
	for _, w := range rm.act.workers {
		if w.registered {
			regWorkers++
		}
	}
	return rm.sm.Total() + max(rm.cfg.MaxTaskManagers-regWorkers, 0)*rm.cfg.TaskManagerSpec.Slots
}

// beyondLimitLocked returns the error for a request of n slots the driver's
// maximum can never meet, or nil.
func (rm *ResourceManager) beyondLimitLocked(n int) error {
	if rm.cfg.Driver == nil {
		return nil
	}
	if c := rm.capacityLocked(); n > c {
		return rm.limitError(n, rm.sm.Free(), c)
	}
	return nil
}

func (rm *ResourceManager) limitError(n, free, capacity int) error {
	return rpcerr.Errorf(rpcerr.ErrNotEnoughSlots,
		"not enough slots: need %d, free %d, and at most %d with the %s driver's limit of %d task managers of %d slots: raise --max-taskmanagers or --tm-slots, or lower the job's parallelism",
		n, free, capacity, rm.cfg.Driver.Name(), rm.cfg.MaxTaskManagers, rm.cfg.TaskManagerSpec.Slots)
}

// timeoutError is the error of a request that waited the whole timeout.
func (rm *ResourceManager) timeoutErrorLocked(n int) error {
	if rm.cfg.Driver != nil && len(rm.act.workers)+rm.act.starting >= rm.cfg.MaxTaskManagers {
		return rm.limitError(n, rm.sm.Free(), rm.capacityLocked())
	}
	return rpcerr.NotEnoughSlots(n, rm.sm.Free())
}

// scaleUpLocked asks the driver for as many TaskManagers as the waiting
// requests lack, counting those already starting, up to the maximum.
func (rm *ResourceManager) scaleUpLocked() {
	if rm.cfg.Driver == nil || !rm.act.ready || rm.closed || len(rm.waiters) == 0 {
		return
	}
	now := rm.cfg.Now()
	if now.Before(rm.act.retryAt) {
		return
	}
	want := 0
	for _, w := range rm.waiters {
		want += w.n
	}
	per := rm.cfg.TaskManagerSpec.Slots
	pending := rm.act.starting
	for _, w := range rm.act.workers {
		if !w.registered {
			pending++
		}
	}
	lack := want - rm.sm.Free() - pending*per
	if lack <= 0 {
		return
	}
	k := min((lack+per-1)/per, rm.cfg.MaxTaskManagers-len(rm.act.workers)-rm.act.starting)
	for range k {
		rm.act.starting++
		rm.wg.Add(1)
		go rm.startWorker()
	}
}

// startWorker asks the driver for one TaskManager.
func (rm *ResourceManager) startWorker() {
	defer rm.wg.Done()
	d := rm.cfg.Driver
	ctx, cancel := context.WithTimeout(rm.bgCtx, rm.cfg.TaskManagerStartTimeout)
	id, err := d.RequestTaskManager(ctx, rm.cfg.TaskManagerSpec)
	cancel()
	var lost []Lost
	rm.mu.Lock()
	defer func() { rm.mu.Unlock(); rm.notify(lost) }()
	rm.act.starting--
	reason, ended := rm.act.endedEarly[id]
	if rm.act.starting == 0 {
		rm.act.endedEarly = nil
	}
	if err != nil {
		rm.act.failures++
		backoff := min(time.Duration(1<<min(rm.act.failures-1, 10))*100*time.Millisecond, maxDriverBackoff)
		rm.act.retryAt = rm.cfg.Now().Add(backoff)
		rm.log.Warn("driver could not start a task manager", "driver", d.Name(), "err", err, "retry_in", backoff)
		return
	}
	rm.act.failures = 0
	rm.act.retryAt = time.Time{}
	if rm.closed {
		rm.releaseWorkerLocked(id, "the resource manager closed while it started")
		return
	}
	if ended {
		lost = rm.sm.Remove(id, "terminated: "+reason)
		rm.log.Warn("task manager terminated as it started", "driver", d.Name(), "tm", id, "reason", reason)
		rm.scaleUpLocked()
		return
	}
	_, reg := rm.sm.Used(id) // it may have registered before the driver returned
	rm.act.workers[id] = &worker{registered: reg, since: rm.cfg.Now()}
	rm.log.Info("driver started a task manager", "driver", d.Name(), "tm", id, "slots", rm.cfg.TaskManagerSpec.Slots)
}

// releaseWorkerLocked forgets a worker and asks the driver, in the
// background, to stop it. Its allocations (none, unless it is dead) are
// returned as lost.
func (rm *ResourceManager) releaseWorkerLocked(id, why string) []Lost {
	delete(rm.act.workers, id)
	lost := rm.sm.Remove(id, "released: "+why)
	rm.log.Info("releasing task manager", "driver", rm.cfg.Driver.Name(), "tm", id, "why", why)
	rm.wg.Add(1)
	go func() {
		defer rm.wg.Done()
		// Not bgCtx: a release asked for as the ResourceManager closes must
		// still happen.
		ctx, cancel := context.WithTimeout(context.Background(), rm.cfg.TaskManagerStartTimeout)
		defer cancel()
		if err := rm.cfg.Driver.ReleaseTaskManager(ctx, id); err != nil {
			rm.log.Warn("driver could not release a task manager", "driver", rm.cfg.Driver.Name(), "tm", id, "err", err)
		}
	}()
	return lost
}

// tickActiveLocked releases workers idle longer than the idle timeout,
// workers that never registered or stopped heartbeating, and retries
// requests after a failure.
func (rm *ResourceManager) tickActiveLocked(now time.Time) (lost []Lost) {
	if rm.cfg.Driver == nil || !rm.act.ready || rm.closed {
		return nil
	}
	for id, w := range rm.act.workers {
		used, known := rm.sm.Used(id)
		switch {
		case !w.registered && known:
			w.registered, w.since = true, now
		case !w.registered && w.recovered:
			if now.Sub(w.since) > rm.cfg.TaskManagerStartTimeout {
				rm.log.Info("forgetting a recovered task manager that did not register", "tm", id, "timeout", rm.cfg.TaskManagerStartTimeout)
				delete(rm.act.workers, id)
			}
		case !w.registered:
			if now.Sub(w.since) > rm.cfg.TaskManagerStartTimeout {
				lost = append(lost, rm.releaseWorkerLocked(id, fmt.Sprintf("it did not register within %s", rm.cfg.TaskManagerStartTimeout))...)
			}
		case !known:
			lost = append(lost, rm.releaseWorkerLocked(id, "it missed its heartbeats")...)
		case used > 0:
			w.since = time.Time{}
		case w.since.IsZero():
			w.since = now
		case now.Sub(w.since) >= rm.cfg.TaskManagerIdleTimeout && len(rm.waiters) == 0:
			lost = append(lost, rm.releaseWorkerLocked(id, fmt.Sprintf("idle for %s", rm.cfg.TaskManagerIdleTimeout))...)
		}
	}
	rm.scaleUpLocked()
	return lost
}

// noteRegisteredLocked marks a worker registered.
func (rm *ResourceManager) noteRegisteredLocked(resourceID string, now time.Time) {
	if w, ok := rm.act.workers[resourceID]; ok && !w.registered {
		w.registered, w.since = true, now
	}
}

// workerTerminated is the drivers' OnTerminated.
func (rm *ResourceManager) workerTerminated(resourceID, reason string) {
	rm.mu.Lock()
	if _, ok := rm.act.workers[resourceID]; !ok {
		if rm.act.starting > 0 { // perhaps one RequestTaskManager has not returned yet
			if rm.act.endedEarly == nil {
				rm.act.endedEarly = map[string]string{}
			}
			rm.act.endedEarly[resourceID] = reason
		}
		rm.mu.Unlock()
		return
	}
	delete(rm.act.workers, resourceID)
	lost := rm.sm.Remove(resourceID, "terminated: "+reason)
	rm.log.Warn("task manager terminated", "driver", rm.cfg.Driver.Name(), "tm", resourceID, "reason", reason)
	rm.scaleUpLocked() // a replacement, when requests wait
	rm.mu.Unlock()
	rm.notify(lost)
}

// ActiveOverview describes active mode at one moment.
type ActiveOverview struct {
	// Driver is the driver's name; empty in standalone mode.
	Driver string
	// Starting counts TaskManagers asked for that have not registered.
	Starting int
	// Running names the registered TaskManagers the driver started.
	Running []string
}

// Active describes the driver's TaskManagers.
func (rm *ResourceManager) Active() ActiveOverview {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.cfg.Driver == nil {
		return ActiveOverview{}
	}
	o := ActiveOverview{Driver: rm.cfg.Driver.Name(), Starting: rm.act.starting}
	for id, w := range rm.act.workers {
		if w.registered {
			o.Running = append(o.Running, id)
		} else {
			o.Starting++
		}
	}
	slices.Sort(o.Running)
	return o
}
