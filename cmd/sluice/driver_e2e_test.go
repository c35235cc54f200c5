package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

var startedPIDRE = regexp.MustCompile(`started task manager process.* pid=(\d+)`)

// childPIDs returns the pids of the TaskManagers the JobManager's process
// driver logged it started.
func childPIDs(jm *proctest.Proc) []int {
	var out []int
	for _, m := range startedPIDRE.FindAllStringSubmatch(jm.Stderr(), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		for _, p := range pids {
			if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("task manager process %d still runs (kill 0: %v)", p, err)
			}
		}
		return nil
	})
}

// TestE2EProcessDriver: a JobManager with --driver process and no
// TaskManagers runs a job of parallelism 4 by starting two `sluice tm`
// children of two slots, stops them once idle, refuses a job beyond
// --max-taskmanagers naming the limit, and stops its children when it shuts
// down.
func TestE2EProcessDriver(t *testing.T) {
	in, want := wordInput(t)
	logDir := t.TempDir()
	c := proctest.Start(t, []string{"--driver", "process", "--tm-slots", "2", "--max-taskmanagers", "3",
		"--tm-idle-timeout", "2s", "--tm-log-dir", logDir, "--slot-timeout", "3m"})
	if ov := c.Overview(); len(ov.TaskManagers) != 0 {
		t.Fatalf("task managers before any job: %+v", ov.TaskManagers)
	}

	r := c.Run("run", "--blob", c.BlobURL, "-p", "4", moduleDir(t, "examples/wordcount"), "--", "--input", in)
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	checkCounts(t, want, r.Stdout)
	jobs := c.Jobs()
	if len(jobs) != 1 || jobs[0].State != client.StateFinished {
		t.Fatalf("jobs = %+v; want one FINISHED", jobs)
	}
	tms := map[string]bool{}
	for _, v := range c.Status(jobs[0].ID).Vertices {
		for _, s := range v.Subtasks {
			tms[s.TaskManager] = true
		}
	}
	if len(tms) != 2 {
		t.Errorf("subtasks ran on %v; want the two task managers the driver started", tms)
	}
	pids := childPIDs(c.JM)
	if len(pids) != 2 {
		t.Fatalf("the driver started %d processes, want 2:\n%s", len(pids), c.JM.Stderr())
	}

	// Idle for --tm-idle-timeout: stopped, and the JobManager forgets them.
	localtest.WaitTaskManagers(t, c, 0, time.Minute)
	waitGone(t, pids)
	logs, _ := filepath.Glob(filepath.Join(logDir, "proc-*.log"))
	if len(logs) != 2 {
		t.Fatalf("log files %v, want one per task manager", logs)
	}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if !strings.Contains(string(b), "taskmanager listening on") {
			t.Errorf("%s lacks the task manager's output:\n%s", l, b)
		}
	}

	// Beyond the maximum: refused at once, naming the limit.
	r = c.Run("run", "--blob", c.BlobURL, "-p", "7", moduleDir(t, "examples/wordcount"), "--", "--input", in)
	if r.Code == 0 || !strings.Contains(r.Stderr, "not enough slots: need 7") || !strings.Contains(r.Stderr, "limit of 3 task managers of 2 slots") || !strings.Contains(r.Stderr, "--max-taskmanagers") {
		t.Fatalf("sluice run -p 7: exit %d, stderr:\n%s", r.Code, r.Stderr)
	}

	// A running job's TaskManager stops with the JobManager.
	id := c.Submit(1, moduleDir(t, "local/testdata/spin"))
	localtest.WaitJobState(t, c, id, client.StateRunning, 2*time.Minute)
	pids = childPIDs(c.JM)[2:]
	if len(pids) != 1 {
		t.Fatalf("started %v for the spinning job, want one", pids)
	}
	c.JM.Stop()
	waitGone(t, pids)
}
