package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// DefaultSavepointTimeout bounds TriggerSavepoint when the caller sets no
// timeout.
const DefaultSavepointTimeout = 5 * time.Minute

// savepointDir returns the blob directory of tenant's savepoint id.
func savepointDir(tenant, id string) (string, error) {
	keys, err := blob.ForTenant(tenant)
	if err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "tenant %q: %w", tenant, err)
	}
	dir, err := keys.Savepoint(id)
	if err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "savepoint id %q: want the id `sluice savepoint` printed (letters, digits, '-', '_')", id)
	}
	return dir, nil
}

// readSavepoint reads the metadata of tenant's savepoint id; a foreign or
// unknown savepoint is not found.
func (d *Dispatcher) readSavepoint(ctx context.Context, tenant, id string) (string, *checkpoint.Metadata, error) {
	dir, err := savepointDir(tenant, id)
	if err != nil {
		return "", nil, err
	}
	m, err := checkpoint.ReadMetadata(ctx, d.cfg.Blob, dir)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return "", nil, rpcerr.Errorf(rpcerr.ErrNotFound, "savepoint %q not found", id)
	case errors.Is(err, checkpoint.ErrBadMetadata):
		return "", nil, rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "savepoint %q cannot be read: %w", id, err)
	case err != nil:
		return "", nil, classifyBlob("read savepoint", err)
	}
	return dir, m, nil
}

// restoreFrom checks that the job graph g can resume from tenant's
// savepoint id and returns its metadata.
func (d *Dispatcher) restoreFrom(ctx context.Context, tenant, id string, g *jobgraph.Graph) (*checkpoint.Metadata, error) {
	_, m, err := d.readSavepoint(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if mp := jobgraph.MaxParallelismOf(g); mp != m.MaxParallelism {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "savepoint %q was taken with max parallelism %d but the job declares %d: key groups cannot be split; keep the max parallelism", id, m.MaxParallelism, mp)
	}
	return m, nil
}

// TriggerSavepoint takes a savepoint of a running job and returns it once
// it completed; with stop, the job then stops and ends FINISHED.
//
// # Errors
//
// ErrJobNotFound; ErrFailedPrecondition when the job is not running with
// every task running; the abort reason when the savepoint failed.
func (d *Dispatcher) TriggerSavepoint(ctx context.Context, tenant, job string, stop bool, timeout time.Duration) (checkpoint.Stats, error) {
	return d.savepoint(ctx, tenant, job, stop, false, timeout)
}

// StopWithDrain stops a running job with a savepoint after its sources
// sent the maximum watermark, so every event-time timer fired first
// (Flink's stop --drain); it returns the savepoint.
//
// # Errors
//
// As TriggerSavepoint.
func (d *Dispatcher) StopWithDrain(ctx context.Context, tenant, job string, timeout time.Duration) (checkpoint.Stats, error) {
	return d.savepoint(ctx, tenant, job, true, true, timeout)
}

func (d *Dispatcher) savepoint(ctx context.Context, tenant, job string, stop, drain bool, timeout time.Duration) (checkpoint.Stats, error) {
	jm, err := d.job(tenant, job)
	if err != nil {
		return checkpoint.Stats{}, err
	}
	if timeout <= 0 {
		timeout = DefaultSavepointTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, min(timeout, MaxWait))
	defer cancel()
	d.log.Info("savepoint requested", "job", job, "tenant", tenant, "stop", stop, "drain", drain)
	if drain {
		return jm.StopWithDrain(ctx)
	}
	return jm.TriggerSavepoint(ctx, stop)
}

// DisposeSavepoint deletes tenant's savepoint id.
//
// # Errors
//
// ErrNotFound for an unknown or foreign savepoint; the blob store's
// errors as ErrUnavailable.
func (d *Dispatcher) DisposeSavepoint(ctx context.Context, tenant, id string) error {
	dir, _, err := d.readSavepoint(ctx, tenant, id)
	if err != nil {
		return err
	}
	if err := checkpoint.DeletePrefix(ctx, d.cfg.Blob, dir); err != nil {
		return classifyBlob("dispose savepoint", err)
	}
	d.log.Info("savepoint disposed", "tenant", tenant, "savepoint", id)
	return nil
}
