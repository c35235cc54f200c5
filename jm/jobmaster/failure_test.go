package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
)

const (
	noKey   = "guest sluice_process: output j1.a0.e3-4: record has no key on a hash-partitioned output"
	aborted = "input j1.a0.e3-4 subtask 0, producer 0: producer aborted the channel"
)

func (g *fakeGateway) reportKind(d control.Deployment, failure string, kind control.FailureKind) error {
	return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{
		Fencing: d.Fencing, ExecutionID: d.ExecutionID, State: ExecFailed, Failure: failure, FailureKind: kind,
	})
}

// isSource says whether d is the "lines -> split -> by word" chain.
func isSource(d control.Deployment) bool { return d.Chain[0].ID == 1 }

// allRunning waits until every subtask of the job is RUNNING.
func allRunning(t *testing.T, h *harness) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		d := h.jm.Details()
		for _, v := range d.Vertices {
			for _, s := range v.Subtasks {
				if s.State != ExecRunning {
					return fmt.Errorf("%s subtask %d is %s, want every subtask RUNNING", v.Name, s.Index, s.State)
				}
			}
		}
		if len(d.Vertices) == 0 {
			return fmt.Errorf("no vertices yet")
		}
		return nil
	})
}

// subtaskFailures lists the failures the job shows for vertex name.
func subtaskFailures(d Details, name string) []string {
	var out []string
	for _, v := range d.Vertices {
		if v.Name == name {
			for _, s := range v.Subtasks {
				out = append(out, s.State+": "+s.Failure)
			}
		}
	}
	return out
}

// The consumer's "producer aborted" reaches the JobMaster first; the
// producer's own failure arrives while the attempt is being torn down, as
// the answer to the cancel the consequence caused. The job shows the cause.
func TestCauseReportedAfterItsConsequenceIsTheFailure(t *testing.T) {
	for _, restart := range []RestartStrategy{{}, {Attempts: 1, Delay: time.Hour}} {
		t.Run(restart.String(), func(t *testing.T) {
			var mu sync.Mutex
			byID := map[string]control.Deployment{}
			h := start(t, wordcount(2, 2), func(c *Config, g *fakeGateway, _ *fakePool) {
				c.Restart = restart
				g.onRunning = func(d control.Deployment) {
					mu.Lock()
					byID[d.ExecutionID] = d
					mu.Unlock()
				}
				g.onCancel = func(_ string, f control.FencingToken, id string) error {
					mu.Lock()
					d, ok := byID[id]
					mu.Unlock()
					if ok && isSource(d) {
						return g.reportKind(d, noKey, control.FailureCause)
					}
					return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: f, ExecutionID: id, State: ExecCanceled})
				}
			})
			allRunning(t, h)
			var consumer control.Deployment
			mu.Lock()
			for _, d := range byID {
				if !isSource(d) && d.Subtask == 0 {
					consumer = d
				}
			}
			mu.Unlock()
			if err := h.gw.reportKind(consumer, aborted, control.FailureConsequence); err != nil {
				t.Fatal(err)
			}
			want := Failed
			if restart.Attempts > 0 {
				want = Restarting
			}
			var d Details
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				d = h.jm.Details()
				if d.State != want || !strings.Contains(d.Failure, "record has no key") {
					return fmt.Errorf("job %s, failure %q; want %s with the keyless record", d.State, d.Failure, want)
				}
				return nil
			})
			if strings.Contains(d.Failure, "aborted") || !strings.Contains(d.Failure, `task "lines -> split -> by word" subtask`) {
				t.Fatalf("failure %q", d.Failure)
			}
			got := strings.Join(subtaskFailures(d, "count"), "\n")
			if !strings.Contains(got, "failed as a consequence of another failure: "+aborted) {
				t.Fatalf("the consumer's subtasks do not show the consequence as one:\n%s", got)
			}
			h.jm.Cancel(context.Background())
			h.wait(t, map[bool]JobState{true: Canceled, false: Failed}[restart.Attempts > 0])
		})
	}
}

// A consequence that no cause follows is still the job's failure, shown
// as a consequence; a cause that came first is not replaced by one.
func TestConsequencesNeverHideOrReplaceTheCause(t *testing.T) {
	t.Run("consequence alone", func(t *testing.T) {
		h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
			g.onRunning = func(d control.Deployment) {
				if !isSource(d) {
					g.reportKind(d, aborted, control.FailureConsequence)
				}
			}
		})
		r := h.wait(t, Failed)
		if !strings.Contains(r.Failure, "failed as a consequence of another failure: "+aborted) {
			t.Fatalf("failure %q", r.Failure)
		}
	})
	t.Run("cause first", func(t *testing.T) {
		h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
			g.onRunning = func(d control.Deployment) {
				if isSource(d) {
					g.reportKind(d, noKey, control.FailureCause)
				}
			}
			g.onCancel = func(_ string, f control.FencingToken, id string) error {
				return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{
					Fencing: f, ExecutionID: id, State: ExecFailed, Failure: aborted, FailureKind: control.FailureConsequence})
			}
		})
		r := h.wait(t, Failed)
		if !strings.Contains(r.Failure, "record has no key") || strings.Contains(r.Failure, "aborted") {
			t.Fatalf("failure %q", r.Failure)
		}
	})
	t.Run("an old TaskManager's unclassified failure is a cause", func(t *testing.T) {
		var mu sync.Mutex
		var consumer control.Deployment
		h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
			g.onRunning = func(d control.Deployment) {
				if !isSource(d) {
					mu.Lock()
					consumer = d
					mu.Unlock()
				}
			}
			g.onCancel = func(_ string, f control.FencingToken, id string) error {
				return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: f, ExecutionID: id, State: ExecFailed, Failure: "boom"})
			}
		})
		// Only once both run is the source canceled, and so answers "boom";
		// a source not yet deployed would never be asked.
		allRunning(t, h)
		// The job may show RUNNING before the gateway's hook has recorded
		// the consumer's deployment.
		var d control.Deployment
		testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
			mu.Lock()
			defer mu.Unlock()
			if d = consumer; d.ExecutionID == "" {
				return errors.New("the consumer's deployment is not recorded yet")
			}
			return nil
		})
		if err := h.gw.reportKind(d, aborted, control.FailureConsequence); err != nil {
			t.Fatal(err)
		}
		r := h.wait(t, Failed)
		if !strings.HasSuffix(r.Failure, "failed: boom") {
			t.Fatalf("failure %q", r.Failure)
		}
	})
}

// Subtasks that fail while the job is CANCELLING end CANCELED, as in
// Flink, and the canceled job shows no failure.
func TestFailuresWhileCancellingEndCanceled(t *testing.T) {
	h := start(t, wordcount(2, 2), func(c *Config, g *fakeGateway, _ *fakePool) {
		g.onCancel = func(_ string, f control.FencingToken, id string) error {
			kind := control.FailureCause
			if strings.Contains(id, ".t1.") {
				kind = control.FailureConsequence
			}
			return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{
				Fencing: f, ExecutionID: id, State: ExecFailed, Failure: "torn down", FailureKind: kind})
		}
	})
	allRunning(t, h)
	h.jm.Cancel(context.Background())
	r := h.wait(t, Canceled)
	for _, v := range r.Vertices {
		for _, s := range v.Subtasks {
			if s.State != ExecCanceled {
				t.Errorf("%s subtask %d ended %s (%s), want CANCELED", v.Name, s.Index, s.State, s.Failure)
			}
		}
	}
	if r.Failure != "" {
		t.Errorf("canceled job shows failure %q", r.Failure)
	}
}

// unreachableTM makes the gateway's calls to tm1 fail as a dead
// TaskManager's do (connection refused): cancels never confirm.
func unreachableTM(g *fakeGateway, tm0 func(f control.FencingToken, id string) error) {
	g.onCancel = func(addr string, f control.FencingToken, id string) error {
		if addr == "rpc-tm1" {
			return rpcerr.Errorf(rpcerr.ErrUnreachable, "rpc: dial tcp 127.0.0.1:1: connect: connection refused")
		}
		return tm0(f, id)
	}
}

// A restart does not wait for cancel confirmations from a TaskManager that
// cannot be reached: the cancel timeout is an hour here, and the job
// restarts and finishes.
func TestRestartDoesNotWaitForUnreachableTaskManager(t *testing.T) {
	h := start(t, wordcount(2, 2), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.CancelTimeout = time.Hour
		c.Restart = RestartStrategy{Attempts: 1}
		fin := finishAll(g)
		g.onRunning = func(d control.Deployment) {
			switch {
			case d.Fencing.Attempt > 0:
				fin(d)
			case isSource(d) && strings.HasPrefix(d.AllocationID, "alloc-tm0"):
				g.reportKind(d, "data connection lost: tm1", control.FailureConsequence)
			}
		}
		unreachableTM(g, func(f control.FencingToken, id string) error {
			return g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: f, ExecutionID: id, State: ExecCanceled})
		})
	})
	r := h.wait(t, Finished)
	if r.Restarts != 1 {
		t.Fatalf("restarts %d", r.Restarts)
	}
	// The consequence came first; the unreachable TaskManager is the cause.
	if len(r.History) != 1 || !strings.Contains(r.History[0].Cause, "task manager tm1 unreachable") {
		t.Errorf("history %+v, want the unreachable tm1 as the cause", r.History)
	}
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	if len(h.pool.unreachable) == 0 || h.pool.unreachable[0] != "tm1" {
		t.Fatalf("reported unreachable: %v, want tm1", h.pool.unreachable)
	}
}

// Canceling a FAILING job whose other TaskManager is unreachable ends as
// soon as the reachable one confirms: the unreachable one's tasks count as
// canceled (the cancel timeout is an hour).
func TestCancelOfFailingJobDoesNotWaitForUnreachableTaskManager(t *testing.T) {
	release := make(chan struct{})
	h := start(t, wordcount(2, 2), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.CancelTimeout = time.Hour
		g.onRunning = func(d control.Deployment) {
			if isSource(d) && strings.HasPrefix(d.AllocationID, "alloc-tm0") {
				g.reportKind(d, noKey, control.FailureCause)
			}
		}
		// tm0 confirms its cancels only once the test says so: until then
		// the job stays FAILING.
		unreachableTM(g, func(f control.FencingToken, id string) error {
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				<-release
				g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: f, ExecutionID: id, State: ExecCanceled})
			}()
			return nil
		})
	})
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		d := h.jm.Details()
		if d.State != Failing {
			return fmt.Errorf("job %s, want FAILING", d.State)
		}
		for _, v := range d.Vertices {
			for _, s := range v.Subtasks {
				if s.TaskManager == "tm1" && s.State != ExecCanceled {
					return fmt.Errorf("%s subtask %d on the unreachable tm1 is %s, want CANCELED", v.Name, s.Index, s.State)
				}
			}
		}
		return nil
	})
	if err := h.jm.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(release)
	r := h.wait(t, Canceled)
	// A CANCELED job shows the failure it was canceled in as history.
	if n := len(r.History); n == 0 || !strings.Contains(r.History[n-1].Cause, "record has no key") || r.Failure != "" {
		t.Errorf("failure %q, history %+v", r.Failure, r.History)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return slotsReleased(h) })
}
