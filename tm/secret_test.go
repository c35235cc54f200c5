package tm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	jmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	rmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	teclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor/taskexecutor"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/tm"
	"github.com/sluicehq/sluice/tm/exchange"
)

func mustSecret(t *testing.T, s string) *auth.Secret {
	t.Helper()
	sec, err := auth.NewSecret([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func peerConfig(proof string) rpcserver.ClientConfig {
	cfg := rpcserver.ClientConfig{RPCTimeout: 5 * time.Second}
	if proof != "" {
		cfg.Metadata = map[string]string{rpcserver.MetaPeer: proof}
	}
	return cfg
}

// TestClusterSecretOverKitex: only TaskManagers with the cluster secret
// join; ResourceManager, JobMaster and TaskExecutor calls without its proof
// are refused and change nothing; a replayed (stale) fencing token is
// refused by a real TaskManager over Kitex.
func TestClusterSecretOverKitex(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	secret := mustSecret(t, "the-right-cluster-secret-0123456789")
	wrong := mustSecret(t, "a-wrong-cluster-secret-0123456789")
	j, err := jm.New(ctx, jm.Config{Blob: store, Secret: secret, HeartbeatInterval: 50 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()

	unauth := func(what string, err error) {
		t.Helper()
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrUnauthenticated) {
			t.Errorf("%s: %v, want UNAUTHENTICATED", what, err)
		}
	}
	// Raw calls without the proof, and with the proof of another secret.
	for _, proof := range []string{"", wrong.RPCProof(), "00"} {
		rc := rmclient.MustNewClient("rm", rpcserver.ClientOptions(j.Addr(), peerConfig(proof))...)
		_, err := rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{ResourceId: "intruder", RpcAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 100})
		unauth("register with proof "+proof, err)
		_, err = rc.Heartbeat(ctx, &resourcemanager.HeartbeatRequest{ResourceId: "intruder", RegistrationId: "x"})
		unauth("heartbeat", err)
		jc := jmclient.MustNewClient("jm", rpcserver.ClientOptions(j.Addr(), peerConfig(proof))...)
		unauth("update task state", jc.UpdateTaskState(ctx, &jobmaster.TaskStateUpdate{Fencing: &common.FencingToken{JobId: "x"}, ExecutionId: "e", State: "FINISHED"}))
		_, err = jc.RequestNextSplit(ctx, &jobmaster.NextSplitRequest{Fencing: &common.FencingToken{JobId: "x"}, ExecutionId: "e"})
		unauth("request split", err)
	}

	// A TaskManager with the wrong secret never joins; one with the right
	// secret does.
	bad, err := tm.New(ctx, tm.Config{JMAddress: j.Addr(), Slots: 2, Blob: store, ResourceID: "tm-bad", Secret: wrong, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	good, err := tm.New(ctx, tm.Config{JMAddress: j.Addr(), Slots: 2, Blob: store, ResourceID: "tm-good", Secret: secret, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !good.Registered() {
			return errors.New("the TaskManager with the secret is not registered")
		}
		return nil
	})
	// The bad one has retried several times by now (the good one
	// registered on its first try); it is still out.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		ov := j.ResourceManager().Overview()
		if len(ov.TaskManagers) != 1 || ov.TaskManagers[0].ResourceID != "tm-good" || ov.SlotsTotal != 2 {
			return fmt.Errorf("the job manager knows %+v with %d slots, want only tm-good with 2", ov.TaskManagers, ov.SlotsTotal)
		}
		return nil
	})
	if bad.Registered() {
		t.Fatal("the TaskManager with the wrong secret registered")
	}

	// The TaskExecutor refuses calls without the proof.
	deployment := func(attempt int64) *taskexecutor.TaskDeployment {
		return &taskexecutor.TaskDeployment{
			Fencing:          &common.FencingToken{LeaderSession: "s", JobId: "j", Attempt: attempt},
			ExecutionId:      "j.t0.a" + string(rune('0'+attempt)),
			JobId:            "j",
			Tenant:           "default",
			ModuleDigest:     "sha256-" + "00000000000000000000000000000000000000000000000000000000000000",
			Chain:            []*taskexecutor.Vertex{{Id: 1, Name: "src", Kind: "source", Connector: "text"}},
			Parallelism:      1,
			MaxParallelism:   128,
			AllocationId:     "alloc-" + string(rune('0'+attempt)),
			JobmasterAddress: j.Addr(),
		}
	}
	for _, proof := range []string{"", wrong.RPCProof()} {
		tc := teclient.MustNewClient("te", rpcserver.ClientOptions(good.Addr(), peerConfig(proof))...)
		unauth("deploy", tc.DeployTask(ctx, deployment(1)))
		unauth("cancel", tc.CancelTask(ctx, &taskexecutor.CancelTaskRequest{Fencing: &common.FencingToken{LeaderSession: "s", JobId: "j", Attempt: 9}, ExecutionId: "j.t0.a1"}))
		unauth("free slot", tc.FreeSlot(ctx, "alloc-1"))
	}
	if n := len(good.RunningTasks()); n != 0 {
		t.Fatalf("%d tasks run after refused deploys", n)
	}

	// With the proof: attempt 2 is accepted, then a replayed attempt 1 is
	// stale. (The task itself fails at once, its module does not exist; the
	// TaskManager remembers the newest attempt of the job.)
	tc := teclient.MustNewClient("te", rpcserver.ClientOptions(good.Addr(), peerConfig(secret.RPCProof()))...)
	if err := tc.DeployTask(ctx, deployment(2)); err != nil {
		t.Fatalf("deploy with the secret: %v", rpcserver.FromCall(err))
	}
	err = rpcserver.FromCall(tc.DeployTask(ctx, deployment(1)))
	if !errors.Is(err, rpcerr.ErrStaleFencingToken) {
		t.Fatalf("replayed attempt 1 after 2: %v, want STALE_FENCING_TOKEN", err)
	}

	// The data port checks the HELLO token derived from the secret.
	for _, tc := range []struct {
		name  string
		token []byte
		ok    bool
	}{{"no token", nil, false}, {"wrong secret", wrong.DataToken(), false}, {"rpc proof as token", []byte(secret.RPCProof()), false}, {"right secret", secret.DataToken(), true}} {
		m, err := exchange.NewManager(ctx, exchange.Config{Token: tc.token, RegistrationTimeout: 300 * time.Millisecond, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.OpenOutput(ctx, control.OutputSpec{ResultID: "nobody", Partitioner: jobgraph.Forward, Targets: []string{good.DataAddr()}}, 0, 0)
		m.Close()
		if handshake := errors.Is(err, exchange.ErrHandshake); handshake == tc.ok || err == nil {
			t.Errorf("data port, %s: %v", tc.name, err)
		}
	}
}
