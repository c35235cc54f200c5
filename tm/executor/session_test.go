package executor

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// TestHASessionFencing: once a TaskManager has seen an HA leader session
// (at registration, or in a deployment), every call of an older session
// — a deposed JobManager's deploy, cancel, checkpoint trigger or commit
// notification — is refused with ErrStaleFencing, for any job, and
// counted; a newer session is accepted.
func TestHASessionFencing(t *testing.T) {
	e := newExecutor(t, 2, &fakeJMs{})
	ctx := context.Background()
	old, cur, next := control.HASession(5), control.HASession(9), control.HASession(12)
	d := deployment("j", "j.a0", "a", 0)
	d.Fencing.LeaderSession = old
	if err := e.DeployTask(ctx, d); err != nil {
		t.Fatalf("deploy of the first leader: %v", err)
	}
	e.ObserveLeaderSession(cur) // registered with a new leader

	stale := control.FencingToken{LeaderSession: old, JobID: "j", Attempt: 3}
	d2 := deployment("j", "j.a3", "b", 3)
	d2.Fencing = stale
	other := deployment("k", "k.a0", "b", 0)
	other.Fencing.LeaderSession = old
	for name, err := range map[string]error{
		"deploy":       e.DeployTask(ctx, d2),
		"deploy other": e.DeployTask(ctx, other),
		"cancel":       e.CancelTask(ctx, stale, "j.a0"),
		"trigger":      e.TriggerCheckpoint(ctx, stale, "j.a0", checkpoint.Trigger{ID: 1}),
		"notify":       e.NotifyCheckpoint(ctx, stale, "j.a0", 1, true),
	} {
		if !errors.Is(err, ErrStaleFencing) || !errors.Is(err, rpcerr.ErrStaleFencingToken) {
			t.Errorf("%s with a deposed leader's session: %v, want ErrStaleFencing", name, err)
		}
	}
	if n := e.RefusedStaleSessions(); n != 5 {
		t.Errorf("%d refusals counted, want 5", n)
	}
	// The current leader and a newer one may deploy.
	d3 := deployment("j", "j.c0", "b", 0)
	d3.Fencing.LeaderSession = cur
	if err := e.DeployTask(ctx, d3); err != nil {
		t.Fatalf("deploy of the current leader: %v", err)
	}
	d4 := deployment("j", "j.d0", "a", 0)
	d4.Fencing.LeaderSession = next
	if err := e.DeployTask(ctx, d4); err != nil {
		t.Fatalf("deploy of a newer leader: %v", err)
	}
	d5 := deployment("j", "j.e0", "b", 0)
	d5.Fencing.LeaderSession = cur
	if err := e.DeployTask(ctx, d5); !errors.Is(err, ErrStaleFencing) {
		t.Fatalf("deploy of the leader before the newest seen: %v", err)
	}
	// Sessions without HA keep their old rules: not ordered.
	if _, ok := control.SessionEpoch("0123abcd"); ok {
		t.Error("a random session parsed as an HA one")
	}
}

// TestReportsToADeposedLeaderAreDropped: a task's reports to a JobManager
// that cannot be reached are retried for the report timeout — unless the
// TaskManager learns of a newer leader meanwhile: nobody is left to take
// them, so they are dropped and shutting down does not wait for them.
func TestReportsToADeposedLeaderAreDropped(t *testing.T) {
	store, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	jms := &fakeJMs{fail: 1 << 30} // the old leader is gone
	e := New(Config{Slots: 1, Blob: store, JobMasters: jms, Logger: slog.New(slog.DiscardHandler), ReportTimeout: time.Hour})
	d := deployment("j", "j.a0", "a", 0)
	d.Fencing.LeaderSession = control.HASession(5)
	if err := e.DeployTask(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	e.ObserveLeaderSession(control.HASession(9))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatalf("close with reports to a deposed leader still retrying: %v", err)
	}
}
