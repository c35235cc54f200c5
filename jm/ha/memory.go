package ha

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/control"
)

// Memory is an Elector and job store in memory, shared by the JobManagers
// of one test: one leads at a time, and Depose ends the current term as
// an expired lease would.
type Memory struct {
	mu      sync.Mutex
	rev     int64
	current *memLeadership
	freed   chan struct{} // closed when the current term ends
	jobs    map[string]Job
	cps     map[string]Job // Checkpoint and Attempt only
}

var _ Elector = (*Memory)(nil)

// NewMemory returns an empty store with no leader.
func NewMemory() *Memory {
	return &Memory{jobs: map[string]Job{}, cps: map[string]Job{}}
}

// Campaign waits until no term is current, then starts one.
func (m *Memory) Campaign(ctx context.Context) (Leadership, error) {
	for {
		m.mu.Lock()
		if m.current == nil {
			m.rev++
			l := &memLeadership{m: m, rev: m.rev, lost: make(chan struct{})}
			m.current, m.freed = l, make(chan struct{})
			m.mu.Unlock()
			return l, nil
		}
		freed := m.freed
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-freed:
		}
	}
}

// Jobs reads the store.
func (m *Memory) Jobs(ctx context.Context) ([]Job, error) { return (&memLeadership{m: m}).Jobs(ctx) }

// Close does nothing.
func (m *Memory) Close() error { return nil }

// Depose ends the current term, if any, as a lease expiring does.
func (m *Memory) Depose() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.current; l != nil {
		m.endLocked(l)
	}
}

// Leader returns the current term's session and address ("" without one).
func (m *Memory) Leader() (session, address string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current == nil {
		return "", ""
	}
	return m.current.Session(), m.current.addr
}

// Checkpoint returns the checkpoint pointer of a job.
func (m *Memory) Checkpoint(jobID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cps[jobID].Checkpoint
}

func (m *Memory) endLocked(l *memLeadership) {
	if m.current == l {
		m.current = nil
		close(m.freed)
	}
	l.once.Do(func() { close(l.lost) })
}

type memLeadership struct {
	m    *Memory
	rev  int64
	addr string
	once sync.Once
	lost chan struct{}
}

func (l *memLeadership) Session() string       { return control.HASession(l.rev) }
func (l *memLeadership) Lost() <-chan struct{} { return l.lost }

// do runs f under the store's lock while the term lasts.
func (l *memLeadership) do(what string, f func()) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.current != l {
		return fmt.Errorf("%s: %w: this JobManager's leadership ended", what, ErrNotLeader)
	}
	f()
	return nil
}

func (l *memLeadership) Proclaim(_ context.Context, address string) error {
	return l.do("publish the leader's address", func() { l.addr = address })
}

func (l *memLeadership) Resign(context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.endLocked(l)
	return nil
}

func (l *memLeadership) PutJob(_ context.Context, j Job) error {
	j.Checkpoint = ""
	j.Args, j.Config = slices.Clone(j.Args), maps.Clone(j.Config)
	return l.do("store job "+j.ID, func() { l.m.jobs[j.ID] = j })
}

func (l *memLeadership) PutCheckpoint(_ context.Context, jobID, ref string, attempt int64) error {
	return l.do("store the checkpoint pointer of job "+jobID, func() { l.m.cps[jobID] = Job{Checkpoint: ref, Attempt: attempt} })
}

func (l *memLeadership) DeleteJob(_ context.Context, jobID string) error {
	return l.do("delete job "+jobID, func() { delete(l.m.jobs, jobID); delete(l.m.cps, jobID) })
}

func (l *memLeadership) Check(context.Context) error { return l.do("check the leadership", func() {}) }

func (l *memLeadership) Jobs(context.Context) ([]Job, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	var out []Job
	for _, id := range slices.Sorted(maps.Keys(l.m.jobs)) {
		j := l.m.jobs[id]
		j.Checkpoint, j.Attempt = l.m.cps[id].Checkpoint, l.m.cps[id].Attempt
		out = append(out, j)
	}
	return out, nil
}
