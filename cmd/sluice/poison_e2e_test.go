package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// poisonLines writes n lines "k<i mod 97>" with line bad (0-based) "boom".
func poisonLines(t *testing.T, n, bad int) string {
	t.Helper()
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		if i == bad {
			b.WriteString("boom\n")
			continue
		}
		fmt.Fprintf(&b, "k%d\n", i%97)
	}
	path := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkRunningCountsOnce checks the poison guest's output over n lines with
// the poison line bad: every key's counts 1..its lines, each exactly once.
func checkRunningCountsOnce(t *testing.T, lines []string, n, bad int) {
	t.Helper()
	want := map[string]int{}
	for i := 0; i < n; i++ {
		if i != bad {
			want[fmt.Sprintf("k%d", i%97)]++
		}
	}
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	bad2 := 0
	for k, w := range want {
		for c := 1; c <= w; c++ {
			l := fmt.Sprintf("%s\t%d", k, c)
			if seen[l] != 1 {
				if bad2 < 5 {
					t.Errorf("%q is in the output %d times, want once", l, seen[l])
				}
				bad2++
			}
			delete(seen, l)
		}
	}
	for l := range seen {
		if bad2 < 10 {
			t.Errorf("unexpected output line %q", l)
		}
		bad2++
	}
	if bad2 > 0 || len(lines) != n-1 {
		t.Fatalf("%d wrong lines among %d, want %d lines each once", bad2, len(lines), n-1)
	}
}

// TestE2EPoisonSkipExactlyOnceKillTaskManager runs 100,000 lines, one of
// them poison, with skip and checkpoints every 300ms across real processes,
// kill -9s a TaskManager once a checkpoint completed (whether before or
// after the poison record was skipped), and checks the committed output:
// 99,999 running counts, each exactly once, and a skipped count of 1.
func TestE2EPoisonSkipExactlyOnceKillTaskManager(t *testing.T) {
	const n, bad = 100_000, 50_000
	in := poisonLines(t, n, bad)
	c := proctest.Start(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s",
		"--restart-attempts", "20", "--restart-delay", "200ms"}, 2, 2)
	r := c.Run("run", "--blob", c.BlobURL, "--detached", "-p", "2", "--checkpoint-interval", "300ms",
		"-C", "pipeline.poison-records=skip", "-C", "pipeline.poison-records.max-per-million=100",
		moduleDir(t, "cmd/sluice/testdata/poison"), "--", "--input", in, "--out", "poison/out", "--burn", "8000")
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d: %s", r.Code, r.Stderr)
	}
	id := strings.TrimSpace(r.Stdout)
	tms, _ := runningOn(localtest.WaitAllRunning(t, c, id, 2*time.Minute))
	victim := localtest.TaskManagerIndex(t, c, tms[len(tms)-1])
	testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
		if d := c.Status(id); d.State != client.StateRunning {
			t.Fatalf("job %s is %s before any checkpoint completed: nothing to kill (raise --burn)", id, d.State)
		}
		if newestCompleted(c.Checkpoints(id)) == 0 {
			return fmt.Errorf("job %s has no completed checkpoint yet", id)
		}
		return nil
	})
	c.KillTaskManager(victim)
	c.StartTaskManager(2)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := c.Client().WaitJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != client.StateFinished {
		t.Fatalf("job ended %s: %s", res.State, res.Failure)
	}
	if res.Restarts == 0 {
		t.Fatalf("job %s finished without a restart: the kill came too late to test anything (raise --burn)", id)
	}
	if got := res.Accumulators["sluice.poison-records.skipped"]; got != 1 {
		t.Errorf("skipped %d poison records, want 1 (accumulators %v)", got, res.Accumulators)
	}
	checkRunningCountsOnce(t, committedLines(t, c.Blob(), "poison/out"), n, bad)
	t.Logf("%d restarts; accumulators %v", res.Restarts, res.Accumulators)
	if st := c.Run("status", id); !strings.Contains(st.Stdout, "sluice.poison-records.skipped 1") {
		t.Errorf("sluice status %s does not show the skipped count:\n%s", id, st.Stdout)
	}
}
