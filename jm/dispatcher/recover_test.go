package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// waitingPool has no slots and makes every request wait for them: jobs
// stay live.
type waitingPool struct{ countingPool }

func (p *waitingPool) RequestSlots(ctx context.Context, job string, n int) ([]resourcemanager.Slot, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestJobStoreRecover: a leader records each job before it starts and its
// outcome when it ends; a deposed leader can record (so start) nothing;
// the next leader recovers the live jobs under their ids, keeps the ended
// ones' outcome queryable, and records FAILED a job it cannot start again.
func TestJobStoreRecover(t *testing.T) {
	ctx := context.Background()
	mem := ha.NewMemory()
	l1, err := mem.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f1 := newFixture(t, func(c *Config) { c.Store, c.LeaderSession, c.Resources = l1, l1.Session(), &waitingPool{} })
	digest, _, err := f1.d.UploadModule(ctx, DefaultTenant, wasm)
	if err != nil {
		t.Fatal(err)
	}
	live, err := f1.d.SubmitJob(ctx, DefaultTenant, Submission{ModuleDigest: digest, Args: []string{"ok"}, Name: "live", Config: map[string]string{"sandbox.clock": "wall"}})
	if err != nil {
		t.Fatal(err)
	}
	// A job that fails at once (the counting pool has no slots) on a
	// second dispatcher of the same term: its outcome is recorded.
	f1b := newFixture(t, func(c *Config) { c.Store, c.LeaderSession = l1, l1.Session() })
	if _, _, err := f1b.d.UploadModule(ctx, DefaultTenant, wasm); err != nil {
		t.Fatal(err)
	}
	failed, err := f1b.d.SubmitJob(ctx, DefaultTenant, Submission{ModuleDigest: digest, Args: []string{"ok"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		jobs, _ := mem.Jobs(ctx)
		for _, j := range jobs {
			if j.ID == failed && j.Ended != nil && j.Ended.State == string(jobmaster.Failed) && strings.Contains(j.Ended.Failure, "not enough slots") {
				return nil
			}
		}
		return fmt.Errorf("no FAILED outcome of job %s in the store: %+v", failed, jobs)
	})
	if jobs, _ := mem.Jobs(ctx); len(jobs) != 2 {
		t.Fatalf("store holds %d jobs, want 2: %+v", len(jobs), jobs)
	}

	// Deposed: it records nothing, so starts nothing.
	mem.Depose()
	if _, err := f1.d.SubmitJob(ctx, DefaultTenant, Submission{ModuleDigest: digest, Args: []string{"ok"}}); !errors.Is(err, rpcerr.ErrUnavailable) || !strings.Contains(err.Error(), "not the leader") {
		t.Fatalf("submit on a deposed leader: %v, want Unavailable saying it is not the leader", err)
	}
	if n := len(f1.d.ListJobs(ctx, DefaultTenant)); n != 1 {
		t.Fatalf("the deposed leader lists %d jobs, want its 1", n)
	}

	l2, err := mem.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Session() <= l1.Session() {
		t.Fatalf("session %s of the second term does not order after %s", l2.Session(), l1.Session())
	}
	// A third job whose checkpoint pointer names a checkpoint that is not
	// in the blob store: it cannot be recovered.
	if err := l2.PutJob(ctx, ha.Job{ID: "0123456789abcdef", Tenant: DefaultTenant, ModuleDigest: digest, Args: []string{"ok"}}); err != nil {
		t.Fatal(err)
	}
	if err := l2.PutCheckpoint(ctx, "0123456789abcdef", "0123456789abcdef/3", 4); err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t, func(c *Config) {
		c.Store, c.LeaderSession, c.Resources, c.Blob = l2, l2.Session(), &waitingPool{}, f1.store
	})
	if err := f2.d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := f2.d.GetJob(ctx, DefaultTenant, live)
	if err != nil || d.State.Terminal() || d.Name != "live" {
		t.Fatalf("recovered job %s: %+v, %v; want it live, named live", live, d, err)
	}
	if r, err := f2.d.WaitJob(ctx, DefaultTenant, failed, time.Second); err != nil || r.State != jobmaster.Failed || !strings.Contains(r.Failure, "not enough slots") {
		t.Fatalf("ended job %s after the failover: %+v, %v", failed, r.Details, err)
	}
	if _, err := f2.d.GetJob(ctx, "acme", failed); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Fatalf("another tenant sees the ended job: %v", err)
	}
	bad, err := f2.d.GetJob(ctx, DefaultTenant, "0123456789abcdef")
	if err != nil || bad.State != jobmaster.Failed || !strings.Contains(bad.Failure, "recovery after a JobManager failover failed") {
		t.Fatalf("unrecoverable job: %+v, %v", bad, err)
	}
	if n := len(f2.d.ListJobs(ctx, DefaultTenant)); n != 3 {
		t.Fatalf("the new leader lists %d jobs, want 3", n)
	}
	// The ended ones expire from the store with the retention.
	f2.now.Add(2 * DefaultRetention)
	f2.d.expire()
	if _, err := f2.d.GetJob(ctx, DefaultTenant, failed); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Fatalf("ended job kept after the retention: %v", err)
	}
	jobs, _ := mem.Jobs(ctx)
	for _, j := range jobs {
		if j.ID == failed {
			t.Errorf("expired job %s is still in the store", failed)
		}
	}
}
