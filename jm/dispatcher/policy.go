package dispatcher

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// checkPolicy is the one place a tenant's policy judges a job: its config
// as submitted (raw) and parsed (conf), and its planned graph. SubmitJob
// calls it for every job (fresh, from a savepoint or checkpoint, a
// rescale's new job) and CheckRescale before a rescale stops the old one,
// each with the policy the tenants file holds now.
//
// # Errors
//
// ErrPermissionDenied naming the tenant, the refused key or connector and
// the policy field.
func (d *Dispatcher) checkPolicy(tenant string, raw map[string]string, conf jobconfig.Config, g *jobgraph.Graph) error {
	if d.cfg.Policy == nil {
		return nil // an open cluster: its one tenant is its operator
	}
	p := d.cfg.Policy(tenant)
	err := p.CheckConfig(raw, conf)
	if err == nil {
		err = p.CheckGraph(g)
	}
	if err != nil {
		return rpcerr.Errorf(rpcerr.ErrPermissionDenied, "tenant %q: %w", tenant, err)
	}
	return nil
}

// CancelTenantJobs cancels every live job of tenant, each with reason in
// its history (jobmaster.CancelBecause), and returns their ids, sorted.
// It returns once every cancel is taken; the jobs end CANCELED on their
// own time.
//
// # Errors
//
// The context's error, with the jobs whose cancel was taken before it
// ended.
func (d *Dispatcher) CancelTenantJobs(ctx context.Context, tenant, reason string) ([]string, error) {
	d.mu.Lock()
	var ids []string
	for id, j := range d.jobs {
		if j.Tenant() == tenant && !j.Details().State.Terminal() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	jobs := make([]*jobmaster.JobMaster, len(ids))
	for i, id := range ids {
		jobs[i] = d.jobs[id]
	}
	d.mu.Unlock()
	for i, j := range jobs {
		d.log.Info("canceling job", "job", ids[i], "tenant", tenant, "reason", reason)
		if err := j.CancelBecause(ctx, reason); err != nil {
			return ids[:i], fmt.Errorf("cancel job %s: %w", ids[i], err)
		}
	}
	return ids, nil
}
