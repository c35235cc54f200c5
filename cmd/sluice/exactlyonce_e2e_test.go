package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/blob/blobtest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sdk/client"
)

// openStore opens the blob store the cluster's processes share, from the
// test process.
func openStore(t *testing.T, url string) blob.Store {
	t.Helper()
	tg, err := blob.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	var s blob.Store
	if tg.S3 != nil {
		s3 := testutil.RequireS3(t)
		tg.S3.AccessKey, tg.S3.SecretKey = s3.AccessKey, s3.SecretKey
		s, err = blob.OpenS3(context.Background(), *tg.S3)
	} else {
		s, err = blob.OpenFS(context.Background(), *tg.FS)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (c *testCluster) checkpoints(id string) []client.Checkpoint {
	c.t.Helper()
	r := sluice(c.t, c.env, "checkpoints", "--json", id)
	if r.code != 0 {
		c.t.Fatalf("sluice checkpoints %s: exit %d: %s", id, r.code, r.stderr)
	}
	var cps []client.Checkpoint
	if err := json.Unmarshal([]byte(r.stdout), &cps); err != nil {
		c.t.Fatalf("sluice checkpoints --json: %v\n%s", err, r.stdout)
	}
	return cps
}

// runningOn returns the task managers running the job's subtasks, once
// every subtask is RUNNING; nil before.
func (c *testCluster) runningOn(id string) []string {
	d := c.status(id)
	if d.State != client.StateRunning {
		return nil
	}
	var tms []string
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			if s.State != "RUNNING" {
				return nil
			}
			tms = append(tms, s.TaskManager)
		}
	}
	return tms
}

// procOf finds the live process of a task manager named in a job's status.
func (c *testCluster) procOf(tm string) *proc {
	c.t.Helper()
	for _, p := range c.tms {
		select {
		case <-p.done:
			continue
		default:
		}
		if strings.Contains(tm, p.addr) || victimMatches(c, tm, p) {
			return p
		}
	}
	c.t.Fatalf("no live task manager process matches %q", tm)
	return nil
}

// TestE2EExactlyOnceKillTaskManagers runs the exactly-once example across
// real processes with checkpoints every 300ms, kill -9s a TaskManager three
// times (the second time between a checkpoint's trigger and its
// completion), starts a replacement each time, and checks: zero sequence
// violations, committed output with every record exactly once, and nothing
// left of the checkpoint that was in flight.
func TestE2EExactlyOnceKillTaskManagers(t *testing.T) {
	const keys, perKey, rate = 16, 2500, 2500
	c := startCluster(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s",
		"--restart-attempts", "20", "--restart-delay", "200ms"}, 2, 2)
	store := openStore(t, c.blob)
	r := sluice(t, c.env, "run", "--detached", "-p", "2", "--checkpoint-interval", "300ms", "-C", "sandbox.clock=wall",
		moduleDir(t, "examples/exactlyonce"), "--", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", fmt.Sprint(rate), "--barrier-delay", "250ms", "--out", "eo/out")
	if r.code != 0 {
		t.Fatalf("sluice run: exit %d: %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)

	cl, err := client.New(c.jm.addr)
	if err != nil {
		t.Fatal(err)
	}
	var inFlight int64
	var recoveries []time.Duration
	for kill := 1; kill <= 3; kill++ {
		var tms []string
		testutil.Eventually(t, 2*time.Minute, func() bool {
			tms = c.runningOn(id)
			return tms != nil
		}, "job %s never had every subtask running before kill %d", id, kill)
		if kill == 2 {
			// Between a trigger and its completion: a checkpoint triggered
			// moments ago, while every barrier hook takes 250ms.
			testutil.Eventually(t, time.Minute, func() bool {
				cps, err := cl.ListCheckpoints(context.Background(), id)
				if err != nil {
					return false
				}
				i := slices.IndexFunc(cps, func(cp client.Checkpoint) bool {
					return cp.Status == "IN_PROGRESS" && time.Since(cp.Triggered) < 100*time.Millisecond
				})
				if i >= 0 {
					inFlight = cps[i].ID
				}
				return i >= 0
			}, "no checkpoint ever in progress")
		} else {
			done := len(slices.DeleteFunc(c.checkpoints(id), func(cp client.Checkpoint) bool { return cp.Status != "COMPLETED" }))
			testutil.Eventually(t, time.Minute, func() bool {
				return len(slices.DeleteFunc(c.checkpoints(id), func(cp client.Checkpoint) bool { return cp.Status != "COMPLETED" })) > done
			}, "no checkpoint completed before kill %d", kill)
		}
		victim := c.procOf(tms[len(tms)-1])
		killed := time.Now()
		victim.kill()
		c.addTM(2) // a replacement, as a supervisor would start
		testutil.Eventually(t, 2*time.Minute, func() bool {
			d := c.status(id)
			return d.Restarts >= kill && c.runningOn(id) != nil
		}, "job did not run again after kill %d", kill)
		recoveries = append(recoveries, time.Since(killed))
		if kill == 2 {
			// The in-flight checkpoint was aborted and nothing of it stays.
			dir := fmt.Sprintf("tenants/default/jobs/%s/checkpoints/%020d/", id, inFlight)
			testutil.Eventually(t, 10*time.Second, func() bool {
				n := 0
				for range blob.All(context.Background(), store, dir) {
					n++
				}
				return n == 0
			}, "the aborted checkpoint %d left objects in %s", inFlight, dir)
		}
		t.Logf("kill %d of %s: job RUNNING again after %v", kill, victim.name, time.Since(killed).Round(10*time.Millisecond))
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
	cps := c.checkpoints(id)
	i := slices.IndexFunc(cps, func(cp client.Checkpoint) bool { return cp.ID == inFlight })
	if i < 0 || cps[i].Status != "ABORTED" {
		t.Errorf("checkpoint %d, in flight at the second kill, is not ABORTED", inFlight)
	}
	t.Logf("%d restarts, recoveries %v, checkpoints: %d", res.Restarts, recoveries, len(cps))

	// The committed output: every record exactly once.
	var lines []string
	for info, err := range blob.All(ctx, store, "tenants/default/files/eo/out/") {
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(blobtest.GetBytes(t, store, info.Key)))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	bad := 0
	for k := range keys {
		for s := 1; s <= perKey; s++ {
			l := fmt.Sprintf("k%d\t%d", k, s)
			if seen[l] != 1 {
				if bad < 5 {
					t.Errorf("%q committed %d times", l, seen[l])
				}
				bad++
			}
		}
	}
	if bad > 0 || len(lines) != keys*perKey {
		t.Fatalf("committed output: %d lines for %d records, %d wrong", len(lines), keys*perKey, bad)
	}
	// The finished job leaves no checkpoint or pending part behind, so in
	// particular nothing of the aborted one.
	testutil.Eventually(t, 10*time.Second, func() bool {
		n := 0
		for range blob.All(ctx, store, "tenants/default/jobs/"+id+"/") {
			n++
		}
		return n == 0
	}, "job %s left objects under its prefix", id)
}
