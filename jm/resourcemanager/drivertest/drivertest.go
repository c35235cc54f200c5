package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// Mock is a resourcemanager.Driver that records calls. Its methods are safe
// for concurrent use.
type Mock struct {
	mu          sync.Mutex
	env         resourcemanager.DriverEnv
	initErr     error
	requestErr  error
	failLeft    int // requests still to fail with requestErr; -1: all
	recovered   []string
	requested   []string
	specs       []resourcemanager.ResourceSpec
	released    []string
	running     map[string]bool
	closed      bool
	onRequest   func(id string, spec resourcemanager.ResourceSpec)
	initialized bool
	n           int
}

var _ resourcemanager.Driver = (*Mock)(nil)

// New returns a Mock that succeeds at everything.
func New() *Mock { return &Mock{running: map[string]bool{}} }

// FailInitialize makes Initialize fail with err.
func (m *Mock) FailInitialize(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.initErr = err
}

// FailRequests makes the next n requests fail with err (n < 0: every one).
func (m *Mock) FailRequests(n int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failLeft, m.requestErr = n, err
}

// Recover makes Initialize report ids as TaskManagers still running.
func (m *Mock) Recover(ids ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovered = append(m.recovered, ids...)
	for _, id := range ids {
		m.running[id] = true
	}
}

// OnRequest has f called (without the Mock's lock) after each successful
// request, e.g. to start a TaskManager that registers under id.
func (m *Mock) OnRequest(f func(id string, spec resourcemanager.ResourceSpec)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onRequest = f
}

// Name returns "mock".
func (m *Mock) Name() string { return "mock" }

// Initialize records env and returns the ids given to Recover.
//
// # Errors
//
// The error given to FailInitialize.
func (m *Mock) Initialize(_ context.Context, env resourcemanager.DriverEnv) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.initErr != nil {
		return nil, m.initErr
	}
	if m.initialized {
		return nil, errors.New("mock driver: initialized twice")
	}
	m.initialized = true
	m.env = env
	return slices.Clone(m.recovered), nil
}

// RequestTaskManager records the request and returns "mock-N".
//
// # Errors
//
// The error given to FailRequests, while it lasts.
func (m *Mock) RequestTaskManager(_ context.Context, spec resourcemanager.ResourceSpec) (string, error) {
	m.mu.Lock()
	if m.failLeft != 0 {
		if m.failLeft > 0 {
			m.failLeft--
		}
		err := m.requestErr
		m.mu.Unlock()
		return "", err
	}
	m.n++
	id := fmt.Sprintf("mock-%d", m.n)
	m.requested = append(m.requested, id)
	m.specs = append(m.specs, spec)
	m.running[id] = true
	f := m.onRequest
	m.mu.Unlock()
	if f != nil {
		f(id, spec)
	}
	return id, nil
}

// ReleaseTaskManager records the release.
func (m *Mock) ReleaseTaskManager(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.released = append(m.released, id)
	delete(m.running, id)
	return nil
}

// Close records that the driver was closed.
func (m *Mock) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Terminate reports id terminated to the ResourceManager, as a driver does
// when a process exits or a pod is deleted.
func (m *Mock) Terminate(id, reason string) {
	m.mu.Lock()
	delete(m.running, id)
	f := m.env.OnTerminated
	m.mu.Unlock()
	if f != nil {
		f(id, reason)
	}
}

// Env returns what Initialize was handed.
func (m *Mock) Env() resourcemanager.DriverEnv {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.env
}

// Requested returns the ids of every TaskManager requested, in order.
func (m *Mock) Requested() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requested)
}

// Specs returns the spec of every request, in order.
func (m *Mock) Specs() []resourcemanager.ResourceSpec {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.specs)
}

// Released returns the ids released, in order.
func (m *Mock) Released() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.released)
}

// Running returns the ids requested (or recovered) and neither released
// nor terminated, sorted.
func (m *Mock) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id := range m.running {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Closed reports whether Close was called.
func (m *Mock) Closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
