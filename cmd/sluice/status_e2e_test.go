package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// TestE2EStatusDoneFromProcessFailsTheJob: a guest whose sluice_process
// returns status 2 (DONE) fails its job, and `sluice run` exits non-zero
// with an error that says so; before, the job FINISHED without its input.
// At p=1 every guest task does it; at p=2 only the keyed task does, while
// its upstream emits normally.
func TestE2EStatusDoneFromProcessFailsTheJob(t *testing.T) {
	wasm := localtest.CGuest(t, "cmd/sluice/testdata/statusdone")
	dir := t.TempDir()
	module := filepath.Join(dir, "statusdone.wasm")
	input := filepath.Join(dir, "in.txt")
	var lines strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	for path, b := range map[string][]byte{module: wasm, input: []byte(lines.String())} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := proctest.Start(t, nil, 4)
	for i, tc := range []struct {
		mode, p string
	}{{"map", "1"}, {"keyed", "2"}} {
		t.Run(tc.mode, func(t *testing.T) {
			r := c.Run("run", "--blob", c.BlobURL, "-p", tc.p, module, "--", "--input", input, "--mode", tc.mode)
			if r.Code == 0 {
				t.Fatalf("sluice run exited 0 for a guest that returned DONE from sluice_process\nstdout:\n%.2000s\nstderr:\n%s", r.Stdout, r.Stderr)
			}
			const want = "sluice_process returned status 2 (DONE), which only sluice_source_poll may return"
			if !strings.Contains(r.Stderr, "FAILED") || !strings.Contains(r.Stderr, want) {
				t.Errorf("sluice run's stderr lacks FAILED and %q:\n%s", want, r.Stderr)
			}
			jobs := c.Jobs()
			if len(jobs) != i+1 {
				t.Fatalf("jobs = %+v", jobs)
			}
			var job client.JobSummary
			for _, j := range jobs {
				if job.ID == "" || j.Start.After(job.Start) {
					job = j
				}
			}
			if job.State != client.StateFailed {
				t.Errorf("job %s is %s; want FAILED", job.ID, job.State)
			}
			localtest.WaitSlots(t, c, 4)
		})
	}
}
