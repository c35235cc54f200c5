package dispatcher

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// JobSpec is what a job was started as: the JobMaster's Spec and the
// submission it came from.
type JobSpec struct {
	jobmaster.Spec
	Submission Submission
}

// JobSpec returns what a job was started as.
//
// # Errors
//
// ErrJobNotFound.
func (d *Dispatcher) JobSpec(ctx context.Context, tenant, id string) (JobSpec, error) {
	jm, err := d.job(tenant, id)
	if err != nil {
		return JobSpec{}, err
	}
	d.mu.Lock()
	sub := d.subs[id]
	d.mu.Unlock()
	return JobSpec{Spec: jm.Spec(), Submission: sub}, nil
}

// CheckRescale makes the checks of Rescale that need no savepoint: the
// job exists, parallelism fits it, and the tenant's policy still allows
// its config and connectors. Nothing changes.
//
// # Errors
//
// As Rescale's first three.
func (d *Dispatcher) CheckRescale(ctx context.Context, tenant, id string, parallelism int) error {
	jm, err := d.job(tenant, id)
	if err != nil {
		return err
	}
	spec := jm.Spec()
	mp := jobgraph.MaxParallelismOf(spec.Graph)
	if parallelism < 1 || parallelism > mp {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "parallelism %d: must be in [1, %d] (the job's max parallelism: its key groups)", parallelism, mp)
	}
	if err := jobgraph.Validate(spec.Graph, parallelism, d.cfg.MaxParallelismLimit); err != nil {
		return err
	}
	if d.cfg.MaxJobSlots > 0 && parallelism > d.cfg.MaxJobSlots {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "parallelism %d: above the cluster's limit of %d slots per job", parallelism, d.cfg.MaxJobSlots)
	}
	// The policy may have changed since the job started: a job it now
	// refuses must not be stopped for a new one that cannot start.
	d.mu.Lock()
	sub := d.subs[id]
	d.mu.Unlock()
	return d.checkPolicy(tenant, sub.Config, spec.Config, spec.Graph)
}

// Rescaled is the outcome of Rescale: the savepoint the old job stopped
// with and the job that resumed from it.
type Rescaled struct {
	SavepointID string
	JobID       string
}

// Rescale runs a job at another default parallelism: it stops the job
// with a savepoint, waits for it to end FINISHED, and submits the same
// module, arguments and config again from that savepoint at parallelism
// (vertices that set their own parallelism keep it). The new job has a
// new id. Everything that can be checked before the stop is: an
// impossible parallelism changes nothing.
//
// # Errors
//
//   - ErrJobNotFound.
//   - ErrInvalidArgument: parallelism out of [1, the job's max
//     parallelism], or a graph that is invalid at it.
//   - ErrPermissionDenied: the tenant's policy no longer allows the job's
//     config or connectors (the job keeps running).
//   - As TriggerSavepoint (the job keeps running then).
//   - ErrFailedPrecondition when the job ended otherwise than FINISHED
//     after its savepoint; the savepoint stays, to resume from by hand.
//   - As SubmitJob for the new job (the old one has stopped; resume from
//     the savepoint by hand).
func (d *Dispatcher) Rescale(ctx context.Context, tenant, id string, parallelism int, timeout time.Duration) (Rescaled, error) {
	if err := d.CheckRescale(ctx, tenant, id, parallelism); err != nil {
		return Rescaled{}, err
	}
	jm, err := d.job(tenant, id)
	if err != nil {
		return Rescaled{}, err
	}
	d.mu.Lock()
	sub, ok := d.subs[id]
	d.mu.Unlock()
	if !ok {
		return Rescaled{}, rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", id)
	}
	sp, err := d.TriggerSavepoint(ctx, tenant, id, true, timeout)
	if err != nil {
		return Rescaled{}, err
	}
	out := Rescaled{SavepointID: sp.SavepointID}
	wctx, cancel := context.WithTimeout(ctx, MaxWait)
	defer cancel()
	if r := jm.Wait(wctx); r.State != jobmaster.Finished {
		return out, rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "job %s is %s after its savepoint %s, not FINISHED: resume it with sluice run --from-savepoint %s", id, r.State, sp.SavepointID, sp.SavepointID)
	}
	sub.Parallelism = parallelism
	sub.FromSavepoint, sub.FromCheckpoint = sp.SavepointID, ""
	d.log.Info("rescaling", "job", id, "tenant", tenant, "parallelism", parallelism, "savepoint", sp.SavepointID)
	if out.JobID, err = d.SubmitJob(ctx, tenant, sub); err != nil {
		return out, err
	}
	return out, nil
}
