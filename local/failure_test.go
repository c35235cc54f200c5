package local_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// TestKeylessRecordIsTheFailure: a key_by that leaves one record without a
// key fails the job with that, not with what it causes downstream (its
// consumers see their producer abort, the other producer sees its consumer
// close). Before tasks classified their failures, whichever report came
// first won: 1 to 4 runs of 6 blamed a consequence. Every run must blame
// the cause, at p=2 on two TaskManagers, so records cross the data port.
func TestKeylessRecordIsTheFailure(t *testing.T) {
	wasm := localtest.CGuest(t, "local/testdata/keyless")
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 1})
	cl := c.Client()
	const runs = 20
	for i := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		id, r, err := localtest.RunJob(ctx, cl, c.Blob(), wasm, nil, 2)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if r.State != client.StateFailed || !strings.Contains(r.Failure, "record has no key on a hash-partitioned output") ||
			!strings.Contains(r.Failure, `task "numbers -> by value" subtask`) {
			t.Fatalf("run %d of %d: job %s ended %s with failure:\n%s", i+1, runs, id, r.State, r.Failure)
		}
		for _, v := range r.Vertices {
			for _, s := range v.Subtasks {
				if s.State == "FAILED" && v.Name == "count" && !strings.Contains(s.Failure, "as a consequence of another failure") {
					t.Errorf("run %d: %s subtask %d failed, not as a consequence: %s", i+1, v.Name, s.Index, s.Failure)
				}
			}
		}
	}
}
