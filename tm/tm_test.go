package tm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/tm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, localtest.GoleakOptions()...) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestRegisterAndReregister: a TaskManager started before its JobManager
// registers once the JobManager is up, and registers again (with the same
// resource id) with a JobManager that restarted on the same address.
func TestRegisterAndReregister(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// Reserve an address for the JobManager, then start the TaskManager
	// first: it retries until the JobManager answers.
	j1, err := jm.New(ctx, jm.Config{Blob: store, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 500 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	addr := j1.Addr()
	j1.Close()

	taskm, err := tm.New(ctx, tm.Config{JMAddress: addr, Slots: 3, Blob: store, CacheDir: t.TempDir(), ResourceID: "tm-a", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer taskm.Close()
	if taskm.Addr() == "" || taskm.DataAddr() == "" || taskm.Addr() == taskm.DataAddr() {
		t.Fatalf("addresses: rpc %q data %q", taskm.Addr(), taskm.DataAddr())
	}

	startJM := func() *jm.Server {
		t.Helper()
		var j *jm.Server
		testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			j, err = jm.New(ctx, jm.Config{ListenAddr: addr, Blob: store, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 500 * time.Millisecond, Logger: quiet()})
			if err != nil {
				return fmt.Errorf("job manager could not bind %s again: %w", addr, err)
			}
			return nil
		})
		return j
	}
	registered := func(j *jm.Server) error {
		ov := j.ResourceManager().Overview()
		if len(ov.TaskManagers) == 1 && ov.TaskManagers[0].ResourceID == "tm-a" && ov.SlotsTotal == 3 &&
			ov.TaskManagers[0].DataAddress == taskm.DataAddr() && strings.HasSuffix(ov.TaskManagers[0].RPCAddress, taskm.Addr()[strings.LastIndex(taskm.Addr(), ":"):]) {
			return nil
		}
		return fmt.Errorf("the job manager knows %+v with %d slots; want tm-a (rpc %s, data %s) with 3", ov.TaskManagers, ov.SlotsTotal, taskm.Addr(), taskm.DataAddr())
	}

	j2 := startJM()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !taskm.Registered() {
			return errors.New("the task manager does not consider itself registered")
		}
		return registered(j2)
	})
	j2.Close()

	// The new JobManager does not know the registration: heartbeats fail
	// or answer known=false, and the TaskManager registers again.
	j3 := startJM()
	defer j3.Close()
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error { return registered(j3) }) // the restarted job manager

	if err := taskm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := taskm.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, tc := range []struct {
		cfg  tm.Config
		want string
	}{
		{tm.Config{Slots: 1, Blob: store}, "no job manager address"},
		{tm.Config{JMAddress: "127.0.0.1:1", Slots: 1}, "no blob store"},
		{tm.Config{JMAddress: "127.0.0.1:1", Blob: store}, "0 slots"},
		{tm.Config{JMAddress: "127.0.0.1:1", Blob: store, Slots: 1, ListenAddr: "nonsense"}, "listen address"},
	} {
		if _, err := tm.New(ctx, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error with %q", tc.cfg, err, tc.want)
		}
	}
}
