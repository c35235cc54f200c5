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
	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// TestE2EResumeFromCheckpointAfterLosingTheJobManager runs the exactly-once
// example with the transactional file sink and checkpoints, kill -9s the
// JobManager and every TaskManager mid-run, starts a new JobManager (which
// knows nothing of the job) and new TaskManagers on the same blob store,
// lists the lost job's retained checkpoints through the new JobManager,
// resumes from the newest at another parallelism, and checks that the
// committed output of both jobs together holds every record exactly once.
func TestE2EResumeFromCheckpointAfterLosingTheJobManager(t *testing.T) {
	const keys, perKey, rate = 8, 2000, 2000
	c := proctest.Start(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s"}, 2, 2)
	store := c.Blob()
	args := []string{moduleDir(t, "examples/exactlyonce"), "--", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", fmt.Sprint(rate), "--out", "eo/resume"}
	r := c.Run(append([]string{"run", "--detached", "-p", "2", "--checkpoint-interval", "300ms", "-C", "sandbox.clock=wall",
		"-C", "state.checkpoints.num-retained=2"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d: %s", r.Code, r.Stderr)
	}
	lost := strings.TrimSpace(r.Stdout)
	localtest.WaitAllRunning(t, c, lost, 2*time.Minute)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		n := 0
		for _, cp := range c.Checkpoints(lost) {
			if cp.Status == checkpoint.StatusCompleted {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d checkpoints of job %s completed, want 2 before the kill", n, lost)
		}
		return nil
	})

	// The JobManager and its TaskManagers die mid-run, with no goodbye.
	if d := c.Status(lost); d.State != client.StateRunning {
		t.Fatalf("job %s is %s before the kill; want it mid-run", lost, d.State)
	}
	c.JM.Kill()
	for i := range c.TMs {
		c.KillTaskManager(i)
	}
	// The newest completed checkpoint, as the store holds it.
	newest := int64(0)
	prefix := "tenants/default/jobs/" + lost + "/checkpoints/"
	for o, err := range blob.All(context.Background(), store, prefix) {
		if err != nil {
			t.Fatal(err)
		}
		seg, rest, _ := strings.Cut(strings.TrimPrefix(o.Key, prefix), "/")
		if n, err := blob.ParseCheckpoint(seg); err == nil && rest == checkpoint.MetadataObject {
			newest = max(newest, int64(n))
		}
	}
	if newest == 0 {
		t.Fatalf("no completed checkpoint of job %s in the store", lost)
	}
	committedBefore := committedLines(t, store, "eo/resume")

	// A new JobManager on the same store: it never ran the job, but lists
	// its retained checkpoints from the store.
	c.ReplaceJobManager()
	c.StartTaskManager(2)
	c.StartTaskManager(2)
	localtest.WaitSlots(t, c, 4)
	ls := c.Run("checkpoints", lost)
	ref := client.CheckpointRef(lost, newest)
	if ls.Code != 0 || !strings.Contains(ls.Stdout, "--from-checkpoint "+ref+"\n") {
		t.Fatalf("sluice checkpoints %s: exit %d, want checkpoint %d to resume from:\n%s%s", lost, ls.Code, newest, ls.Stdout, ls.Stderr)
	}
	var cps []client.Checkpoint
	if err := json.Unmarshal([]byte(c.Run("checkpoints", "--json", lost).Stdout), &cps); err != nil {
		t.Fatal(err)
	}
	if len(cps) == 0 || cps[0].ID != newest || !cps[0].Retained || cps[0].Status != checkpoint.StatusCompleted ||
		slices.ContainsFunc(cps, func(cp client.Checkpoint) bool { return !cp.Retained }) || len(cps) > 3 {
		// 2 retained, and a third when the kill landed between a checkpoint
		// completing and the JobManager deleting the one it subsumed.
		t.Fatalf("checkpoints of the lost job: %+v; want the 2 retained (3 if the kill cut a deletion short), newest %d first", cps, newest)
	}

	// Resume at another parallelism.
	r = c.Run(append([]string{"run", "--detached", "-p", "3", "--checkpoint-interval", "300ms", "-C", "sandbox.clock=wall",
		"--from-checkpoint", ref}, args...)...)
	if r.Code != 0 {
		t.Fatalf("sluice run --from-checkpoint %s: exit %d: %s", ref, r.Code, r.Stderr)
	}
	resumed := strings.TrimSpace(r.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := c.Client().WaitJob(ctx, resumed)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != client.StateFinished {
		t.Fatalf("resumed job ended %s: %s", res.State, res.Failure)
	}
	if v, ok := res.Accumulators["violations"]; !ok || v != 0 {
		t.Errorf("resumed job: violations %d (reported %v)", v, ok)
	}

	// Every record exactly once in what both jobs committed; the lost job
	// had committed some before it died, and nothing it committed is
	// repeated.
	all := committedLines(t, store, "eo/resume")
	t.Logf("lost job %s: %d lines committed before the kill, resumed from checkpoint %d; %d lines in all", lost, len(committedBefore), newest, len(all))
	if len(committedBefore) == 0 || len(committedBefore) >= keys*perKey {
		t.Errorf("%d lines committed before the kill: the test wants some output of the lost job, not all", len(committedBefore))
	}
	checkEveryRecordOnce(t, all, keys, perKey)
}

// committedLines reads the file sink's committed output under path.
func committedLines(t *testing.T, store blob.Store, path string) []string {
	t.Helper()
	var lines []string
	for info, err := range blob.All(context.Background(), store, "tenants/default/files/"+path+"/") {
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(blobtest.GetBytes(t, store, info.Key)))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// checkEveryRecordOnce checks that lines hold each "k<i>\t<seq>" of the
// exactly-once example exactly once, and nothing else.
func checkEveryRecordOnce(t *testing.T, lines []string, keys, perKey int) {
	t.Helper()
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
}
