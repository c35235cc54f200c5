package resourcemanager

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// MaxSlotsPerTaskManager is the most slots one TaskManager may offer; more
// is taken for a configuration mistake.
const MaxSlotsPerTaskManager = 1024

// Slot is an allocated slot: where a JobMaster deploys the tasks of one
// subtask index (slot sharing).
type Slot struct {
	AllocationID string
	ResourceID   string
	RPCAddress   string
	DataAddress  string
}

// TaskManagerInfo describes a registered TaskManager.
type TaskManagerInfo struct {
	ResourceID     string
	RegistrationID string
	RPCAddress     string
	DataAddress    string
	Slots          int
	FreeSlots      int
	CPUCores       int
	MemoryBytes    int64
	LastHeartbeat  time.Time
}

// Lost names the allocations a JobMaster lost with a TaskManager.
type Lost struct {
	ResourceID  string
	JobID       string
	Allocations []string
	Reason      string // "heartbeat timeout", "re-registered"
}

// Stale is an allocation a TaskManager holds that the ResourceManager does
// not know (it outlived the job or the JobManager); it should be freed.
type Stale struct {
	RPCAddress   string
	AllocationID string
}

// TaskManager registration states, as the SlotManager sees them:
//
//	              Register (valid)
//	(unknown) ─────────────────────────► REGISTERED ◄──┐ Heartbeat (known=true):
//	   ▲  ▲                                │  │  │     │ slot report reconciled,
//	   │  │ Heartbeat with an unknown      │  │  └─────┘ deadline pushed back
//	   │  └─ registration id: known=false, │  │
//	   │     the TaskManager registers     │  │ Register again with the same resource id
//	   │     again                         │  │ (the process restarted): a new registration;
//	   │                                   │  │ allocations its slot report no longer shows
//	   │                                   │  │ are lost ──► their JobMasters are told
//	   │     no heartbeat for the timeout  │  └──────────────► REGISTERED (new id)
//	   └──────────── DEAD ◄────────────────┘
//	     (forgotten at once: every allocation is released
//	      and the JobMasters using them are told)
//
// A REGISTERED TaskManager that a JobMaster could not connect to
// (MarkUnreachable) offers no free slots until its next heartbeat.
type taskManager struct {
	TaskManagerInfo
	allocs   map[string]string // allocation id -> job id, as the SlotManager assigned
	reported map[string]string // allocations the last slot report showed that allocs lacks
	order    int               // registration order, to break ties deterministically
	// unreachableAt is when a JobMaster last failed to connect to the
	// TaskManager; until a later heartbeat its free slots are not handed
	// out (it is most likely dead and about to time out).
	unreachableAt time.Time
}

func (t *taskManager) used() int { return len(t.allocs) + len(t.reported) }

func (t *taskManager) free() int {
	if !t.unreachableAt.IsZero() {
		return 0
	}
	return max(t.Slots-t.used(), 0)
}

// SlotManager is the ResourceManager's bookkeeping: registered TaskManagers,
// their slots, and which job holds each allocation. It is pure logic — no
// goroutines, no clock, no I/O — so every rule is a table test. Time comes
// in as arguments; ids from the newID function.
//
// A SlotManager is not safe for concurrent use; the ResourceManager guards
// it with its lock.
type SlotManager struct {
	timeout time.Duration
	newID   func() string
	tms     map[string]*taskManager // by resource id
	byAlloc map[string]string       // allocation id -> resource id
	seq     int
}

// NewSlotManager returns a SlotManager that declares a TaskManager dead when
// it has not heartbeated for heartbeatTimeout. newID returns unique ids for
// registrations and allocations.
func NewSlotManager(heartbeatTimeout time.Duration, newID func() string) *SlotManager {
	return &SlotManager{
		timeout: heartbeatTimeout,
		newID:   newID,
		tms:     make(map[string]*taskManager),
		byAlloc: make(map[string]string),
	}
}

// ValidateRegistration checks a registration without changing anything.
//
// # Errors
//
// ErrInvalidArgument naming every problem.
func ValidateRegistration(r control.Registration) error {
	var probs []string
	if r.ResourceID == "" {
		probs = append(probs, "empty resource id")
	} else if len(r.ResourceID) > 256 {
		probs = append(probs, "resource id longer than 256 bytes")
	}
	if r.Slots <= 0 || r.Slots > MaxSlotsPerTaskManager {
		probs = append(probs, fmt.Sprintf("slots %d: must be in [1, %d]", r.Slots, MaxSlotsPerTaskManager))
	}
	if err := checkAddr(r.RPCAddress); err != nil {
		probs = append(probs, "rpc address "+err.Error())
	}
	if err := checkAddr(r.DataAddress); err != nil {
		probs = append(probs, "data address "+err.Error())
	}
	if r.CPUCores < 0 || r.MemoryBytes < 0 {
		probs = append(probs, "negative hardware description")
	}
	for _, s := range r.SlotReport {
		if s.Index < 0 || s.Index >= max(r.Slots, 0) {
			probs = append(probs, fmt.Sprintf("slot report names slot %d of %d", s.Index, r.Slots))
			break
		}
	}
	if len(probs) == 0 {
		return nil
	}
	msg := "invalid task manager registration"
	if r.ResourceID != "" {
		msg += " of " + strconv.Quote(r.ResourceID)
	}
	for i, p := range probs {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		msg += sep + p
	}
	return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s", msg)
}

func checkAddr(a string) error {
	if a == "" {
		return fmt.Errorf("is empty")
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port", a)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("%q has no valid port", a)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", a)
	}
	return nil
}

// Register adds a TaskManager, or replaces the registration of one with the
// same resource id (its process restarted). On a replacement, allocations
// the new slot report still shows are kept; the others are returned as lost.
// Allocations the slot report shows that no job holds are returned as stale.
//
// # Errors
//
// ErrInvalidArgument (see ValidateRegistration); nothing changes then.
func (m *SlotManager) Register(r control.Registration, now time.Time) (regID string, lost []Lost, stale []Stale, err error) {
	if err := ValidateRegistration(r); err != nil {
		return "", nil, nil, err
	}
	keep := map[string]string{}
	if old, ok := m.tms[r.ResourceID]; ok {
		still := map[string]bool{}
		for _, s := range r.SlotReport {
			if s.AllocationID != "" {
				still[s.AllocationID] = true
			}
		}
		gone := map[string]string{}
		for a, job := range old.allocs {
			if still[a] {
				keep[a] = job
			} else {
				gone[a] = job
			}
		}
		lost = m.drop(old, gone, "re-registered")
	}
	m.seq++
	tm := &taskManager{
		TaskManagerInfo: TaskManagerInfo{
			ResourceID:     r.ResourceID,
			RegistrationID: m.newID(),
			RPCAddress:     r.RPCAddress,
			DataAddress:    r.DataAddress,
			Slots:          r.Slots,
			CPUCores:       r.CPUCores,
			MemoryBytes:    r.MemoryBytes,
			LastHeartbeat:  now,
		},
		allocs:   keep,
		reported: map[string]string{},
		order:    m.seq,
	}
	for a := range keep {
		m.byAlloc[a] = r.ResourceID
	}
	m.tms[r.ResourceID] = tm
	stale = m.reconcile(tm, r.SlotReport)
	return tm.RegistrationID, lost, stale, nil
}

// drop forgets old and the allocations in gone, returning them as lost per
// job. Allocations old holds that are not in gone stay indexed.
func (m *SlotManager) drop(old *taskManager, gone map[string]string, reason string) []Lost {
	delete(m.tms, old.ResourceID)
	byJob := map[string][]string{}
	for a, job := range gone {
		delete(m.byAlloc, a)
		byJob[job] = append(byJob[job], a)
	}
	var lost []Lost
	for job, as := range byJob {
		slices.Sort(as)
		lost = append(lost, Lost{ResourceID: old.ResourceID, JobID: job, Allocations: as, Reason: reason})
	}
	slices.SortFunc(lost, func(a, b Lost) int { return cmp.Compare(a.JobID, b.JobID) })
	return lost
}

// reconcile records the allocations a slot report shows that the
// SlotManager did not assign: they occupy slots until the TaskManager
// reports them gone, and are returned as stale so they get freed.
func (m *SlotManager) reconcile(tm *taskManager, report []control.SlotStatus) []Stale {
	tm.reported = map[string]string{}
	var stale []Stale
	for _, s := range report {
		if s.AllocationID == "" {
			continue
		}
		if _, ok := tm.allocs[s.AllocationID]; ok {
			continue
		}
		if _, dup := tm.reported[s.AllocationID]; dup {
			continue
		}
		tm.reported[s.AllocationID] = s.JobID
		stale = append(stale, Stale{RPCAddress: tm.RPCAddress, AllocationID: s.AllocationID})
	}
	return stale
}

// Heartbeat records a heartbeat. known is false when the registration is
// not (or no longer) known: the TaskManager must register again.
func (m *SlotManager) Heartbeat(h control.Heartbeat, now time.Time) (known bool, stale []Stale) {
	tm, ok := m.tms[h.ResourceID]
	if !ok || tm.RegistrationID != h.RegistrationID || h.RegistrationID == "" {
		return false, nil
	}
	tm.LastHeartbeat = now
	if now.After(tm.unreachableAt) {
		tm.unreachableAt = time.Time{}
	}
	return true, m.reconcile(tm, h.SlotReport)
}

// MarkUnreachable records that a connection to the TaskManager failed at
// now: none of its slots are free until it heartbeats after now. It
// returns false for an unknown TaskManager.
func (m *SlotManager) MarkUnreachable(resourceID string, now time.Time) bool {
	tm, ok := m.tms[resourceID]
	if ok {
		tm.unreachableAt = now
	}
	return ok
}

// Expire declares dead every TaskManager whose last heartbeat (or
// registration) is more than the heartbeat timeout before now, forgets it,
// and returns the allocations lost with it.
func (m *SlotManager) Expire(now time.Time) (dead []string, lost []Lost) {
	for _, tm := range m.sorted() {
		if now.Sub(tm.LastHeartbeat) <= m.timeout {
			continue
		}
		dead = append(dead, tm.ResourceID)
		lost = append(lost, m.drop(tm, tm.allocs, "heartbeat timeout")...)
	}
	return dead, lost
}

// NextExpiry returns when the next TaskManager would time out, and false
// when none is registered.
func (m *SlotManager) NextExpiry() (time.Time, bool) {
	var next time.Time
	for _, tm := range m.tms {
		t := tm.LastHeartbeat.Add(m.timeout)
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next, !next.IsZero()
}

// sorted returns the TaskManagers in registration order.
func (m *SlotManager) sorted() []*taskManager {
	out := make([]*taskManager, 0, len(m.tms))
	for _, tm := range m.tms {
		out = append(out, tm)
	}
	slices.SortFunc(out, func(a, b *taskManager) int { return cmp.Compare(a.order, b.order) })
	return out
}

// Allocate assigns n free slots to job, spread across TaskManagers: each
// slot goes to the TaskManager with the most free slots left (ties by
// registration order), so a job's subtasks land on as many TaskManagers as
// possible. It takes all n or none.
//
// # Errors
//
// ErrNotEnoughSlots ("not enough slots: need N, free M"); ErrInvalidArgument
// for n < 1 or an empty job id.
func (m *SlotManager) Allocate(jobID string, n int) ([]Slot, error) {
	if jobID == "" || n < 1 {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "slot request for job %q: need %d slots: must be at least 1", jobID, n)
	}
	if free := m.Free(); free < n {
		return nil, rpcerr.NotEnoughSlots(n, free)
	}
	tms := m.sorted()
	free := make([]int, len(tms))
	for i, tm := range tms {
		free[i] = tm.free()
	}
	slots := make([]Slot, 0, n)
	for range n {
		best := -1
		for i := range tms {
			if free[i] > 0 && (best < 0 || free[i] > free[best]) {
				best = i
			}
		}
		free[best]--
		tm := tms[best]
		a := m.newID()
		tm.allocs[a] = jobID
		m.byAlloc[a] = tm.ResourceID
		slots = append(slots, Slot{AllocationID: a, ResourceID: tm.ResourceID, RPCAddress: tm.RPCAddress, DataAddress: tm.DataAddress})
	}
	return slots, nil
}

// Release returns allocations to the pool. Unknown ids are ignored (the
// TaskManager may have died meanwhile).
func (m *SlotManager) Release(allocationIDs ...string) {
	for _, a := range allocationIDs {
		rid, ok := m.byAlloc[a]
		if !ok {
			continue
		}
		delete(m.byAlloc, a)
		if tm, ok := m.tms[rid]; ok {
			delete(tm.allocs, a)
		}
	}
}

// Free returns the number of free slots in the cluster.
func (m *SlotManager) Free() int {
	n := 0
	for _, tm := range m.tms {
		n += tm.free()
	}
	return n
}

// Total returns the number of slots in the cluster.
func (m *SlotManager) Total() int {
	n := 0
	for _, tm := range m.tms {
		n += tm.Slots
	}
	return n
}

// TaskManagers describes every registered TaskManager, in registration order.
func (m *SlotManager) TaskManagers() []TaskManagerInfo {
	var out []TaskManagerInfo
	for _, tm := range m.sorted() {
		info := tm.TaskManagerInfo
		info.FreeSlots = tm.free()
		out = append(out, info)
	}
	return out
}

// Used returns how many of a TaskManager's slots are taken (allocated or
// shown in use by its slot report), and false for an unknown TaskManager.
func (m *SlotManager) Used(resourceID string) (int, bool) {
	tm, ok := m.tms[resourceID]
	if !ok {
		return 0, false
	}
	return tm.used(), true
}

// Remove forgets a TaskManager that is gone (its driver reported it ended,
// or it is being released) and returns the allocations lost with it. An
// unknown id is ignored.
func (m *SlotManager) Remove(resourceID, reason string) []Lost {
	tm, ok := m.tms[resourceID]
	if !ok {
		return nil
	}
	return m.drop(tm, tm.allocs, reason)
}
