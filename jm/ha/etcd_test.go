package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/leader"
	"github.com/sluicehq/sluice/internal/testutil"
)

// startEtcd runs SLUICE_ETCD_BIN on free ports for the test, or skips.
func startEtcd(t *testing.T) leader.Target {
	t.Helper()
	return leader.Target{Endpoints: []string{testutil.StartEtcd(t)}, Cluster: "t"}
}

func connect(t *testing.T, tg leader.Target) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := leader.Connect(ctx, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestEtcdElectionAndFencedStore: one candidate leads at a time; the
// leader's address and session are found through the election; its
// store writes are read back by the next; a leadership whose election key
// is gone (its lease expired) notices, and every write of it is refused
// with ErrNotLeader and changes nothing.
func TestEtcdElectionAndFencedStore(t *testing.T) {
	tg := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := NewEtcd(connect(t, tg), tg, time.Second), NewEtcd(connect(t, tg), tg, time.Second)

	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := control.SessionEpoch(la.Session()); !ok {
		t.Fatalf("session %q is not an HA session", la.Session())
	}
	if err := la.Proclaim(ctx, "127.0.0.1:1111"); err != nil {
		t.Fatal(err)
	}
	in, err := leader.Current(ctx, connect(t, tg), tg)
	if err != nil || in.Address != "127.0.0.1:1111" || in.Session != la.Session() {
		t.Fatalf("leader = %+v, %v; want a's address and session", in, err)
	}
	job := Job{ID: "j1", Tenant: "default", ModuleDigest: "sha256-00", Args: []string{"x"}, Config: map[string]string{"k": "v"}}
	if err := la.PutJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := la.PutCheckpoint(ctx, "j1", "j1/4", 2); err != nil {
		t.Fatal(err)
	}

	won := make(chan Leadership, 1)
	go func() {
		l, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		won <- l
	}()
	select {
	case <-won:
		t.Fatal("b was elected while a leads")
	case <-time.After(500 * time.Millisecond):
	}
	// What an expired lease leaves: a's election key gone.
	if _, err := connect(t, tg).Delete(ctx, la.(*etcdLeadership).key); err != nil {
		t.Fatal(err)
	}
	lb := <-won
	if lb == nil {
		t.FailNow()
	}
	if lb.Session() <= la.Session() {
		t.Errorf("b's session %s does not order after a's %s", lb.Session(), la.Session())
	}
	if err := la.PutJob(ctx, Job{ID: "j2", Tenant: "default"}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed a's PutJob: %v, want ErrNotLeader", err)
	}
	select {
	case <-la.Lost():
	default:
		t.Error("a's leadership not marked lost after a refused write")
	}
	if err := la.PutCheckpoint(ctx, "j1", "j1/9", 7); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed a's PutCheckpoint: %v", err)
	}
	if err := la.Check(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed a's Check: %v", err)
	}
	jobs, err := lb.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "j1" || jobs[0].Checkpoint != "j1/4" || jobs[0].Attempt != 2 || jobs[0].Config["k"] != "v" {
		t.Fatalf("b reads %+v, %v; want only j1 at checkpoint j1/4 attempt 2", jobs, err)
	}
	if err := lb.DeleteJob(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := b.Jobs(ctx); len(jobs) != 0 {
		t.Fatalf("after delete: %+v", jobs)
	}
	if err := lb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lb.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("resigned leadership not lost")
	}
}

// TestEtcdLeaseExpiry: a leader whose session stops keeping its lease
// alive (here its client is closed, as a paused or cut-off process's is)
// is replaced once the lease expires.
func TestEtcdLeaseExpiry(t *testing.T) {
	tg := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cliA, err := leader.Connect(ctx, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	la, err := NewEtcd(cliA, tg, time.Second).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cliA.Close()
	lb, err := NewEtcd(connect(t, tg), tg, time.Second).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("b elected %v after a stopped keeping its 1s lease", time.Since(start).Round(time.Millisecond))
	if lb.Session() <= la.Session() {
		t.Errorf("b's session %s does not order after a's %s", lb.Session(), la.Session())
	}
}
