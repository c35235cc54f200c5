package resourcemanager_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm/resourcemanager"
	"github.com/sluicehq/sluice/jm/resourcemanager/drivertest"
)

func registration(id string, slots int) control.Registration {
	return control.Registration{ResourceID: id, RPCAddress: "127.0.0.1:1000", DataAddress: "127.0.0.1:2000", Slots: slots}
}

// active returns a running ResourceManager in active mode over d, with
// quick ticks and a long heartbeat timeout (tests heartbeat no one).
func active(t *testing.T, d resourcemanager.Driver, mod func(*resourcemanager.Config)) *resourcemanager.ResourceManager {
	t.Helper()
	cfg := resourcemanager.Config{
		HeartbeatInterval:      10 * time.Millisecond,
		HeartbeatTimeout:       time.Hour,
		SlotRequestTimeout:     time.Minute,
		Driver:                 d,
		TaskManagerSpec:        resourcemanager.ResourceSpec{Slots: 2, MemoryBytes: 1 << 30},
		MaxTaskManagers:        3,
		TaskManagerIdleTimeout: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	rm := resourcemanager.New(cfg)
	t.Cleanup(rm.Close)
	if err := rm.StartDriver(context.Background(), "127.0.0.1:6123"); err != nil {
		t.Fatal(err)
	}
	return rm
}

// registerEach registers every TaskManager the mock is asked for.
func registerEach(t *testing.T, m *drivertest.Mock, rm **resourcemanager.ResourceManager) {
	m.OnRequest(func(id string, spec resourcemanager.ResourceSpec) {
		go func() {
			if _, err := (*rm).RegisterTaskManager(context.Background(), registration(id, spec.Slots)); err != nil {
				t.Errorf("register %s: %v", id, err)
			}
		}()
	})
}

func TestActiveModeStartsTaskManagersAndReleasesIdleOnes(t *testing.T) {
	m := drivertest.New()
	var rm *resourcemanager.ResourceManager
	registerEach(t, m, &rm)
	rm = active(t, m, nil)
	ctx := context.Background()
	if got := m.Env().JobManagerAddress; got != "127.0.0.1:6123" {
		t.Fatalf("driver told JobManager address %q", got)
	}
	// One TaskManager by hand (standalone beside active): 1 slot.
	if _, err := rm.RegisterTaskManager(ctx, registration("by-hand", 1)); err != nil {
		t.Fatal(err)
	}
	slots, err := rm.RequestSlots(ctx, "job", 5) // 1 free: 4 more = 2 TaskManagers of 2
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 5 {
		t.Fatalf("%d slots", len(slots))
	}
	if got := m.Requested(); len(got) != 2 {
		t.Fatalf("driver asked for %v, want 2 task managers", got)
	}
	for _, s := range m.Specs() {
		if s != (resourcemanager.ResourceSpec{Slots: 2, MemoryBytes: 1 << 30}) {
			t.Fatalf("spec %+v", s)
		}
	}
	// The slots may be allocated before the second RequestTaskManager's
	// return is recorded.
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := rm.Active().Running; len(got) != 2 {
			return fmt.Errorf("active overview: %v", got)
		}
		return nil
	})
	// In use: never released, however long.
	time.Sleep(200 * time.Millisecond) // lets the idle timeout pass four times; nothing may happen
	if got := m.Released(); len(got) != 0 {
		t.Fatalf("released %v while their slots were in use", got)
	}
	ids := make([]string, len(slots))
	for i, s := range slots {
		ids[i] = s.AllocationID
	}
	rm.ReleaseSlots(ids...)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := m.Running(); len(got) != 0 {
			return fmt.Errorf("still running %v", got)
		}
		return nil
	})
	rel := m.Released()
	slices.Sort(rel)
	if !slices.Equal(rel, m.Requested()) {
		t.Fatalf("released %v, want %v", rel, m.Requested())
	}
	// The one started by hand stays.
	if ov := rm.Overview(); len(ov.TaskManagers) != 1 || ov.TaskManagers[0].ResourceID != "by-hand" {
		t.Fatalf("overview %+v", ov)
	}
	rm.Close()
	if !m.Closed() {
		t.Fatal("driver not closed")
	}
}

func TestActiveModeRefusesMoreThanTheMaximumAtOnce(t *testing.T) {
	m := drivertest.New()
	rm := active(t, m, nil) // 3 × 2 slots
	_, err := rm.RequestSlots(context.Background(), "job", 7)
	if !errors.Is(err, rpcerr.ErrNotEnoughSlots) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"need 7", "at most 6", "limit of 3 task managers of 2 slots", "--max-taskmanagers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := m.Requested(); len(got) != 0 {
		t.Fatalf("asked the driver for %v for a request it can never meet", got)
	}
}

func TestActiveModeTimeoutAtTheMaximumNamesTheLimit(t *testing.T) {
	m := drivertest.New() // nobody registers
	rm := active(t, m, func(c *resourcemanager.Config) {
		c.SlotRequestTimeout = 200 * time.Millisecond
		c.MaxTaskManagers = 1
	})
	_, err := rm.RequestSlots(context.Background(), "job", 2)
	if !errors.Is(err, rpcerr.ErrNotEnoughSlots) || !strings.Contains(err.Error(), "limit of 1 task managers") {
		t.Fatalf("err = %v", err)
	}
	if got := m.Requested(); len(got) != 1 {
		t.Fatalf("requested %v, want one", got)
	}
}

func TestActiveModeRetriesAFailedRequest(t *testing.T) {
	m := drivertest.New()
	m.FailRequests(2, errors.New("quota exceeded"))
	var rm *resourcemanager.ResourceManager
	registerEach(t, m, &rm)
	rm = active(t, m, nil)
	slots, err := rm.RequestSlots(context.Background(), "job", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 2 || len(m.Requested()) != 1 {
		t.Fatalf("slots %v, requested %v", slots, m.Requested())
	}
}

func TestActiveModeReplacesATerminatedTaskManager(t *testing.T) {
	m := drivertest.New()
	var mu sync.Mutex
	var lost []resourcemanager.Lost
	rm := active(t, m, func(c *resourcemanager.Config) {
		c.OnLost = func(l resourcemanager.Lost) { mu.Lock(); lost = append(lost, l); mu.Unlock() }
	})
	ctx := context.Background()
	got := make(chan error, 1)
	go func() { _, err := rm.RequestSlots(ctx, "job", 2); got <- err }()
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if len(m.Requested()) != 1 {
			return fmt.Errorf("requested %v", m.Requested())
		}
		return nil
	})
	// Deleted before it registered: a replacement is asked for.
	m.Terminate(m.Requested()[0], "pod deleted")
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if len(m.Requested()) != 2 {
			return fmt.Errorf("requested %v", m.Requested())
		}
		return nil
	})
	second := m.Requested()[1]
	if _, err := rm.RegisterTaskManager(ctx, registration(second, 2)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// Terminated while its slots are held: the job is told.
	m.Terminate(second, "pod deleted")
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || lost[0].JobID != "job" || len(lost[0].Allocations) != 2 || !strings.Contains(lost[0].Reason, "pod deleted") {
		t.Fatalf("lost %+v", lost)
	}
	if ov := rm.Overview(); ov.SlotsTotal != 0 {
		t.Fatalf("overview %+v", ov)
	}
}

// A driver may see its TaskManager end before RequestTaskManager returns
// (a pod deleted at once): the ResourceManager still replaces it.
func TestActiveModeReplacesATaskManagerThatEndsAsItStarts(t *testing.T) {
	m := drivertest.New()
	var once sync.Once
	m.OnRequest(func(id string, _ resourcemanager.ResourceSpec) {
		once.Do(func() { m.Terminate(id, "pod deleted") })
	})
	rm := active(t, m, nil)
	got := make(chan error, 1)
	go func() { _, err := rm.RequestSlots(context.Background(), "job", 2); got <- err }()
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if len(m.Requested()) != 2 {
			return fmt.Errorf("requested %v, want a replacement for the first", m.Requested())
		}
		return nil
	})
	if _, err := rm.RegisterTaskManager(context.Background(), registration(m.Requested()[1], 2)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if a := rm.Active(); len(a.Running) != 1 || a.Running[0] != m.Requested()[1] || a.Starting != 0 {
		t.Fatalf("active %+v", a)
	}
}

func TestActiveModeReleasesATaskManagerThatNeverRegisters(t *testing.T) {
	m := drivertest.New()
	rm := active(t, m, func(c *resourcemanager.Config) { c.TaskManagerStartTimeout = 100 * time.Millisecond })
	go rm.RequestSlots(context.Background(), "job", 1) //nolint:errcheck // ends at Close
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if len(m.Released()) == 0 || len(m.Requested()) < 2 {
			return fmt.Errorf("requested %v, released %v", m.Requested(), m.Released())
		}
		return nil
	})
	if m.Released()[0] != m.Requested()[0] {
		t.Fatalf("released %v of %v", m.Released(), m.Requested())
	}
}

func TestActiveModeAdoptsRecoveredTaskManagers(t *testing.T) {
	m := drivertest.New()
	m.Recover("old-1", "elsewhere")
	rm := resourcemanager.New(resourcemanager.Config{
		HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: time.Hour,
		Driver: m, TaskManagerIdleTimeout: 50 * time.Millisecond, TaskManagerStartTimeout: 100 * time.Millisecond,
	})
	defer rm.Close()
	ctx := context.Background()
	if _, err := rm.RegisterTaskManager(ctx, registration("old-1", 2)); err != nil {
		t.Fatal(err)
	}
	if err := rm.StartDriver(ctx, "127.0.0.1:6123"); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !slices.Equal(m.Released(), []string{"old-1"}) {
			return fmt.Errorf("released %v", m.Released())
		}
		return nil
	})
	// One that never registers here is forgotten, never stopped: it may
	// serve the JobManager that leads (this one may stand by).
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if a := rm.Active(); a.Starting != 0 || len(a.Running) != 0 {
			return fmt.Errorf("active %+v", a)
		}
		return nil
	})
	if !slices.Equal(m.Released(), []string{"old-1"}) {
		t.Fatalf("released %v: a recovered task manager that did not register must not be stopped", m.Released())
	}
}

func TestStartDriverFailsWithTheDriversError(t *testing.T) {
	m := drivertest.New()
	m.FailInitialize(errors.New("no api server"))
	rm := resourcemanager.New(resourcemanager.Config{Driver: m})
	defer rm.Close()
	err := rm.StartDriver(context.Background(), "127.0.0.1:6123")
	if err == nil || !strings.Contains(err.Error(), "initialize the mock driver: no api server") {
		t.Fatalf("err = %v", err)
	}
}
