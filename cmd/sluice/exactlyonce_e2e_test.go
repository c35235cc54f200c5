package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// runningOn returns the task managers running job id's subtasks once
// every subtask is RUNNING, or says why not.
func runningOn(d client.JobDetails) ([]string, error) {
	if err := localtest.AllRunning(d); err != nil {
		return nil, err
	}
	var tms []string
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			tms = append(tms, s.TaskManager)
		}
	}
	return tms, nil
}

// TestE2EExactlyOnceKillTaskManagers runs the exactly-once example across
// real processes with checkpoints every 300ms, kill -9s a TaskManager three
// times (the second time aiming between a checkpoint's trigger and its
// completion), starts a replacement each time, and checks what must hold
// however the kill and the checkpoints interleave: every restart restored
// a completed checkpoint, no older than the newest one completed before
// the kill; the checkpoint in flight at the second kill either completed
// or left nothing behind; zero sequence violations; and the committed
// output holds every record exactly once.
func TestE2EExactlyOnceKillTaskManagers(t *testing.T) {
	const keys, perKey, rate = 16, 2500, 2500
	c := proctest.Start(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s",
		"--restart-attempts", "20", "--restart-delay", "200ms"}, 2, 2)
	store := c.Blob()
	r := c.Run("run", "--detached", "-p", "2", "--checkpoint-interval", "300ms", "-C", "sandbox.clock=wall",
		moduleDir(t, "examples/exactlyonce"), "--", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", fmt.Sprint(rate), "--barrier-delay", "250ms", "--out", "eo/out")
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d: %s", r.Code, r.Stderr)
	}
	id := strings.TrimSpace(r.Stdout)

	cl := c.Client()
	var inFlight int64
	var recoveries []time.Duration
	restarts := 0
	for kill := 1; kill <= 3; kill++ {
		tms, _ := runningOn(localtest.WaitAllRunning(t, c, id, 2*time.Minute))
		// Found before the wait below, so the kill follows the checkpoint
		// listing at once.
		victim := localtest.TaskManagerIndex(t, c, tms[len(tms)-1])
		// The restore must be at least as new as this (taken before the
		// wait below, so the kill follows the listing at once).
		newest := newestCompleted(c.Checkpoints(id))
		if kill == 2 {
			// Between a trigger and its completion: a checkpoint triggered
			// moments ago, while every barrier hook takes 250ms.
			testutil.CheckFor(t, time.Minute, 5*time.Millisecond, func() error {
				cps, err := cl.ListCheckpoints(context.Background(), id)
				if err != nil {
					return err
				}
				i := slices.IndexFunc(cps, func(cp client.Checkpoint) bool {
					return cp.Status == "IN_PROGRESS" && time.Since(cp.Triggered) < 100*time.Millisecond
				})
				if i < 0 {
					return fmt.Errorf("none of job %s's %d checkpoints is in progress and triggered under 100ms ago", id, len(cps))
				}
				inFlight = cps[i].ID
				return nil
			})
		} else {
			done := newest
			testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
				if newest = newestCompleted(c.Checkpoints(id)); newest <= done {
					return fmt.Errorf("newest completed checkpoint %d, want a new one before kill %d", newest, kill)
				}
				return nil
			})
		}
		killed := time.Now()
		c.KillTaskManager(victim)
		c.StartTaskManager(2) // a replacement, as a supervisor would start
		d := localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
			if d.Restarts <= restarts {
				return fmt.Errorf("job %s restarted %d times, want more than %d after kill %d", id, d.Restarts, restarts, kill)
			}
			return localtest.AllRunning(d)
		})
		recoveries = append(recoveries, time.Since(killed))
		checkRestores(t, c, id, restarts, d.Restarts, newest)
		restarts = d.Restarts
		if st := checkpointStatus(c, id, inFlight); kill == 2 && st == "COMPLETED" {
			// Its last acknowledgement beat the kill (a loaded machine can
			// take longer than a barrier hook between the listing and the
			// kill): completing it was right, and the restore may use it.
			t.Logf("checkpoint %d completed before the kill took effect; this run did not exercise the abort", inFlight)
			inFlight = 0
		} else if kill == 2 && st == "IN_PROGRESS" {
			t.Errorf("checkpoint %d of the failed attempt is still IN_PROGRESS after the restart", inFlight)
		}
		if kill == 2 && inFlight != 0 {
			// The in-flight checkpoint was aborted and nothing of it stays.
			dir := fmt.Sprintf("tenants/default/jobs/%s/checkpoints/%020d/", id, inFlight)
			testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
				n := 0
				for range blob.All(context.Background(), store, dir) {
					n++
				}
				if n > 0 {
					return fmt.Errorf("the aborted checkpoint %d left %d objects in %s", inFlight, n, dir)
				}
				return nil
			})
		}
		t.Logf("kill %d of %s: job RUNNING again after %v", kill, c.TMs[victim].Name, time.Since(killed).Round(10*time.Millisecond))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cl.WaitJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != client.StateFinished {
		t.Fatalf("job ended %s: %s", res.State, res.Failure)
	}
	if v := res.Accumulators["violations"]; v != 0 {
		t.Errorf("%d sequence violations", v)
	}
	// What a user sees: the verdict, and the kills as history, not as a
	// failure of the FINISHED job.
	st := c.Run("status", id)
	if st.Code != 0 || !strings.Contains(st.Stdout, "accumulators:\n  violations 0\n") ||
		!strings.Contains(st.Stdout, "\nhistory:\n") || strings.Contains(st.Stdout, "\nfailure:\n") ||
		!strings.Contains(st.Stdout, fmt.Sprintf("restarts  %d\n", res.Restarts)) {
		t.Errorf("sluice status %s: exit %d, want violations 0, %d restarts and their history, no failure:\n%s%s", id, st.Code, res.Restarts, st.Stdout, st.Stderr)
	}
	if d := c.Status(id); len(d.History) != res.Restarts || d.Accumulators["violations"] != 0 || d.Failure != "" {
		t.Errorf("sluice status --json: history %+v, accumulators %v, failure %q", d.History, d.Accumulators, d.Failure)
	}
	cps := c.Checkpoints(id)
	t.Logf("%d restarts, recoveries %v, checkpoints: %d", res.Restarts, recoveries, len(cps))

	// The committed output: every record exactly once.
	checkEveryRecordOnce(t, committedLines(t, store, "eo/out"), keys, perKey)
	// The finished job leaves no checkpoint or pending part behind, so in
	// particular nothing of the aborted one.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		n := 0
		for range blob.All(ctx, store, "tenants/default/jobs/"+id+"/") {
			n++
		}
		if n > 0 {
			return fmt.Errorf("job %s left %d objects under its prefix", id, n)
		}
		return nil
	})
}

// checkpointStatus is the status of checkpoint cp of job id, "" if the job
// lists no such checkpoint.
func checkpointStatus(c *proctest.Cluster, id string, cp int64) string {
	return checkpointStatusIn(c.Checkpoints(id), cp)
}

// checkpointStatusIn is the status of checkpoint cp in cps, "" if absent.
func checkpointStatusIn(cps []client.Checkpoint, cp int64) string {
	for _, x := range cps {
		if x.ID == cp {
			return x.Status
		}
	}
	return ""
}

// newestCompleted is the id of the newest COMPLETED checkpoint in cps, 0
// when none is.
func newestCompleted(cps []client.Checkpoint) int64 {
	var n int64
	for _, cp := range cps {
		if cp.Status == "COMPLETED" && !cp.Savepoint {
			n = max(n, cp.ID)
		}
	}
	return n
}

// restoreRE matches the JobManager's log line of an attempt that restores
// a checkpoint.
var restoreRE = regexp.MustCompile(`msg=restoring job=(\S+) .*\bcheckpoint=(\d+) .*\battempt=(\d+)`)

// checkRestores checks, from the JobManager's log, that every attempt of
// job id after attempt from up to attempt to restored a COMPLETED
// checkpoint, none older than newest (the newest completed before the
// failure): what exactly-once recovery needs, whichever checkpoint the
// kill happened to interrupt.
func checkRestores(t *testing.T, c *proctest.Cluster, id string, from, to int, newest int64) {
	t.Helper()
	cps := c.Checkpoints(id)
	restored := map[int]int64{}
	for _, m := range restoreRE.FindAllStringSubmatch(c.JM.Stderr(), -1) {
		if m[1] != id {
			continue
		}
		cp, _ := strconv.ParseInt(m[2], 10, 64)
		attempt, _ := strconv.Atoi(m[3])
		restored[attempt] = cp
	}
	for a := from + 1; a <= to; a++ {
		cp, ok := restored[a]
		switch {
		case !ok && newest > 0:
			t.Errorf("attempt %d of job %s restored no checkpoint, though checkpoint %d had completed", a, id, newest)
		case !ok:
		case cp < newest:
			t.Errorf("attempt %d of job %s restored checkpoint %d, older than checkpoint %d completed before the failure", a, id, cp, newest)
		case checkpointStatusIn(cps, cp) != "COMPLETED":
			t.Errorf("attempt %d of job %s restored checkpoint %d, which is %q, not COMPLETED", a, id, cp, checkpointStatusIn(cps, cp))
		}
	}
}
