package resourcemanager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Defaults for Config fields left zero.
const (
	// DefaultHeartbeatInterval is a fifth of the timeout, as Flink's
	// (10s of 50s): each heartbeat costs an idle JobManager about as much
	// CPU as all else it does while idle (docs/RATIONALE.md).
	DefaultHeartbeatInterval  = 2 * time.Second
	DefaultHeartbeatTimeout   = 10 * time.Second
	DefaultSlotRequestTimeout = 30 * time.Second
)

// Config configures a ResourceManager. Zero fields take their defaults.
type Config struct {
	// LeaderSession is told to every TaskManager that registers: with HA,
	// it then refuses the calls of older leaders.
	LeaderSession string
	// HeartbeatInterval is how often TaskManagers are told to heartbeat.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a TaskManager may go without a
	// heartbeat before it is declared dead.
	HeartbeatTimeout time.Duration
	// SlotRequestTimeout is how long RequestSlots waits for enough free
	// slots before it fails with ErrNotEnoughSlots.
	SlotRequestTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnLost is told, once per job, about allocations lost with a dead or
	// restarted TaskManager. It is called from the ResourceManager's own
	// goroutines without its lock held, and must not block for long.
	OnLost func(Lost)
	// OnRegistered is told about every TaskManager that registered (or
	// registered again), from the registration call without the lock
	// held; it must not block for long.
	OnRegistered func(TaskManagerInfo)
	// OnTaskMetrics is handed the task figures of every heartbeat that has
	// any, from the heartbeat call without the lock held; it must not block
	// for long.
	OnTaskMetrics func(resourceID string, tasks []control.ExecutionMetrics)
	// FreeStale asks a TaskManager to free an allocation nobody holds any
	// more. Nil means stale allocations are only counted, never freed.
	FreeStale func(ctx context.Context, s Stale) error
	// Logger; nil means slog.Default().
	Logger *slog.Logger

	// Driver starts TaskManagers when slot requests cannot be met and
	// releases idle ones (active mode; see StartDriver). Nil means
	// standalone: TaskManagers are started by hand.
	Driver Driver
	// TaskManagerSpec is what each TaskManager the driver starts offers
	// (default DefaultTaskManagerSlots slots, the driver's memory).
	TaskManagerSpec ResourceSpec
	// MaxTaskManagers is the most TaskManagers the driver runs at once
	// (default DefaultMaxTaskManagers); a request the limit can never meet
	// fails at once with ErrNotEnoughSlots naming it.
	MaxTaskManagers int
	// TaskManagerIdleTimeout is how long a TaskManager the driver started
	// may hold no slot before it is released (default
	// DefaultTaskManagerIdleTimeout).
	TaskManagerIdleTimeout time.Duration
	// TaskManagerStartTimeout is how long a started TaskManager may take
	// to register before it is released and another is asked for (default
	// DefaultTaskManagerStartTimeout).
	TaskManagerStartTimeout time.Duration
}

// Overview is the cluster's resources at one moment.
type Overview struct {
	TaskManagers []TaskManagerInfo
	SlotsTotal   int
	SlotsFree    int
}

// ResourceManager owns the SlotManager. Its methods are safe for concurrent
// use. Close stops its goroutines.
//
// Lock order: mu only; callbacks run without it.
type ResourceManager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	sm      *SlotManager
	waiters []*waiter // slot requests waiting, oldest first
	closed  bool
	// tenantOf is the tenant of each allocation, for fair sharing.
	tenantOf map[string]string
	seq      int
	act      activeState

	// bgCtx ends driver requests in flight at Close.
	bgCtx    context.Context
	bgCancel context.CancelFunc

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once // closes stop
}

type waiter struct {
	jobID  string
	tenant string
	seq    int
	n      int
	got    chan []Slot // buffered(1): the slots, once allocated
}

// New returns a running ResourceManager.
func New(cfg Config) *ResourceManager {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.SlotRequestTimeout <= 0 {
		cfg.SlotRequestTimeout = DefaultSlotRequestTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.activeDefaults()
	rm := &ResourceManager{
		cfg:  cfg,
		log:  cfg.Logger,
		sm:   NewSlotManager(cfg.HeartbeatTimeout, NewID),
		act:  activeState{workers: map[string]*worker{}},
		stop: make(chan struct{}),
	}
	rm.bgCtx, rm.bgCancel = context.WithCancel(context.Background())
	rm.wg.Add(1)
	go rm.expireLoop()
	return rm
}

// NewID returns a random 16-hex-digit id.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close stops the heartbeat-timeout loop, fails waiting slot requests with
// ErrUnavailable, waits for the ResourceManager's goroutines and closes the
// driver (which decides what becomes of its TaskManagers).
func (rm *ResourceManager) Close() {
	first := false
	rm.once.Do(func() {
		first = true
		rm.mu.Lock()
		rm.closed = true
		close(rm.stop)
		rm.bgCancel()
		rm.mu.Unlock()
	})
	rm.wg.Wait()
	if first && rm.cfg.Driver != nil {
		ctx, cancel := context.WithTimeout(context.Background(), rm.cfg.TaskManagerStartTimeout)
		defer cancel()
		if err := rm.cfg.Driver.Close(ctx); err != nil {
			rm.log.Warn("close driver", "driver", rm.cfg.Driver.Name(), "err", err)
		}
	}
}

// RegisterTaskManager registers a TaskManager (or re-registers one that
// restarted or was declared dead).
//
// # Errors
//
// ErrInvalidArgument for a malformed registration; nothing changes then.
func (rm *ResourceManager) RegisterTaskManager(ctx context.Context, r control.Registration) (control.Registered, error) {
	rm.mu.Lock()
	id, lost, stale, err := rm.sm.Register(r, rm.cfg.Now())
	if err == nil {
		rm.noteRegisteredLocked(r.ResourceID, rm.cfg.Now())
		rm.serveWaitersLocked()
	}
	rm.mu.Unlock()
	if err != nil {
		return control.Registered{}, err
	}
	rm.log.Info("task manager registered", "tm", r.ResourceID, "rpc", r.RPCAddress, "data", r.DataAddress, "slots", r.Slots, "registration", id)
	rm.notify(lost)
	rm.freeStale(stale)
	if rm.cfg.OnRegistered != nil {
		rm.cfg.OnRegistered(TaskManagerInfo{
			ResourceID: r.ResourceID, RegistrationID: id, RPCAddress: r.RPCAddress, DataAddress: r.DataAddress,
			Slots: r.Slots, FreeSlots: r.Slots, CPUCores: r.CPUCores, MemoryBytes: r.MemoryBytes,
		})
	}
	return control.Registered{RegistrationID: id, HeartbeatInterval: rm.cfg.HeartbeatInterval, HeartbeatTimeout: rm.cfg.HeartbeatTimeout, LeaderSession: rm.cfg.LeaderSession}, nil
}

// Heartbeat records a TaskManager's heartbeat. known=false tells it to
// register again.
func (rm *ResourceManager) Heartbeat(ctx context.Context, h control.Heartbeat) (known bool, err error) {
	rm.mu.Lock()
	known, stale := rm.sm.Heartbeat(h, rm.cfg.Now())
	if known {
		rm.serveWaitersLocked() // a report may show stale allocations gone
	}
	rm.mu.Unlock()
	if known && len(h.Tasks) > 0 && rm.cfg.OnTaskMetrics != nil {
		rm.cfg.OnTaskMetrics(h.ResourceID, h.Tasks)
	}
	if !known {
		rm.log.Info("heartbeat from unknown registration: asking the task manager to register again", "tm", h.ResourceID, "registration", h.RegistrationID)
	}
	rm.freeStale(stale)
	return known, nil
}

// RequestSlots allocates n slots for job, spread across TaskManagers. When
// fewer are free it waits, oldest request first, up to the slot request
// timeout.
//
// # Errors
//
//   - ErrNotEnoughSlots, "not enough slots: need N, free M", when the
//     timeout passes first.
//   - ErrInvalidArgument for n < 1.
//   - ctx's error when it ends first; ErrUnavailable when the
//     ResourceManager closes.
func (rm *ResourceManager) RequestSlots(ctx context.Context, jobID string, n int) ([]Slot, error) {
	return rm.RequestTenantSlots(ctx, "", jobID, n)
}

// RequestTenantSlots is RequestSlots for a job of tenant. While requests
// wait, freed slots go to the waiting tenant with the fewest slots in use
// (FairOrder), oldest request first among equals.
func (rm *ResourceManager) RequestTenantSlots(ctx context.Context, tenant, jobID string, n int) ([]Slot, error) {
	rm.mu.Lock()
	slots, err := rm.sm.Allocate(jobID, n)
	if err == nil {
		rm.noteTenantLocked(tenant, slots)
	} else if errors.Is(err, rpcerr.ErrNotEnoughSlots) {
		if lim := rm.beyondLimitLocked(n); lim != nil {
			rm.mu.Unlock()
			return nil, lim
		}
	}
	if err == nil || !errors.Is(err, rpcerr.ErrNotEnoughSlots) {
		rm.mu.Unlock()
		if err == nil {
			rm.log.Info("slots allocated", "job", jobID, "slots", n)
		}
		return slots, err
	}
	rm.seq++
	w := &waiter{jobID: jobID, tenant: tenant, seq: rm.seq, n: n, got: make(chan []Slot, 1)}
	rm.waiters = append(rm.waiters, w)
	rm.scaleUpLocked()
	rm.mu.Unlock()
	rm.log.Info("waiting for slots", "job", jobID, "need", n, "timeout", rm.cfg.SlotRequestTimeout)

	t := time.NewTimer(rm.cfg.SlotRequestTimeout)
	defer t.Stop()
	var cause error
	select {
	case s := <-w.got:
		rm.log.Info("slots allocated", "job", jobID, "slots", n)
		return s, nil
	case <-t.C:
	case <-ctx.Done():
		cause = fmt.Errorf("request %d slots for job %s: %w", n, jobID, ctx.Err())
	case <-rm.stop:
		cause = rpcerr.Errorf(rpcerr.ErrUnavailable, "request %d slots for job %s: the resource manager is shutting down", n, jobID)
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.waiters = slices.DeleteFunc(rm.waiters, func(x *waiter) bool { return x == w })
	select {
	case s := <-w.got: // allocated as we gave up: hand them back
		rm.sm.Release(allocationIDs(s)...)
		for _, id := range allocationIDs(s) {
			delete(rm.tenantOf, id)
		}
		rm.serveWaitersLocked()
	default:
	}
	if cause != nil {
		return nil, cause
	}
	return nil, rm.timeoutErrorLocked(n)
}

// serveWaitersLocked gives free slots to waiting requests in FairOrder:
// the tenant with the fewest slots in use first, oldest first among
// equals. A request that cannot be met does not hold up smaller ones
// behind it.
func (rm *ResourceManager) serveWaitersLocked() {
	for len(rm.waiters) > 0 {
		inUse := rm.inUseLocked()
		reqs := make([]Request, len(rm.waiters))
		for i, w := range rm.waiters {
			reqs[i] = Request{Tenant: w.tenant, Seq: w.seq}
		}
		served := -1
		for _, i := range FairOrder(reqs, inUse) {
			w := rm.waiters[i]
			s, err := rm.sm.Allocate(w.jobID, w.n)
			if err != nil {
				continue
			}
			rm.noteTenantLocked(w.tenant, s)
			w.got <- s
			served = i
			break
		}
		if served < 0 {
			return
		}
		rm.waiters = slices.Delete(rm.waiters, served, served+1)
	}
}

// noteTenantLocked records the tenant of new allocations.
func (rm *ResourceManager) noteTenantLocked(tenant string, slots []Slot) {
	if rm.tenantOf == nil {
		rm.tenantOf = map[string]string{}
	}
	for _, s := range slots {
		rm.tenantOf[s.AllocationID] = tenant
	}
}

// inUseLocked counts the slots each tenant holds, forgetting allocations
// the SlotManager no longer has (a TaskManager died).
func (rm *ResourceManager) inUseLocked() map[string]int {
	inUse := map[string]int{}
	for id, t := range rm.tenantOf {
		if !rm.sm.Has(id) {
			delete(rm.tenantOf, id)
			continue
		}
		inUse[t]++
	}
	return inUse
}

// ReleaseSlots returns allocations to the pool. The caller frees them on
// the TaskManagers. Unknown ids are ignored.
func (rm *ResourceManager) ReleaseSlots(allocationIDs ...string) {
	rm.mu.Lock()
	rm.sm.Release(allocationIDs...)
	for _, id := range allocationIDs {
		delete(rm.tenantOf, id)
	}
	rm.serveWaitersLocked()
	rm.mu.Unlock()
}

// ReportUnreachable tells the ResourceManager that a connection to a
// TaskManager failed. Its free slots are held back until it heartbeats
// again, so a job restarting after that TaskManager died is not deployed
// to it again before the heartbeat timeout declares it dead (Flink's
// heartbeat.rpc-failure-threshold plays the same part).
func (rm *ResourceManager) ReportUnreachable(resourceID string) {
	rm.mu.Lock()
	known := rm.sm.MarkUnreachable(resourceID, rm.cfg.Now())
	rm.mu.Unlock()
	if known {
		rm.log.Warn("task manager unreachable: its slots are held back until it heartbeats again", "tm", resourceID)
	}
}

// Overview describes the cluster's TaskManagers and slots.
func (rm *ResourceManager) Overview() Overview {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return Overview{TaskManagers: rm.sm.TaskManagers(), SlotsTotal: rm.sm.Total(), SlotsFree: rm.sm.Free()}
}

// expireLoop declares TaskManagers dead when their heartbeats stop.
//
// Without a driver it sleeps until the earliest TaskManager could time out
// (re-arming when heartbeats moved that deadline on), so an idle
// JobManager wakes once per heartbeat timeout, not once per heartbeat
// interval, and a death is noticed at its deadline. With a driver it also
// runs the active-mode bookkeeping (start and idle timeouts, scale-up),
// which needs a period: min(HeartbeatInterval, HeartbeatTimeout/4).
func (rm *ResourceManager) expireLoop() {
	defer rm.wg.Done()
	period := min(rm.cfg.HeartbeatInterval, rm.cfg.HeartbeatTimeout/4)
	period = max(period, time.Millisecond)
	rm.mu.Lock()
	wait := rm.nextExpireLocked(rm.cfg.Now(), period)
	rm.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-rm.stop:
			return
		case <-t.C:
		}
		rm.mu.Lock()
		now := rm.cfg.Now()
		dead, lost := rm.sm.Expire(now)
		lost = append(lost, rm.tickActiveLocked(now)...)
		wait := rm.nextExpireLocked(now, period)
		rm.mu.Unlock()
		t.Reset(wait)
		for _, id := range dead {
			rm.log.Warn("task manager missed its heartbeats: declared dead", "tm", id, "timeout", rm.cfg.HeartbeatTimeout)
		}
		rm.notify(lost)
	}
}

// nextExpireLocked is how long expireLoop may sleep after now. Heartbeats
// only move a TaskManager's deadline later and one registering after now
// times out no sooner than now+HeartbeatTimeout, so sleeping until the
// earliest deadline known now (or a whole timeout, with none registered)
// never notices a death late.
func (rm *ResourceManager) nextExpireLocked(now time.Time, period time.Duration) time.Duration {
	if rm.cfg.Driver != nil {
		return period
	}
	next, ok := rm.sm.NextExpiry()
	if !ok {
		return max(rm.cfg.HeartbeatTimeout, time.Millisecond)
	}
	// Expire declares a TaskManager dead once strictly past its deadline.
	return max(next.Sub(now)+time.Millisecond, time.Millisecond)
}

func (rm *ResourceManager) notify(lost []Lost) {
	for _, l := range lost {
		rm.log.Warn("allocations lost with task manager", "tm", l.ResourceID, "job", l.JobID, "allocations", len(l.Allocations), "reason", l.Reason)
		if rm.cfg.OnLost != nil {
			rm.cfg.OnLost(l)
		}
	}
}

func (rm *ResourceManager) freeStale(stale []Stale) {
	if rm.cfg.FreeStale == nil || len(stale) == 0 {
		return
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.closed {
		return
	}
	rm.wg.Add(1)
	go func() {
		defer rm.wg.Done()
		for _, s := range stale {
			ctx, cancel := context.WithTimeout(context.Background(), rm.cfg.HeartbeatTimeout)
			err := rm.cfg.FreeStale(ctx, s)
			cancel()
			if err != nil {
				rm.log.Warn("could not free stale allocation", "tm_address", s.RPCAddress, "allocation", s.AllocationID, "err", err)
			}
		}
	}()
}

func allocationIDs(s []Slot) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].AllocationID
	}
	return out
}
