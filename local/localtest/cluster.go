package localtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/tm"
)

// Cluster is a running test cluster: an embedded one (InProcess, from
// Start) or real sluice processes (cmd/sluice/internal/proctest). The wait
// helpers of this package take a Cluster, so every test tier waits for a
// job, a slot or a TaskManager the same way. Its methods fail the test on
// an error instead of returning it.
type Cluster interface {
	// Addr is the JobManager's RPC address.
	Addr() string
	// Blob is the store the cluster's components share.
	Blob() blob.Store
	// Client is a client of the JobManager, with the cluster's token when
	// it has tenants.
	Client() *client.Client
	// StartTaskManager starts one more TaskManager with slots slots and
	// returns its index (counting stopped ones). It does not wait for the
	// TaskManager to register (see WaitSlots).
	StartTaskManager(slots int) int
	// KillTaskManager ends TaskManager i at once: a SIGKILL for a process;
	// in process, where nothing can crash alone, a Close.
	KillTaskManager(i int)
	// TaskManagerAddrs are the TaskManagers' RPC addresses by index, ""
	// for one that was killed.
	TaskManagerAddrs() []string
}

// InProcess is an embedded cluster bound to a test. It is a Cluster, and
// embeds the *local.Cluster for what only an embedded cluster has (its
// TaskManagers' internals, its runtime). Its Client shadows the embedded
// one; c.Cluster.Client(opts...) is a client with options (a token).
type InProcess struct {
	*local.Cluster
	t testing.TB

	mu  sync.Mutex
	cl  *client.Client
	tms []*tm.TaskManager // by index; nil once killed
}

var _ Cluster = (*InProcess)(nil)

// Start starts an embedded cluster closed when the test ends. Its logs go
// to the test log when SLUICE_TEST_LOG is set.
func Start(t testing.TB, cfg local.Config) *InProcess {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = CompileCache()
	}
	if cfg.Logger == nil && os.Getenv("SLUICE_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc, err := local.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start embedded cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := lc.Close(); err != nil {
			t.Errorf("close embedded cluster: %v", err)
		}
	})
	return &InProcess{Cluster: lc, t: t, tms: lc.TaskManagers()}
}

// testWriter sends log lines to the test log (SLUICE_TEST_LOG=1).
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Client returns a client of the JobManager (made once), without a token.
func (c *InProcess) Client() *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == nil {
		cl, err := c.Cluster.Client()
		if err != nil {
			c.t.Fatal(err)
		}
		c.cl = cl
	}
	return c.cl
}

// StartTaskManager starts one more TaskManager; see Cluster.
func (c *InProcess) StartTaskManager(slots int) int {
	c.t.Helper()
	t, err := c.Cluster.AddTaskManager(context.Background(), slots)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tms = append(c.tms, t)
	return len(c.tms) - 1
}

// KillTaskManager closes TaskManager i; see Cluster.
func (c *InProcess) KillTaskManager(i int) {
	c.t.Helper()
	c.mu.Lock()
	ok := i >= 0 && i < len(c.tms) && c.tms[i] != nil
	if ok {
		c.tms[i] = nil
	}
	c.mu.Unlock()
	if !ok {
		c.t.Fatalf("no running task manager %d", i)
	}
	if err := c.Cluster.StopTaskManager(i); err != nil {
		c.t.Fatalf("stop task manager %d: %v", i, err)
	}
}

// TaskManagerAddrs returns the TaskManagers' addresses; see Cluster.
func (c *InProcess) TaskManagerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.tms))
	for i, t := range c.tms {
		if t != nil {
			out[i] = t.Addr()
		}
	}
	return out
}

// The polling intervals of the wait helpers: a status call is cheap in
// process and over loopback.
const pollEvery = 20 * time.Millisecond

// WaitJob polls job id until cond accepts its details, fails the test with
// cond's last error after timeout, and returns the details cond accepted.
func WaitJob(t testing.TB, c Cluster, id string, timeout time.Duration, cond func(client.JobDetails) error) client.JobDetails {
	t.Helper()
	var d client.JobDetails
	testutil.CheckFor(t, timeout, pollEvery, func() error {
		var err error
		if d, err = c.Client().GetJob(context.Background(), id); err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		return cond(d)
	})
	return d
}

// WaitJobState waits up to timeout for job id to be in state want and
// returns its details. A job that ends in another state fails at once.
func WaitJobState(t testing.TB, c Cluster, id, want string, timeout time.Duration) client.JobDetails {
	t.Helper()
	d := WaitJob(t, c, id, timeout, func(d client.JobDetails) error {
		if d.State != want && !client.Terminal(d.State) {
			return fmt.Errorf("job %s is %s, want %s", id, d.State, want)
		}
		return nil
	})
	if d.State != want {
		t.Fatalf("job %s ended %s, want %s: %s", id, d.State, want, d.Failure)
	}
	return d
}

// WaitTerminal waits up to timeout for job id to end, in whatever state,
// and returns its details.
func WaitTerminal(t testing.TB, c Cluster, id string, timeout time.Duration) client.JobDetails {
	t.Helper()
	return WaitJob(t, c, id, timeout, func(d client.JobDetails) error {
		if !client.Terminal(d.State) {
			return fmt.Errorf("job %s is still %s", id, d.State)
		}
		return nil
	})
}

// AllRunning says why not every subtask of a job is RUNNING, or nil if
// every one is.
func AllRunning(d client.JobDetails) error {
	if d.State != client.StateRunning || len(d.Vertices) == 0 {
		return fmt.Errorf("job %s is %s with %d vertices, want RUNNING", d.ID, d.State, len(d.Vertices))
	}
	for _, v := range d.Vertices {
		if len(v.Subtasks) == 0 { // before its slots arrive
			return fmt.Errorf("job %s: vertex %s lists no subtasks yet", d.ID, v.Name)
		}
		for _, s := range v.Subtasks {
			if s.State != client.StateRunning {
				return fmt.Errorf("job %s: vertex %s subtask %d is %s, want RUNNING", d.ID, v.Name, s.Index, s.State)
			}
		}
	}
	return nil
}

// WaitAllRunning waits up to timeout until job id and every one of its
// subtasks is RUNNING, and returns its details.
func WaitAllRunning(t testing.TB, c Cluster, id string, timeout time.Duration) client.JobDetails {
	t.Helper()
	return WaitJob(t, c, id, timeout, AllRunning)
}

// WaitSlots waits up to 30s until the JobManager counts total slots, all
// of them free: every TaskManager registered and nothing running.
func WaitSlots(t testing.TB, c Cluster, total int) {
	t.Helper()
	testutil.CheckFor(t, 30*time.Second, pollEvery, func() error {
		ov, err := c.Client().Overview(context.Background())
		if err != nil {
			return fmt.Errorf("overview: %w", err)
		}
		if ov.SlotsTotal != total || ov.SlotsFree != total {
			return fmt.Errorf("%d task managers, %d slots, %d free; want %d slots, all free", len(ov.TaskManagers), ov.SlotsTotal, ov.SlotsFree, total)
		}
		return nil
	})
}

// WaitTaskManagers waits up to timeout until the JobManager counts n
// TaskManagers (after a kill: until it has dropped the dead one).
func WaitTaskManagers(t testing.TB, c Cluster, n int, timeout time.Duration) {
	t.Helper()
	testutil.CheckFor(t, timeout, pollEvery, func() error {
		ov, err := c.Client().Overview(context.Background())
		if err != nil {
			return fmt.Errorf("overview: %w", err)
		}
		if len(ov.TaskManagers) != n {
			return fmt.Errorf("%d task managers registered, want %d", len(ov.TaskManagers), n)
		}
		return nil
	})
}

// TaskManagerIndex returns the index of the running TaskManager that a
// subtask status names (a resource id or an address), matched through the
// overview; it fails the test if none does.
func TaskManagerIndex(t testing.TB, c Cluster, name string) int {
	t.Helper()
	ov, err := c.Client().Overview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	addr := name
	for _, tm := range ov.TaskManagers {
		if tm.ResourceID == name || tm.Address == name {
			addr = tm.Address
		}
	}
	for i, a := range c.TaskManagerAddrs() {
		if a != "" && (a == addr || strings.Contains(name, a)) {
			return i
		}
	}
	t.Fatalf("no running task manager matches %q", name)
	return -1
}

// WaitFinished waits up to 3 minutes for job id and fails the test unless
// it FINISHED.
func WaitFinished(t testing.TB, c Cluster, id string) client.JobResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := c.Client().WaitJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateFinished {
		t.Fatalf("job %s ended %s: %s", id, r.State, r.Failure)
	}
	return r
}

// SubmitJob stages the job's --input files in the cluster's store, uploads
// wasm and submits the job at parallelism p; it fails the test on an error.
func SubmitJob(t testing.TB, c Cluster, wasm []byte, args []string, p int) string {
	t.Helper()
	id, err := Submit(context.Background(), c.Client(), c.Blob(), wasm, args, p)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
