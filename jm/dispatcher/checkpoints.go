package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Retained checkpoints live in the blob store, not in the Dispatcher: a
// job that ended (and expired), or that ran on a JobManager that is gone,
// is listed from its checkpoint directories, and a job resumes from one
// of them by its reference "<job>/<n>" or its directory.

// ListCheckpoints returns a job's checkpoints and savepoints, newest
// first: those the JobMaster knows (in progress, and the last 100 that
// ended) and those whose metadata is in the blob store, each marked
// Retained when it is there to resume from. A job this Dispatcher does not
// know is listed from the store alone.
//
// # Errors
//
// ErrJobNotFound when the Dispatcher knows no such job and the store holds
// no checkpoint of it; the store's errors as ErrUnavailable.
func (d *Dispatcher) ListCheckpoints(ctx context.Context, tenant, job string) ([]checkpoint.Stats, error) {
	var known []checkpoint.Stats
	jm, err := d.job(tenant, job)
	if err == nil {
		known = jm.Checkpoints()
	}
	stored, serr := d.storedCheckpoints(ctx, tenant, job)
	switch {
	case serr != nil && jm == nil:
		return nil, serr
	case serr != nil:
		// The JobMaster's view is still worth showing; Retained is then
		// unknown and left false.
		d.log.Warn("list retained checkpoints failed", "job", job, "tenant", tenant, "err", serr)
		return known, nil
	case jm == nil && len(stored) == 0:
		return nil, rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found: this JobManager does not know it and the blob store holds no retained checkpoint of it", job)
	}
	out := known
	for id, dir := range stored {
		// A savepoint is a completed checkpoint too, with the same id.
		if i := slices.IndexFunc(out, func(s checkpoint.Stats) bool { return s.ID == id }); i >= 0 {
			out[i].Retained = true
			continue
		}
		st, err := d.storedStats(ctx, dir)
		if err != nil {
			if jm == nil {
				return nil, err
			}
			continue
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b checkpoint.Stats) int { return cmp.Compare(b.ID, a.ID) })
	return out, nil
}

// storedCheckpoints returns the directory of each checkpoint of tenant's
// job whose metadata is in the store, by checkpoint id.
func (d *Dispatcher) storedCheckpoints(ctx context.Context, tenant, job string) (map[int64]string, error) {
	keys, err := blob.ForTenant(tenant)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "tenant %q: %v", tenant, err)
	}
	prefix, err := keys.Checkpoints(job)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found: %v", job, err)
	}
	out := map[int64]string{}
	for o, err := range blob.All(ctx, d.cfg.Blob, prefix) {
		if err != nil {
			return nil, classifyBlob("list checkpoints", err)
		}
		seg, rest, ok := strings.Cut(strings.TrimPrefix(o.Key, prefix), "/")
		if !ok || rest != checkpoint.MetadataObject {
			continue
		}
		if n, err := blob.ParseCheckpoint(seg); err == nil {
			out[int64(n)] = prefix + seg + "/"
		}
	}
	return out, nil
}

// storedStats describes a retained checkpoint from its metadata.
func (d *Dispatcher) storedStats(ctx context.Context, dir string) (checkpoint.Stats, error) {
	m, err := checkpoint.ReadMetadata(ctx, d.cfg.Blob, dir)
	if err != nil {
		if errors.Is(err, checkpoint.ErrBadMetadata) {
			return checkpoint.Stats{}, rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "checkpoint %s cannot be read: %w", dir, err)
		}
		return checkpoint.Stats{}, classifyBlob("read checkpoint", err)
	}
	return checkpoint.Stats{
		ID: m.ID, Status: checkpoint.StatusCompleted, Triggered: time.UnixMilli(m.TriggeredMs),
		Duration: time.Duration(m.CompletedMs-m.TriggeredMs) * time.Millisecond, Size: m.Size(),
		Location: dir, Retained: true,
	}, nil
}

// checkpointDir reads a reference to a retained checkpoint of tenant:
// "<job>/<n>" as sluice checkpoints prints it, or the checkpoint's blob
// directory ("tenants/<t>/jobs/<job>/checkpoints/<20 digits>/").
func checkpointDir(tenant, ref string) (job string, n uint64, dir string, err error) {
	bad := func() (string, uint64, string, error) {
		return "", 0, "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "checkpoint %q: want JOB/N as `sluice checkpoints JOB` prints it, or the checkpoint's directory tenants/%s/jobs/JOB/checkpoints/N/", ref, tenant)
	}
	keys, kerr := blob.ForTenant(tenant)
	if kerr != nil {
		return "", 0, "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "tenant %q: %v", tenant, kerr)
	}
	if rest, ok := strings.CutPrefix(ref, "tenants/"); ok {
		// A directory: it must be the caller's own tenant's.
		t, rest, _ := strings.Cut(rest, "/")
		j, rest, _ := strings.Cut(strings.TrimPrefix(rest, "jobs/"), "/")
		seg, rest, _ := strings.Cut(strings.TrimPrefix(rest, "checkpoints/"), "/")
		c, perr := blob.ParseCheckpoint(seg)
		if perr != nil || rest != "" || !strings.HasPrefix(ref, "tenants/"+t+"/jobs/"+j+"/checkpoints/") {
			return bad()
		}
		if t != tenant {
			return "", 0, "", rpcerr.Errorf(rpcerr.ErrNotFound, "checkpoint %q not found", ref)
		}
		job, n = j, c
	} else {
		j, num, ok := strings.Cut(ref, "/")
		c, perr := strconv.ParseUint(num, 10, 64)
		if !ok || perr != nil || c < 1 {
			return bad()
		}
		job, n = j, c
	}
	if dir, err = keys.Checkpoint(job, n); err != nil {
		return bad()
	}
	return job, n, dir, nil
}

// restoreFromCheckpoint checks that the job graph g can resume from
// tenant's retained checkpoint ref and returns its metadata.
func (d *Dispatcher) restoreFromCheckpoint(ctx context.Context, tenant, ref string, g *jobgraph.Graph) (*checkpoint.Metadata, error) {
	job, n, dir, err := checkpointDir(tenant, ref)
	if err != nil {
		return nil, err
	}
	m, err := checkpoint.ReadMetadata(ctx, d.cfg.Blob, dir)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, rpcerr.Errorf(rpcerr.ErrNotFound, "checkpoint %d of job %s not found: it was not completed, or was deleted (subsumed, or its job finished or was canceled without %s); `sluice checkpoints %s` lists the retained ones", n, job, "RETAIN_ON_CANCELLATION", job)
	case errors.Is(err, checkpoint.ErrBadMetadata):
		return nil, rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "checkpoint %s cannot be read: %w", dir, err)
	case err != nil:
		return nil, classifyBlob("read checkpoint", err)
	}
	if m.JobID != job || m.Tenant != tenant || m.ID != int64(n) {
		return nil, rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "checkpoint %s holds metadata of checkpoint %d of job %s (tenant %q): it was not written by Sluice for this directory", dir, m.ID, m.JobID, m.Tenant)
	}
	if mp := jobgraph.MaxParallelismOf(g); mp != m.MaxParallelism {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "checkpoint %s was taken with max parallelism %d but the job declares %d: key groups cannot be split; keep the max parallelism", ref, m.MaxParallelism, mp)
	}
	return m, nil
}
