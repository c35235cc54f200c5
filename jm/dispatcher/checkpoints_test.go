package dispatcher

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

func TestCheckpointDir(t *testing.T) {
	for _, tt := range []struct {
		ref, job, dir string
		n             uint64
		err           error
	}{
		{ref: "j1/7", job: "j1", n: 7, dir: "tenants/default/jobs/j1/checkpoints/00000000000000000007/"},
		{ref: "tenants/default/jobs/j1/checkpoints/00000000000000000007/", job: "j1", n: 7, dir: "tenants/default/jobs/j1/checkpoints/00000000000000000007/"},
		{ref: "tenants/default/jobs/j1/checkpoints/00000000000000000007", job: "j1", n: 7, dir: "tenants/default/jobs/j1/checkpoints/00000000000000000007/"},
		{ref: "tenants/acme/jobs/j1/checkpoints/00000000000000000007/", err: rpcerr.ErrNotFound}, // another tenant's
		{ref: "j1", err: rpcerr.ErrInvalidArgument},
		{ref: "j1/0", err: rpcerr.ErrInvalidArgument},
		{ref: "j1/-3", err: rpcerr.ErrInvalidArgument},
		{ref: "j1/7/x", err: rpcerr.ErrInvalidArgument},
		{ref: "../j1/7", err: rpcerr.ErrInvalidArgument},
		{ref: "/7", err: rpcerr.ErrInvalidArgument},
		{ref: "tenants/default/jobs/j1/checkpoints/7/", err: rpcerr.ErrInvalidArgument},
		{ref: "tenants/default/jobs/j1/savepoints/00000000000000000007/", err: rpcerr.ErrInvalidArgument},
		{ref: "tenants/default/jobs/j1/checkpoints/00000000000000000007/_metadata", err: rpcerr.ErrInvalidArgument},
	} {
		job, n, dir, err := checkpointDir(DefaultTenant, tt.ref)
		switch {
		case tt.err != nil && !errors.Is(err, tt.err):
			t.Errorf("%q: %v, want %v", tt.ref, err, tt.err)
		case tt.err == nil && (err != nil || job != tt.job || n != tt.n || dir != tt.dir):
			t.Errorf("%q = %q %d %q, %v; want %q %d %q", tt.ref, job, n, dir, err, tt.job, tt.n, tt.dir)
		}
	}
}

// writeCheckpoint stores the metadata (and a state object) of checkpoint n
// of job, as a JobMaster that is gone left it.
func writeCheckpoint(t *testing.T, store blob.Store, tenant, job string, n int64, maxP int) string {
	t.Helper()
	keys, _ := blob.ForTenant(tenant)
	dir, _ := keys.Checkpoint(job, uint64(n))
	ctx := context.Background()
	if err := store.Put(ctx, dir+"state-1-0", strings.NewReader("state"), 5); err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Metadata{JobID: job, Tenant: tenant, ID: n, MaxParallelism: maxP, TriggeredMs: 1000 * n, CompletedMs: 1000*n + 250,
		Tasks: []checkpoint.TaskState{{Vertices: []int{1}, Parallelism: 1, State: checkpoint.StateHandle{Key: dir + "state-1-0", Size: 5, KeyGroupEnd: maxP - 1}}}}
	if err := checkpoint.WriteMetadata(ctx, store, dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRetainedCheckpointsOfAJobThatIsGone: a job this Dispatcher never ran
// (its JobManager is gone) is listed from the store, only its checkpoints
// with metadata, newest first; another tenant sees none; a job starts from
// one by reference, and not from one that does not exist.
func TestRetainedCheckpointsOfAJobThatIsGone(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for n := int64(4); n <= 5; n++ {
		writeCheckpoint(t, f.store, DefaultTenant, "gone", n, 128)
	}
	keys, _ := blob.ForTenant(DefaultTenant)
	unfinished, _ := keys.Checkpoint("gone", 6) // state without metadata: never completed
	if err := f.store.Put(ctx, unfinished+"state-1-0", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	cps, err := f.d.ListCheckpoints(ctx, DefaultTenant, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || cps[0].ID != 5 || cps[1].ID != 4 {
		t.Fatalf("checkpoints %+v: want 5 and 4", cps)
	}
	if c := cps[0]; !c.Retained || c.Status != checkpoint.StatusCompleted || c.Size != 5 || c.Triggered.UnixMilli() != 5000 ||
		c.Duration.Milliseconds() != 250 || c.Location != "tenants/default/jobs/gone/checkpoints/00000000000000000005/" {
		t.Fatalf("checkpoint 5: %+v", c)
	}
	for _, tc := range []struct{ tenant, job string }{{"acme", "gone"}, {DefaultTenant, "never"}} {
		if _, err := f.d.ListCheckpoints(ctx, tc.tenant, tc.job); !errors.Is(err, rpcerr.ErrJobNotFound) {
			t.Errorf("tenant %s, job %s: %v; want job not found", tc.tenant, tc.job, err)
		}
	}
	if _, err := f.d.ListCheckpoints(ctx, DefaultTenant, "../x"); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Errorf("crafted job id: %v", err)
	}

	digest, _, err := f.d.UploadModule(ctx, DefaultTenant, wasm)
	if err != nil {
		t.Fatal(err)
	}
	sub := Submission{ModuleDigest: digest, Args: []string{"ok"}, FromCheckpoint: "gone/5"}
	id, err := f.d.SubmitJob(ctx, DefaultTenant, sub)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := f.d.GetJob(ctx, DefaultTenant, id); r.State.Terminal() && !strings.Contains(r.Failure, "slots") {
		t.Fatalf("job from checkpoint: %+v", r)
	}
	for _, tc := range []struct {
		ref  string
		want error
	}{
		{"gone/6", rpcerr.ErrNotFound}, // not completed
		{"gone/3", rpcerr.ErrNotFound},
		{"never/1", rpcerr.ErrNotFound},
		{"gone", rpcerr.ErrInvalidArgument},
		{"tenants/acme/jobs/gone/checkpoints/00000000000000000005/", rpcerr.ErrNotFound},
	} {
		s := sub
		s.FromCheckpoint = tc.ref
		if _, err := f.d.SubmitJob(ctx, DefaultTenant, s); !errors.Is(err, tc.want) {
			t.Errorf("from checkpoint %q: %v, want %v", tc.ref, err, tc.want)
		}
	}
	s := sub
	s.FromSavepoint = "sp-1"
	if _, err := f.d.SubmitJob(ctx, DefaultTenant, s); !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Errorf("from a savepoint and a checkpoint: %v", err)
	}
	writeCheckpoint(t, f.store, DefaultTenant, "other-maxp", 1, 64)
	s.FromSavepoint, s.FromCheckpoint = "", "other-maxp/1"
	if _, err := f.d.SubmitJob(ctx, DefaultTenant, s); !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), "max parallelism 64") {
		t.Errorf("from a checkpoint of another max parallelism: %v", err)
	}
}
