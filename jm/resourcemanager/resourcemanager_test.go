package resourcemanager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRequestSlotsWaitsThenTimesOut(t *testing.T) {
	rm := New(Config{SlotRequestTimeout: 100 * time.Millisecond})
	defer rm.Close()
	ctx := context.Background()
	if _, err := rm.RegisterTaskManager(ctx, reg("tm1", 2)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := rm.RequestSlots(ctx, "job", 3)
	if !errors.Is(err, rpcerr.ErrNotEnoughSlots) || err.Error() != "not enough slots: need 3, free 2" {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("failed after %v, before the timeout", d)
	}
	if rm.Overview().SlotsFree != 2 {
		t.Fatal("a failed request kept slots")
	}
}

func TestRequestSlotsWaitsForRegistrationAndRelease(t *testing.T) {
	rm := New(Config{SlotRequestTimeout: 10 * time.Second})
	defer rm.Close()
	ctx := context.Background()
	rm.RegisterTaskManager(ctx, reg("tm1", 2))
	first, err := rm.RequestSlots(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		s   []Slot
		err error
	}
	var wg sync.WaitGroup
	got := make(chan res, 2)
	wg.Add(2)
	go func() { defer wg.Done(); s, err := rm.RequestSlots(ctx, "b", 3); got <- res{s, err} }()
	waitWaiters(t, rm, 1)
	go func() { defer wg.Done(); s, err := rm.RequestSlots(ctx, "c", 1); got <- res{s, err} }()
	waitWaiters(t, rm, 2)

	// A new TaskManager with 2 slots: b (3) still cannot be met, c (1) can.
	rm.RegisterTaskManager(ctx, reg("tm2", 2))
	r := <-got
	if r.err != nil || len(r.s) != 1 {
		t.Fatalf("c: %v %v", r.s, r.err)
	}
	// a's slots come back: b gets 3.
	rm.ReleaseSlots(allocationIDs(first)...)
	r = <-got
	if r.err != nil || len(r.s) != 3 {
		t.Fatalf("b: %v %v", r.s, r.err)
	}
	wg.Wait()
	if o := rm.Overview(); o.SlotsTotal != 4 || o.SlotsFree != 0 || len(o.TaskManagers) != 2 {
		t.Fatalf("overview %+v", o)
	}
}

func TestRequestSlotsHonoursContextAndClose(t *testing.T) {
	rm := New(Config{SlotRequestTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := rm.RequestSlots(ctx, "j", 1); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	go func() { _, err := rm.RequestSlots(context.Background(), "j", 1); done <- err }()
	waitWaiters(t, rm, 1)
	rm.Close()
	if err := <-done; !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestDeadTaskManagerTellsJobs(t *testing.T) {
	var mu sync.Mutex
	var lost []Lost
	var freed []Stale
	rm := New(Config{
		HeartbeatInterval: 10 * time.Millisecond,
		HeartbeatTimeout:  100 * time.Millisecond,
		OnLost:            func(l Lost) { mu.Lock(); lost = append(lost, l); mu.Unlock() },
		FreeStale: func(ctx context.Context, s Stale) error {
			mu.Lock()
			freed = append(freed, s)
			mu.Unlock()
			return nil
		},
	})
	defer rm.Close()
	ctx := context.Background()
	r := reg("tm1", 2)
	r.SlotReport = []control.SlotStatus{{Index: 1, AllocationID: "ghost", JobID: "gone"}}
	if _, err := rm.RegisterTaskManager(ctx, r); err != nil {
		t.Fatal(err)
	}
	slots, err := rm.RequestSlots(ctx, "job", 1)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(lost) != 1 || len(freed) != 1 {
			return fmt.Errorf("%d slot losses and %d frees reported, want 1 each", len(lost), len(freed))
		}
		return nil
	})
	if lost[0].JobID != "job" || lost[0].Allocations[0] != slots[0].AllocationID {
		t.Fatalf("lost %+v", lost)
	}
	if freed[0].AllocationID != "ghost" {
		t.Fatalf("freed %+v", freed)
	}
	if o := rm.Overview(); o.SlotsTotal != 0 {
		t.Fatalf("dead tm still counted: %+v", o)
	}
}

// waitWaiters waits until n slot requests are parked in rm.
func waitWaiters(t *testing.T, rm *ResourceManager, n int) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		rm.mu.Lock()
		defer rm.mu.Unlock()
		if got := len(rm.waiters); got != n {
			return fmt.Errorf("%d slot requests waiting, want %d", got, n)
		}
		return nil
	})
}

// A known TaskManager's task figures are handed on; an unknown one's are
// not, nor are heartbeats without any.
func TestHeartbeatHandsOnTaskMetrics(t *testing.T) {
	var got [][]control.ExecutionMetrics
	var mu sync.Mutex
	rm := New(Config{OnTaskMetrics: func(tm string, ms []control.ExecutionMetrics) {
		mu.Lock()
		defer mu.Unlock()
		if tm != "tm1" {
			t.Errorf("figures from %s", tm)
		}
		got = append(got, ms)
	}})
	defer rm.Close()
	ctx := context.Background()
	r, err := rm.RegisterTaskManager(ctx, reg("tm1", 1))
	if err != nil {
		t.Fatal(err)
	}
	tasks := []control.ExecutionMetrics{{ExecutionID: "e1", JobID: "j1", Metrics: control.TaskMetrics{RecordsIn: 5}}}
	for _, h := range []control.Heartbeat{
		{ResourceID: "tm1", RegistrationID: r.RegistrationID, Tasks: tasks},
		{ResourceID: "tm1", RegistrationID: r.RegistrationID},
		{ResourceID: "tm1", RegistrationID: "stale", Tasks: tasks},
	} {
		if _, err := rm.Heartbeat(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || len(got[0]) != 1 || got[0][0].Metrics.RecordsIn != 5 {
		t.Fatalf("handed on %+v, want the one heartbeat's figures", got)
	}
}
