package processdriver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm/resourcemanager"
	"github.com/sluicehq/sluice/jm/resourcemanager/processdriver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTM is an executable that prints its arguments and then runs until
// signalled, or exits 3 at once when its --resource-id ends in -2.
const fakeTM = `#!/bin/sh
trap 'echo stopping; exit 0' TERM
echo "args: $*"
case "$*" in *proc-*-2*) exit 3;; esac
while :; do sleep 0.05; done
`

func newDriver(t *testing.T) (*processdriver.Driver, string, *terms) {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, "sluice")
	if err := os.WriteFile(exe, []byte(fakeTM), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	d, err := processdriver.New(processdriver.Config{Executable: exe, Args: []string{"--blob", "file:///x"}, LogDir: logs, StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tt := &terms{}
	if _, err := d.Initialize(context.Background(), resourcemanager.DriverEnv{JobManagerAddress: "127.0.0.1:6123", OnTerminated: tt.add}); err != nil {
		t.Fatal(err)
	}
	return d, logs, tt
}

type terms struct {
	mu  sync.Mutex
	got []string
}

func (tt *terms) add(id, reason string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.got = append(tt.got, id+": "+reason)
}

func (tt *terms) list() []string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return append([]string(nil), tt.got...)
}

func readLog(t *testing.T, logs, id string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(logs, id+".log"))
	return string(b)
}

func TestStartReleaseExitAndClose(t *testing.T) {
	d, logs, tt := newDriver(t)
	ctx := context.Background()
	spec := resourcemanager.ResourceSpec{Slots: 3, MemoryBytes: 1 << 20}
	first, err := d.RequestTaskManager(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		want := "args: tm --jm 127.0.0.1:6123 --slots 3 --resource-id " + first + " --listen 127.0.0.1:0 --memory-bytes 1048576 --blob file:///x"
		if got := readLog(t, logs, first); !strings.Contains(got, want) {
			return fmt.Errorf("log %q lacks %q", got, want)
		}
		return nil
	})
	// The second exits by itself: reported terminated.
	second, err := d.RequestTaskManager(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := tt.list(); len(got) != 1 || !strings.HasPrefix(got[0], second+": process exited: exit status 3") {
			return fmt.Errorf("terminations %v", got)
		}
		return nil
	})
	// Released: stopped with SIGTERM, not reported.
	if err := d.ReleaseTaskManager(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := readLog(t, logs, first); !strings.Contains(got, "stopping") {
		t.Errorf("released process did not get SIGTERM: %q", got)
	}
	if err := d.ReleaseTaskManager(ctx, first); err != nil {
		t.Fatalf("second release: %v", err)
	}
	// Close stops the rest.
	third, err := d.RequestTaskManager(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Running() != 1 {
		t.Fatalf("%d running", d.Running())
	}
	// Once the script traps SIGTERM (it printed its args after the trap).
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(readLog(t, logs, third), "args:") {
			return fmt.Errorf("%s not started yet", third)
		}
		return nil
	})
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d.Running() != 0 {
		t.Fatalf("%d running after Close", d.Running())
	}
	if got := tt.list(); len(got) != 1 {
		t.Fatalf("terminations %v: released and closed ones must not be reported", got)
	}
	if got := readLog(t, logs, third); !strings.Contains(got, "stopping") {
		t.Errorf("Close did not SIGTERM %s: %q", third, got)
	}
}

func TestBadExecutable(t *testing.T) {
	d, err := processdriver.New(processdriver.Config{Executable: t.TempDir(), LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Initialize(context.Background(), resourcemanager.DriverEnv{JobManagerAddress: "x:1"})
	if err == nil || !strings.Contains(err.Error(), "is not an executable file (set --tm-executable)") {
		t.Fatalf("err = %v", err)
	}
	if _, err := processdriver.New(processdriver.Config{}); err == nil || !strings.Contains(err.Error(), "--tm-log-dir") {
		t.Fatalf("err = %v", err)
	}
}
