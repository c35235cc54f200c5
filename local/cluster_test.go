package local_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, localtest.GoleakOptions()...) }

// TestCancelEndsTasksAndFreesSlots runs a job that never ends at p=4 on two
// TaskManagers of two slots, cancels it, and checks every task stopped and
// every slot came back.
func TestCancelEndsTasksAndFreesSlots(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 2})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := localtest.Submit(ctx, cl, c.Blob(), localtest.Guest(t, "local/testdata/spin"), nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		for _, tm := range c.TaskManagers() {
			if len(tm.RunningTasks()) > 0 {
				return nil
			}
		}
		return fmt.Errorf("no task of job %s runs on any of %d task managers", id, len(c.TaskManagers()))
	})
	start := time.Now()
	if err := cl.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	r, err := cl.WaitJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateCanceled {
		t.Fatalf("job ended %s after cancel", r.State)
	}
	t.Logf("canceled in %v", time.Since(start))
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		for _, tm := range c.TaskManagers() {
			if n := len(tm.RunningTasks()); n > 0 {
				return fmt.Errorf("task manager %s still runs %d tasks after cancel", tm.ResourceID(), n)
			}
			for _, s := range tm.Slots() {
				if s.AllocationID != "" {
					return fmt.Errorf("task manager %s slot %d still allocated to %s after cancel", tm.ResourceID(), s.Index, s.AllocationID)
				}
			}
		}
		return nil
	})
	localtest.WaitSlots(t, c, 4)
}

// TestTrapFailsOnlyTheJob: a guest that traps fails its job with the
// guest's stack trace; the TaskManagers survive and run the next job.
func TestTrapFailsOnlyTheJob(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, r, err := localtest.RunJob(ctx, cl, c.Blob(), localtest.Guest(t, "local/testdata/trap"), nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateFailed {
		t.Fatalf("trapping job ended %s", r.State)
	}
	for _, want := range []string{"explodeOnRecord", "nil map"} {
		if !strings.Contains(r.Failure, want) {
			t.Errorf("failure lacks %q:\n%s", want, r.Failure)
		}
	}
	// The same TaskManager runs the next job.
	_, r, err = localtest.RunJob(ctx, cl, c.Blob(), localtest.Guest(t, "local/testdata/trap"), nil, 1)
	if err != nil || r.State != client.StateFailed {
		t.Fatalf("second run: %v %s", err, r.State)
	}
	if len(c.TaskManagers()) != 1 {
		t.Fatal("a task manager went away")
	}
}

// TestBadSubmissions: each is refused with a clear error and leaves no job.
func TestBadSubmissions(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 1})
	cl := c.Client()
	ctx := context.Background()
	if _, err := cl.UploadModule(ctx, []byte("not wasm at all")); !errors.Is(err, client.ErrInvalidModule) {
		t.Errorf("upload of text: %v; want ErrInvalidModule", err)
	}
	_, err := localtest.Submit(ctx, cl, c.Blob(), localtest.Guest(t, "local/testdata/cycle"), nil, 1)
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: %v; want an invalid graph naming the cycle", err)
	}
	_, err = localtest.Submit(ctx, cl, c.Blob(), localtest.Guest(t, "local/testdata/spin"), nil, 1<<20)
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("p=2^20: %v; want ErrInvalidArgument", err)
	}
	if _, err := cl.GetJob(ctx, "no-such-job"); !errors.Is(err, client.ErrJobNotFound) {
		t.Errorf("unknown job: %v; want ErrJobNotFound", err)
	}
	jobs, err := cl.ListJobs(ctx)
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs after bad submissions: %+v %v", jobs, err)
	}
}

// TestInProcessClusterHelpers drives the embedded cluster through the
// localtest.Cluster interface the process-level tests share: add a
// TaskManager, find the one a subtask runs on, kill it, and see the
// JobManager drop it and the job end.
func TestInProcessClusterHelpers(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 1, JobManager: func(j *jm.Config) {
		// Short enough that the kill is noticed in seconds, long enough
		// that a loaded machine (-race, other packages' tests) does not
		// declare the living TaskManager dead too.
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	var lc localtest.Cluster = c
	if i := lc.StartTaskManager(2); i != 1 {
		t.Fatalf("the second task manager has index %d", i)
	}
	localtest.WaitSlots(t, lc, 3)
	id := localtest.SubmitJob(t, lc, localtest.Guest(t, "local/testdata/spin"), nil, 1)
	d := localtest.WaitAllRunning(t, lc, id, time.Minute)
	victim := localtest.TaskManagerIndex(t, lc, d.Vertices[0].Subtasks[0].TaskManager)
	lc.KillTaskManager(victim)
	if a := lc.TaskManagerAddrs(); a[victim] != "" || a[1-victim] == "" {
		t.Fatalf("addresses after killing %d: %q", victim, a)
	}
	localtest.WaitTaskManagers(t, lc, 1, time.Minute)
	if err := lc.Client().CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if d := localtest.WaitTerminal(t, lc, id, time.Minute); d.State != client.StateCanceled && d.State != client.StateFailed {
		t.Fatalf("job ended %s after cancel", d.State)
	}
}
