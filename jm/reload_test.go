package jm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
)

const (
	tokenB2 = "slc_tenant-b-rotated-token-for-tests"
	tokenC  = "slc_tenant-c-token-for-tests"
)

func parseTenants(t *testing.T, f string) *auth.Tenants {
	t.Helper()
	ts, err := auth.ParseTenants([]byte(f))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func wantCode(t *testing.T, what string, err error, kind error, msg string) {
	t.Helper()
	if err = rpcserver.FromCall(err); !errors.Is(err, kind) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: %v, want %v with %q", what, err, kind, msg)
	}
}

// TestReloadTenantsOverKitex replaces the tenants of a running JobManager:
// a revoked token gets UNAUTHENTICATED on its next call, a rotated one
// works, a new tenant can submit under its policy, a removed tenant's
// running job is canceled with the reason in its history, and a reload
// that is refused changes nothing.
func TestReloadTenantsOverKitex(t *testing.T) {
	ts := testTenants(t, auth.Quotas{})
	s := startJM(t, func(c *jm.Config) {
		c.Planner = graphPlanner{reduceP: 1}
		c.Tenants = ts
		c.CancelTimeout = 5 * time.Second
	})
	ctx := context.Background()
	startTE(t, s.Addr(), "tm-1", 8, true) // tasks run until canceled
	a, b := tokenClient(s.Addr(), tokenA), tokenClient(s.Addr(), tokenB)
	upA, err := a.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	_, err = a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upA.Digest, Args_: []string{"tenants/a/modules/"}, Config: map[string]string{"sandbox.clock": "wall"}})
	wantCode(t, "a asks for the wall clock", err, rpcerr.ErrPermissionDenied, `tenant "a": config sandbox.clock="wall": not allowed by the tenant's policy (it is privileged)`)
	jobA, err := a.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upA.Digest, Args_: []string{"tenants/a/modules/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	upB, err := b.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	jobB, err := b.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upB.Digest, Args_: []string{"tenants/b/modules/"}})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	waitRunning(t, ctx, a, jobA.JobId)
	waitRunning(t, ctx, b, jobB.JobId)

	// A refused reload changes nothing.
	if _, err := s.ReloadTenants(ctx, nil); err == nil {
		t.Fatal("reload with no tenants accepted")
	}
	if _, err := a.ListJobs(ctx); err != nil {
		t.Fatalf("a after a refused reload: %v", rpcserver.FromCall(err))
	}

	// a removed; b's token rotated; c added, allowed the wall clock with
	// checkpoints at most every 10s.
	ch, err := s.ReloadTenants(ctx, parseTenants(t, `{"tenants":[
		{"name":"b","token_sha256":["`+auth.HashToken(tokenB2)+`"]},
		{"name":"c","token_sha256":["`+auth.HashToken(tokenC)+`"],"policy":{"config_keys":["sandbox.clock","execution.checkpointing.*"],"min_checkpoint_interval_ms":10000,"connectors":["text","collect"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ch.Added, ",") != "c" || strings.Join(ch.Removed, ",") != "a" || strings.Join(ch.Changed, ",") != "b" {
		t.Errorf("changes %+v", ch)
	}
	_, err = b.ListJobs(ctx)
	wantCode(t, "b's revoked token", err, rpcerr.ErrUnauthenticated, "invalid token")
	_, err = a.GetJob(ctx, jobA.JobId)
	wantCode(t, "removed a's token", err, rpcerr.ErrUnauthenticated, "invalid token")
	b2 := tokenClient(s.Addr(), tokenB2)
	if err := allRunning(ctx, b2, jobB.JobId); err != nil {
		t.Fatalf("b's job under the rotated token: %v", err)
	}

	// a's job ends CANCELED, the reason in its history.
	testutil.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		d, err := s.Dispatcher().GetJob(ctx, "a", jobA.JobId)
		if err != nil {
			return err
		}
		if d.State != "CANCELED" {
			return errors.New("a's job is " + string(d.State))
		}
		for _, f := range d.History {
			if f.Cause == jm.RemovedTenantReason("a") {
				return nil
			}
		}
		t.Fatalf("a's canceled job has no removal reason in its history %+v", d.History)
		return nil
	})
	if !strings.Contains(jm.RemovedTenantReason("a"), "tenant a was removed from the tenants file") {
		t.Errorf("reason %q", jm.RemovedTenantReason("a"))
	}

	// c submits under its policy.
	c := tokenClient(s.Addr(), tokenC)
	upC, err := c.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatalf("new tenant c: %v", rpcserver.FromCall(err))
	}
	_, err = c.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upC.Digest, Args_: []string{"tenants/c/modules/"}, Config: map[string]string{"execution.checkpointing.interval": "1s"}})
	wantCode(t, "c checkpoints every second", err, rpcerr.ErrPermissionDenied, "below the tenant's floor of 10s (policy.min_checkpoint_interval_ms)")
	_, err = c.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upC.Digest, Args_: []string{"tenants/c/modules/"}, Config: map[string]string{"restart-strategy": "none"}})
	wantCode(t, "c sets a key outside its list", err, rpcerr.ErrPermissionDenied, `config restart-strategy="none": not allowed by the tenant's policy (policy.config_keys allows only "sandbox.clock", "execution.checkpointing.*")`)
	jobC, err := c.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upC.Digest, Args_: []string{"tenants/c/modules/"}, Config: map[string]string{"sandbox.clock": "wall", "execution.checkpointing.interval": "10s"}})
	if err != nil {
		t.Fatalf("c within its policy: %v", rpcserver.FromCall(err))
	}
	waitRunning(t, ctx, c, jobC.JobId)

	// The policy is judged again at a rescale, before the job stops: c
	// loses the wall clock and collect, and its job keeps running.
	if _, err := s.ReloadTenants(ctx, parseTenants(t, `{"tenants":[
		{"name":"b","token_sha256":["`+auth.HashToken(tokenB2)+`"]},
		{"name":"c","token_sha256":["`+auth.HashToken(tokenC)+`"],"policy":{"connectors":["text"]}}]}`)); err != nil {
		t.Fatal(err)
	}
	err = s.Dispatcher().CheckRescale(ctx, "c", jobC.JobId, 1)
	if !errors.Is(err, rpcerr.ErrPermissionDenied) || !strings.Contains(err.Error(), `config sandbox.clock="wall"`) {
		t.Fatalf("rescale of c's job under the narrower policy: %v", err)
	}
	_, err = c.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: upC.Digest, Args_: []string{"tenants/c/modules/"}})
	wantCode(t, "c's graph uses collect", err, rpcerr.ErrPermissionDenied, `vertex 5 "out" uses connector "collect": not allowed by the tenant's policy (policy.connectors allows only "text")`)
	if err := allRunning(ctx, c, jobC.JobId); err != nil {
		t.Fatalf("c's job after the refused rescale: %v", err)
	}
	b2.CancelJob(ctx, jobB.JobId)
	c.CancelJob(ctx, jobC.JobId)
	b2.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: jobB.JobId, TimeoutMs: 10_000})
	c.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: jobC.JobId, TimeoutMs: 10_000})
}

// TestReloadTenantsOfAnOpenCluster: a JobManager started without tenants
// has no policy (the wall clock is allowed) and stays open; a reload says
// how to close it.
func TestReloadTenantsOfAnOpenCluster(t *testing.T) {
	s := startJM(t, func(c *jm.Config) { c.Planner = graphPlanner{reduceP: 1}; c.CancelTimeout = 5 * time.Second })
	ctx := context.Background()
	_, err := s.ReloadTenants(ctx, testTenants(t, auth.Quotas{}))
	if err == nil || !strings.Contains(err.Error(), "restart it with --tenants") {
		t.Fatalf("reload of an open cluster: %v", err)
	}
	dc := tokenClient(s.Addr(), "")
	up, err := dc.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: fakeWasm})
	if err != nil {
		t.Fatal(rpcserver.FromCall(err))
	}
	sub, err := dc.SubmitJob(ctx, &dispatcher.SubmitJobRequest{ModuleDigest: up.Digest, Args_: []string{"tenants/default/modules/"}, Config: map[string]string{"sandbox.clock": "wall"}})
	if err != nil {
		t.Fatalf("the wall clock on an open cluster: %v", rpcserver.FromCall(err))
	}
	dc.CancelJob(ctx, sub.JobId)
	dc.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: sub.JobId, TimeoutMs: 10_000})
}
