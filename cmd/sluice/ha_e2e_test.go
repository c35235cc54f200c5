package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// haJMArgs are the HA JobManagers' flags: a 2s lease, and the
// TaskManager timings of the exactly-once tests.
var haJMArgs = []string{"--ha-lease-ttl", "2s", "--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s",
	"--restart-attempts", "20", "--restart-delay", "200ms"}

// recoveringRE matches a new leader's log line of a job it recovers.
var recoveringRE = regexp.MustCompile(`msg="recovering job" job=(\S+) .*\bcheckpoint=(\S*)`)

// recoveredFrom is the checkpoint number jm's log says it recovered job id
// from (0: none, or no such line yet), and whether the line is there.
// The last such line counts: a JobManager may have led before (and lost
// its lease on a loaded machine).
func recoveredFrom(jm *proctest.HAJobManager, id string) (cp int64, ok bool) {
	for _, m := range recoveringRE.FindAllStringSubmatch(jm.Stderr(), -1) {
		if m[1] != id {
			continue
		}
		_, n, _ := strings.Cut(m[2], "/")
		cp, _ = strconv.ParseInt(n, 10, 64)
		ok = true
	}
	return cp, ok
}

// submitExactlyOnce runs the exactly-once example detached on c with
// checkpoints every 300ms and returns the job id.
func submitExactlyOnce(t *testing.T, c *proctest.HACluster, keys, perKey, rate int, out string) string {
	t.Helper()
	r := c.Run("run", "--detached", "--blob", c.BlobURL, "-p", "2", "--checkpoint-interval", "300ms", "-C", "sandbox.clock=wall",
		moduleDir(t, "examples/exactlyonce"), "--", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", fmt.Sprint(rate), "--out", out)
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d: %s", r.Code, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

// waitNewCheckpoint waits until job id has completed a checkpoint newer
// than after, and returns the newest.
func waitNewCheckpoint(t *testing.T, c *proctest.HACluster, id string, after int64) int64 {
	t.Helper()
	var newest int64
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		cps, err := c.Client().ListCheckpoints(context.Background(), id)
		if err != nil {
			return err
		}
		if newest = newestCompleted(cps); newest <= after {
			return fmt.Errorf("newest completed checkpoint of job %s is %d, want one after %d", id, newest, after)
		}
		return nil
	})
	return newest
}

// TestE2EHAKillLeader runs the exactly-once example on three JobManagers
// with HA on etcd and two TaskManagers, kill -9s the leader three times
// (starting a replacement standby each time, as a supervisor would), and
// checks that each time a standby takes over, recovers the job from a
// checkpoint no older than the newest completed before the kill, runs it
// again, and that the committed output holds every record exactly once.
// It logs the time from each kill to RUNNING again.
func TestE2EHAKillLeader(t *testing.T) {
	const keys, perKey, rate = 16, 6000, 2500
	c := proctest.StartHA(t, 3, haJMArgs, 2, 2)
	id := submitExactlyOnce(t, c, keys, perKey, rate, "ha/out")

	var recoveries []time.Duration
	var newest int64
	for kill := 1; kill <= 3; kill++ {
		localtest.WaitAllRunning(t, c, id, 2*time.Minute)
		newest = waitNewCheckpoint(t, c, id, newest)
		old, lead := c.Leader()
		killed := time.Now()
		lead.Kill()
		c.StartJobManager()
		// A new leader, and the job RUNNING on it.
		var now *proctest.HAJobManager
		testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
			in, j := c.Leader()
			if in.Session <= old.Session {
				return fmt.Errorf("leader session %s, want one newer than the killed leader's %s", in.Session, old.Session)
			}
			now = j
			return nil
		})
		d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
		took := time.Since(killed)
		recoveries = append(recoveries, took)
		cp, ok := recoveredFrom(now, id)
		switch {
		case !ok:
			t.Fatalf("kill %d: the new leader %s did not log recovering job %s", kill, now.Name, id)
		case cp < newest:
			t.Errorf("kill %d: job %s recovered from checkpoint %d, older than checkpoint %d completed before the kill", kill, id, cp, newest)
		}
		newest = max(newest, cp)
		t.Logf("kill %d of the leader %s at %s: %s leads at %s, job %s RUNNING again from checkpoint %d after %v (restarts %d); its takeover:\n%s",
			kill, lead.Name, killed.UTC().Format("15:04:05.000"), now.Name, now.Leading(), id, cp, took.Round(10*time.Millisecond), d.Restarts, takeover(now.Stderr()))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var res client.JobResult
	testutil.CheckFor(t, 4*time.Minute, 100*time.Millisecond, func() error {
		var err error
		res, err = c.Client().WaitJob(ctx, id)
		if err != nil {
			return err
		}
		if !client.Terminal(res.State) {
			return fmt.Errorf("job %s is still %s", id, res.State)
		}
		return nil
	})
	if res.State != client.StateFinished {
		t.Fatalf("job ended %s: %s", res.State, res.Failure)
	}
	if v := res.Accumulators["violations"]; v != 0 {
		t.Errorf("%d sequence violations", v)
	}
	t.Logf("kill -9 of the leader -> job RUNNING again: %v (lease TTL 2s)", recoveries)
	checkEveryRecordOnce(t, committedLines(t, c.Blob(), "ha/out"), keys, perKey)
}

// TestE2EHADeposedLeader pauses the leader with SIGSTOP until a standby
// has taken over and runs the job, then resumes it: the deposed leader
// must notice and stand by, every call it makes to a TaskManager is
// refused (its session is older than the one the TaskManagers have
// seen), it completes (commits) no checkpoint, and the job's committed
// output still holds every record exactly once.
func TestE2EHADeposedLeader(t *testing.T) {
	const keys, perKey, rate = 8, 4000, 2000
	c := proctest.StartHA(t, 2, haJMArgs, 2, 2)
	id := submitExactlyOnce(t, c, keys, perKey, rate, "deposed/out")
	localtest.WaitAllRunning(t, c, id, 2*time.Minute)
	waitNewCheckpoint(t, c, id, 0)

	old, paused := c.Leader()
	paused.Freeze(t)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		in, _ := c.Leader()
		if in.Session <= old.Session {
			return fmt.Errorf("leader session %s, want one newer than the paused leader's %s", in.Session, old.Session)
		}
		return nil
	})
	d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
	refused := func() int {
		n := 0
		for _, tm := range c.TMs {
			n += strings.Count(tm.Stderr(), "refused a call of a deposed JobManager")
		}
		return n
	}
	before, logBefore := refused(), len(paused.Stderr())

	paused.Thaw(t)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if !strings.Contains(paused.Stderr()[logBefore:], "lost the leadership") {
			return fmt.Errorf("the resumed leader %s has not noticed it lost the leadership", paused.Name)
		}
		return nil
	})
	// Suspending its job, it tried to cancel the tasks: the TaskManagers
	// refused (and anything else it sent before it noticed).
	testutil.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := refused(); n <= before {
			return fmt.Errorf("the TaskManagers refused %d calls of the deposed leader, want more than %d", n, before)
		}
		return nil
	})
	t.Logf("the TaskManagers refused %d calls of the deposed leader after it resumed", refused()-before)
	after := paused.Stderr()[logBefore:]
	if strings.Contains(after, `msg="checkpoint completed"`) {
		t.Errorf("the deposed leader completed a checkpoint after it resumed:\n%s", after)
	}
	if now := c.Status(id); now.Restarts != d.Restarts {
		t.Errorf("the job restarted %d times after the deposed leader resumed (restarts %d, want %d)", now.Restarts-d.Restarts, now.Restarts, d.Restarts)
	}

	res := localtest.WaitTerminal(t, c, id, 4*time.Minute)
	if res.State != client.StateFinished {
		t.Fatalf("job ended %s: %s", res.State, res.Failure)
	}
	if v := res.Accumulators["violations"]; v != 0 {
		t.Errorf("%d sequence violations", v)
	}
	checkEveryRecordOnce(t, committedLines(t, c.Blob(), "deposed/out"), keys, perKey)
	// Its outcome is in the job store: a later leader still answers it.
	_, lead := c.Leader()
	lead.Kill()
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		st := c.Run("status", id)
		if st.Code != 0 || !strings.Contains(st.Stdout, "FINISHED") {
			return fmt.Errorf("sluice status %s after the leader's kill: exit %d: %s%s", id, st.Code, st.Stdout, st.Stderr)
		}
		return nil
	})
}

// TestE2EHAEtcdLate starts a JobManager and a TaskManager with --ha
// before etcd runs: the JobManager says etcd is unreachable and retries
// with backoff, and both go on once etcd is up: it leads, and the
// TaskManager registers with it.
func TestE2EHAEtcdLate(t *testing.T) {
	proctest.RequireEtcd(t)
	addr := proctest.FreeAddr(t)
	c := proctest.NewHA(t, addr, []string{"--ha-lease-ttl", "2s"})
	j := c.StartJobManagerNoWait()
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if log := j.Stderr(); !strings.Contains(log, `msg="etcd unreachable; retrying"`) || !strings.Contains(log, "endpoints="+addr) {
			return fmt.Errorf("the JobManager has not said etcd at %s is unreachable:\n%s", addr, log)
		}
		return nil
	})
	if !j.Alive() {
		t.Fatalf("the JobManager gave up on an unreachable etcd instead of retrying:\n%s", j.Stderr())
	}
	proctest.StartEtcdAt(t, addr)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if j.Leading() == "" {
			return fmt.Errorf("the JobManager does not lead once etcd is up:\n%s", j.Stderr())
		}
		return nil
	})
	c.StartTaskManager(1)
	localtest.WaitSlots(t, c, 1)
}

// takeoverRE matches the log lines of a new leader's takeover.
var takeoverRE = regexp.MustCompile(`(?m)^time=\S+ level=\S+ msg="(elected leader|jobmanager serving|recovering job|job submitted|task manager registered|job state|job failing|lost the leadership[^"]*|standing by[^"]*|campaign failed[^"]*|standby: compiled[^"]*)".*$`)

// takeover is the log lines of a new leader's takeover, for the figures.
func takeover(log string) string {
	lines := takeoverRE.FindAllString(log, -1)
	lines = lines[max(0, len(lines)-20):]
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400]
		}
	}
	return strings.Join(lines, "\n")
}

// TestE2EHAAttachedRunFollowsTheLeader: an attached `sluice run` against
// the etcd URL keeps printing its job's collected records while the leader
// is kill -9ed under it — it follows the new leader and ends with every
// record printed exactly once. After one more failover the finished job's
// outcome and records are still served, now from the blob store.
func TestE2EHAAttachedRunFollowsTheLeader(t *testing.T) {
	const keys, perKey, rate = 4, 2500, 1000
	c := proctest.StartHA(t, 2, haJMArgs, 2, 2)
	run := exec.Command(proctest.Bin(t), "run", "--blob", c.BlobURL, "-p", "2", "--checkpoint-interval", "300ms", "-C", "sandbox.clock=wall",
		moduleDir(t, "examples/exactlyonce"), "--", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey), "--rate", fmt.Sprint(rate), "--records")
	run.Env = append(os.Environ(), c.Env...)
	var stdout, stderr testutil.SyncBuffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { run.Wait(); close(exited) }()
	t.Cleanup(func() {
		run.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("--- sluice run stderr:\n%s", stderr.String())
		}
	})

	var id string
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		jobs, err := c.Client().ListJobs(context.Background())
		if err != nil || len(jobs) == 0 {
			return fmt.Errorf("no job submitted yet (%v)", err)
		}
		id = jobs[0].ID
		return nil
	})
	localtest.WaitAllRunning(t, c, id, 2*time.Minute)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if n := strings.Count(stdout.String(), "\n"); n == 0 || n >= keys*perKey/2 {
			return fmt.Errorf("sluice run printed %d records; want some, and the job well before its end", n)
		}
		return nil
	})
	_, lead := c.Leader()
	lead.Kill()
	c.StartJobManager()
	select {
	case <-exited:
	case <-time.After(4 * time.Minute):
		t.Fatalf("sluice run still waits 4 minutes after the failover; printed %d records", strings.Count(stdout.String(), "\n"))
	}
	if code := run.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("sluice run exited %d across the failover", code)
	}
	if !strings.Contains(stderr.String(), "FINISHED") {
		t.Errorf("sluice run did not report the job FINISHED:\n%s", stderr.String())
	}
	printed := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	checkEveryRecordOnce(t, printed, keys, perKey)

	old, lead := c.Leader()
	lead.Kill()
	c.StartJobManager()
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if in, _ := c.Leader(); in.Session <= old.Session {
			return fmt.Errorf("leader session %s, want one newer than %s", in.Session, old.Session)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Client().WaitJob(ctx, id)
	if err != nil || res.State != client.StateFinished {
		t.Fatalf("finished job %s after the next failover: %s, %v", id, res.State, err)
	}
	if res.RecordsOffset != 0 || res.RecordsTotal != int64(keys*perKey) {
		t.Fatalf("after the next failover the job's records are %d from %d of %d; want all %d", len(res.Records), res.RecordsOffset, res.RecordsTotal, keys*perKey)
	}
	var served []string
	for _, r := range res.Records {
		served = append(served, string(r))
	}
	checkEveryRecordOnce(t, served, keys, perKey)
}
