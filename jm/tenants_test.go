package jm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	dspclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
)

const (
	tokenA = "slc_tenant-a-token-for-tests"
	tokenB = "slc_tenant-b-token-for-tests"
)

func testTenants(t *testing.T, quotasA auth.Quotas) *auth.Tenants {
	t.Helper()
	f := `{"tenants":[
		{"name":"a","token_sha256":["` + auth.HashToken(tokenA) + `"],"quotas":` + quotasJSON(quotasA) + `},
		{"name":"b","token_sha256":["` + auth.HashToken(tokenB) + `"]}]}`
	ts, err := auth.ParseTenants([]byte(f))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func quotasJSON(q auth.Quotas) string {
	b, err := sonic.ConfigStd.Marshal(q)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// tokenClient is a Dispatcher client whose calls carry token ("" for none).
func tokenClient(addr, token string) dspclient.Client {
	return tokenClientTimeout(addr, token, 30*time.Second)
}

// tokenClientTimeout is tokenClient with another RPC timeout.
func tokenClientTimeout(addr, token string, timeout time.Duration) dspclient.Client {
	cfg := rpcserver.ClientConfig{RPCTimeout: timeout}
	if token != "" {
		cfg.Metadata = map[string]string{rpcserver.MetaToken: token}
	}
	return dspclient.MustNewClient("dispatcher", rpcserver.ClientOptions(addr, cfg)...)
}

// allRunning says why job or one of its subtasks is not RUNNING, or nil if
// every one is.
func allRunning(ctx context.Context, dc dspclient.Client, job string) error {
	d, err := dc.GetJob(ctx, job)
	if err != nil {
		return fmt.Errorf("job %s: %w", job, rpcserver.FromCall(err))
	}
	if st := d.Summary.State; st != "RUNNING" {
		return fmt.Errorf("job %s is %s, want RUNNING", job, st)
	}
	for _, v := range d.Vertices {
		if len(v.Subtasks) == 0 { // before its slots arrive
			return fmt.Errorf("job %s: vertex %s lists no subtasks yet", job, v.Name)
		}
		for _, st := range v.Subtasks {
			if st.State != "RUNNING" {
				return fmt.Errorf("job %s: vertex %s subtask %d is %s, want RUNNING", job, v.Name, st.Index, st.State)
			}
		}
	}
	return nil
}

// waitRunning waits up to 5s until job and every one of its subtasks is
// RUNNING.
func waitRunning(t *testing.T, ctx context.Context, dc dspclient.Client, job string) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return allRunning(ctx, dc, job) })
}

// TestTenantMatrixOverKitex calls every Dispatcher method with no token, a
// wrong token, another tenant's token (on tenant a's job and module, with
// crafted ids too) and the right token: only the right token acts on a's
// objects, and the other calls change nothing.
func TestTenantMatrixOverKitex(t *testing.T) {
	store := newStore(t)
	s := startJM(t, func(c *jm.Config) {
		c.Blob = store
		c.Planner = graphPlanner{reduceP: 1}
		c.Tenants = testTenants(t, auth.Quotas{})
		c.CancelTimeout = 5 * time.Second
	})
	ctx := context.Background()
	startTE(t, s.Addr(), "tm-1", 4, true)
	a := tokenClient(s.Addr(), tokenA)

	up, err := a.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	moduleKey := "tenants/a/modules/" + up.Digest + ".wasm"
	if _, err := store.Stat(ctx, moduleKey); err != nil {
		t.Fatalf("a's module is not under a's prefix: %v", err)
	}
	sub, err := a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	job := sub.JobId
	waitRunning(t, ctx, a, job)

	// A savepoint of a (written as the coordinator would: metadata last).
	spKey := "tenants/a/savepoints/sp-a1/" + checkpoint.MetadataObject
	if err := checkpoint.WriteMetadata(ctx, store, "tenants/a/savepoints/sp-a1/", &checkpoint.Metadata{
		JobID: job, Tenant: "a", ID: 1, Savepoint: true, SavepointID: "sp-a1", MaxParallelism: 128,
	}); err != nil {
		t.Fatal(err)
	}
	craftedSavepoints := []string{"sp-a1", "../a/savepoints/sp-a1", "tenants/a/savepoints/sp-a1", "../../tenants/a/savepoints/sp-a1", "sp-a1/.."}

	crafted := []string{job, "../a/jobs/" + job, "tenants/a/jobs/" + job, "../../" + job, job + "/../" + job, "a/" + job}
	craftedDigests := []string{up.Digest, "../a/modules/" + up.Digest, "tenants/a/modules/" + up.Digest + ".wasm", "../../tenants/a/modules/" + up.Digest}
	unchanged := func(who string) {
		t.Helper()
		if err := allRunning(ctx, a, job); err != nil {
			t.Fatalf("after %s: a's job is no longer running: %v", who, err)
		}
		if _, err := store.Stat(ctx, moduleKey); err != nil {
			t.Fatalf("after %s: a's module is gone: %v", who, err)
		}
		if _, err := store.Stat(ctx, spKey); err != nil {
			t.Fatalf("after %s: a's savepoint is gone: %v", who, err)
		}
		l, err := a.ListJobs(ctx)
		if err != nil || len(l.Jobs) != 1 || l.Jobs[0].JobId != job {
			t.Fatalf("after %s: a's jobs %+v %v", who, l, err)
		}
	}

	// No token and a wrong token: every method is UNAUTHENTICATED.
	for _, tc := range []struct{ name, token string }{{"no token", ""}, {"wrong token", "slc_wrong"}, {"a's token hash as token", auth.HashToken(tokenA)}} {
		c := tokenClient(s.Addr(), tc.token)
		unauth := func(method string, err error) {
			t.Helper()
			if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrUnauthenticated) {
				t.Errorf("%s, %s: %v, want UNAUTHENTICATED", tc.name, method, err)
			}
		}
		_, err := c.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
		unauth("UploadModule", err)
		_, err = c.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}})
		unauth("SubmitJob", err)
		_, err = c.ListJobs(ctx)
		unauth("ListJobs", err)
		_, err = c.Overview(ctx)
		unauth("Overview", err)
		for _, id := range crafted {
			_, err = c.GetJob(ctx, id)
			unauth("GetJob "+id, err)
			unauth("CancelJob "+id, c.CancelJob(ctx, id))
			_, err = c.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: id, TimeoutMs: 10})
			unauth("WaitJob "+id, err)
			_, err = c.TriggerSavepoint(ctx, &dispatcher.SavepointRequest{JobId: id, Stop: true})
			unauth("TriggerSavepoint "+id, err)
			_, err = c.ListCheckpoints(ctx, id)
			unauth("ListCheckpoints "+id, err)
		}
		for _, sp := range craftedSavepoints {
			unauth("DisposeSavepoint "+sp, c.DisposeSavepoint(ctx, sp))
			_, err = c.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}, FromSavepoint: &sp})
			unauth("SubmitJob from savepoint "+sp, err)
		}
		unchanged(tc.name)
	}

	// Tenant b: a's job and module do not exist for b.
	b := tokenClient(s.Addr(), tokenB)
	for _, id := range crafted {
		_, err := b.GetJob(ctx, id)
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) || err.Error() != `job "`+id+`" not found` {
			t.Errorf("b GetJob %q: %v", id, err)
		}
		if err := rpcserver.FromCall(b.CancelJob(ctx, id)); !errors.Is(err, rpcerr.ErrNotFound) {
			t.Errorf("b CancelJob %q: %v", id, err)
		}
		_, err = b.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: id, TimeoutMs: 10})
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) {
			t.Errorf("b WaitJob %q: %v", id, err)
		}
		_, err = b.TriggerSavepoint(ctx, &dispatcher.SavepointRequest{JobId: id, Stop: true})
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) {
			t.Errorf("b TriggerSavepoint %q: %v", id, err)
		}
		_, err = b.ListCheckpoints(ctx, id)
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) {
			t.Errorf("b ListCheckpoints %q: %v", id, err)
		}
	}
	for _, sp := range craftedSavepoints {
		err := rpcserver.FromCall(b.DisposeSavepoint(ctx, sp))
		if !errors.Is(err, rpcerr.ErrNotFound) && !errors.Is(err, rpcerr.ErrInvalidArgument) {
			t.Errorf("b DisposeSavepoint %q: %v, want NOT_FOUND or INVALID_ARGUMENT", sp, err)
		}
	}
	for _, d := range craftedDigests {
		_, err := b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: d, Args_: []string{"x"}})
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) && !errors.Is(err, rpcerr.ErrInvalidArgument) {
			t.Errorf("b SubmitJob with module %q: %v, want NOT_FOUND or INVALID_ARGUMENT", d, err)
		}
	}
	// b's own module, but a's data as input: refused.
	upB, err := b.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	if _, err := store.Stat(ctx, "tenants/b/modules/"+upB.Digest+".wasm"); err != nil {
		t.Fatalf("b's upload is not under b's prefix: %v", err)
	}
	for _, sp := range craftedSavepoints {
		_, err := b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upB.Digest, Args_: []string{"tenants/b/modules/"}, FromSavepoint: &sp})
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotFound) && !errors.Is(err, rpcerr.ErrInvalidArgument) {
			t.Errorf("b SubmitJob from a's savepoint %q: %v, want NOT_FOUND or INVALID_ARGUMENT", sp, err)
		}
	}
	for _, in := range []string{"tenants/a/modules/", "../a/modules/", "tenants/b/../a/modules/"} {
		_, err = b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upB.Digest, Args_: []string{in}})
		if err = rpcserver.FromCall(err); err == nil || errors.Is(err, rpcerr.ErrUnauthenticated) {
			t.Errorf("b reading a's data %q: %v, want refused", in, err)
		}
	}
	l, err := b.ListJobs(ctx)
	if err != nil || len(l.Jobs) != 0 {
		t.Fatalf("b's list shows %+v %v", l, err)
	}
	o, err := b.Overview(ctx)
	if err != nil || len(o.JobsByState) != 0 || o.GetTenant() != "b" {
		t.Fatalf("b's overview counts a's jobs: %+v %v", o, err)
	}
	unchanged("tenant b")

	// b's own job runs alongside and each list shows only its own.
	subB, err := b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upB.Digest, Args_: []string{"tenants/b/modules/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	lb, _ := b.ListJobs(ctx)
	la, _ := a.ListJobs(ctx)
	idsOf := func(l *dispatcher.ListJobsResponse) (ids []string) {
		for _, j := range l.Jobs {
			ids = append(ids, j.JobId)
		}
		return ids
	}
	if !slices.Equal(idsOf(lb), []string{subB.JobId}) || !slices.Equal(idsOf(la), []string{job}) {
		t.Fatalf("lists: a %v, b %v", idsOf(la), idsOf(lb))
	}

	// The right token acts.
	if _, err := a.ListCheckpoints(ctx, job); err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	if err := a.DisposeSavepoint(ctx, "sp-a1"); err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	if _, err := store.Stat(ctx, spKey); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a disposed its savepoint, yet: %v", err)
	}
	if err := a.CancelJob(ctx, job); err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	res, err := a.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: job, TimeoutMs: 10_000})
	if err != nil || res.Details.Summary.State != "CANCELED" {
		t.Fatalf("a cancels its job: %+v %v", res, err)
	}
	if err := b.CancelJob(ctx, subB.JobId); err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	if _, err := b.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: subB.JobId, TimeoutMs: 10_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.ForTenant("../a"); err == nil {
		t.Fatal("a crafted tenant name makes keys")
	}
}

// TestTenantQuotasOverKitex: a tenant over its running-jobs, slots or
// module-size quota gets RESOURCE_EXHAUSTED naming the quota, other tenants
// are unaffected, and the sandbox quotas travel with every deployment.
func TestTenantQuotasOverKitex(t *testing.T) {
	quotas := auth.Quotas{RunningJobs: 1, Slots: 2, ModuleBytes: 64, MemoryBytes: 32 << 20, CallTimeoutMs: 1500, StateBytes: 1 << 20}
	s := startJM(t, func(c *jm.Config) {
		c.Planner = graphPlanner{reduceP: 1}
		c.Tenants = testTenants(t, quotas)
		c.CancelTimeout = 5 * time.Second
	})
	ctx := context.Background()
	te := startTE(t, s.Addr(), "tm-1", 8, true)
	a, b := tokenClient(s.Addr(), tokenA), tokenClient(s.Addr(), tokenB)
	exhausted := func(what string, err error, msg string) {
		t.Helper()
		if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrResourceExhausted) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED with %q", what, err, msg)
		}
	}
	big := append(append([]byte{}, fakeWasm...), make([]byte, 100)...)
	_, err := a.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: big})
	exhausted("a uploads 112 bytes", err, `tenant "a": module size quota 64 bytes exceeded (module is 112 bytes)`)
	if _, err := b.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: big}); err != nil {
		t.Fatalf("b has no module quota: %v", rpcserver.FromCall(err))
	}
	up, err := a.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	_, err = a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}, Parallelism: 3})
	exhausted("a needs 3 slots", err, `tenant "a": slots quota 2: 0 in use, the job needs 3`)
	sub, err := a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	_, err = a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}})
	exhausted("a's second job", err, `tenant "a": running jobs quota 1 reached`)
	upB, _ := b.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	var bJobs []string
	for range 2 {
		sb, err := b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upB.Digest, Args_: []string{"tenants/b/modules/"}, Parallelism: 3})
		if err != nil {
			t.Fatalf("b is not bound by a's quotas: %v", rpcserver.FromCall(err))
		}
		bJobs = append(bJobs, sb.JobId)
	}
	waitRunning(t, ctx, a, sub.JobId)
	te.mu.Lock()
	for _, d := range te.deployed {
		if d.Tenant == "a" {
			if d.GetMemoryLimitBytes() != 32<<20 || d.GetCallTimeoutMs() != 1500 || d.GetMaxStateBytes() != 1<<20 {
				t.Errorf("a's deployment %s carries limits %v %v %v", d.ExecutionId, d.MemoryLimitBytes, d.CallTimeoutMs, d.MaxStateBytes)
			}
		} else if d.IsSetMemoryLimitBytes() || d.IsSetCallTimeoutMs() || d.IsSetMaxStateBytes() {
			t.Errorf("b's deployment %s carries limits", d.ExecutionId)
		}
	}
	te.mu.Unlock()
	// Once a's job ends, a may run another.
	if err := a.CancelJob(ctx, sub.JobId); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000}); err != nil {
		t.Fatal(err)
	}
	sub2, err := a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/a/modules/"}})
	if err != nil {
		t.Fatalf("after the first job ended: %v", rpcserver.FromCall(err))
	}
	for _, id := range []string{sub2.JobId} {
		waitRunning(t, ctx, a, id)
		a.CancelJob(ctx, id)
		a.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: id, TimeoutMs: 10_000})
	}
	for _, id := range bJobs {
		waitRunning(t, ctx, b, id)
		b.CancelJob(ctx, id)
		b.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: id, TimeoutMs: 10_000})
	}
}
