package resourcemanager

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
)

// TestExpireSleepsUntilTheNextDeadline checks what the heartbeat-timeout
// loop sleeps for without a driver: a whole timeout with no TaskManager,
// else until just past the earliest deadline, which heartbeats move on.
func TestExpireSleepsUntilTheNextDeadline(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	rm := New(Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second, Now: clock})
	defer rm.Close()
	wait := func() time.Duration {
		rm.mu.Lock()
		defer rm.mu.Unlock()
		return rm.nextExpireLocked(clock(), time.Second)
	}
	if got := wait(); got != 10*time.Second {
		t.Fatalf("no TaskManager: sleeps %v, want the timeout 10s", got)
	}
	ctx := context.Background()
	a, err := rm.RegisterTaskManager(ctx, control.Registration{ResourceID: "a", RPCAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	advance(3 * time.Second)
	if _, err := rm.RegisterTaskManager(ctx, control.Registration{ResourceID: "b", RPCAddress: "127.0.0.1:3", DataAddress: "127.0.0.1:4", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if got, want := wait(), 7*time.Second+time.Millisecond; got != want {
		t.Fatalf("a due in 7s: sleeps %v, want %v", got, want)
	}
	advance(2 * time.Second)
	if known, err := rm.Heartbeat(ctx, control.Heartbeat{ResourceID: "a", RegistrationID: a.RegistrationID}); err != nil || !known {
		t.Fatalf("heartbeat of a: %v %v", known, err)
	}
	// a is now due in 10s, b (registered 2s ago) in 8s.
	if got, want := wait(), 8*time.Second+time.Millisecond; got != want {
		t.Fatalf("b due in 8s: sleeps %v, want %v", got, want)
	}
	advance(20 * time.Second)
	if got := wait(); got != time.Millisecond {
		t.Fatalf("deadlines passed: sleeps %v, want 1ms", got)
	}
}
