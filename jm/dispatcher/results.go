package dispatcher

import (
	"context"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// With HA, a job's collect-sink records outlive the leader that ran it
// (internal/checkpoint's results layout): when the job ends, the records
// it released are written before its outcome (ha.Ended) names them, and a
// later leader serves them from there until the job's result expires.

// releasedThrough reads the records job released through checkpoint n
// under an earlier leader. Unreadable, they are left out (the job's
// records then start after them, counted as dropped), which beats not
// recovering the job.
func (d *Dispatcher) releasedThrough(ctx context.Context, tenant, job string, n int64) [][]byte {
	_, _, dir, err := checkpoint.ResultKeys(tenant, job)
	var recs [][]byte
	if err == nil {
		recs, err = checkpoint.ReleasedThrough(ctx, d.cfg.Blob, dir, n)
	}
	if err != nil {
		d.log.Warn("read the records the job released before the failover failed; they will be counted as dropped", "job", job, "tenant", tenant, "checkpoint", n, "err", err)
		return nil
	}
	return recs
}

// storeRecords writes the records r released and notes them in e. A job
// that released none writes nothing.
func (d *Dispatcher) storeRecords(ctx context.Context, tenant, job string, r jobmaster.Result, e *ha.Ended) error {
	if r.RecordsTotal == 0 {
		return nil
	}
	_, key, _, err := checkpoint.ResultKeys(tenant, job)
	if err != nil {
		return err
	}
	if err := checkpoint.PutRecords(ctx, d.cfg.Blob, key, r.Records); err != nil {
		return err
	}
	e.Records, e.RecordsOffset, e.RecordsTotal = key, r.RecordsOffset, r.RecordsTotal
	return nil
}

// endedResult is the result of a job that ended under an earlier leader,
// with its records when withRecords (read from the blob store; the last
// job's are kept for a reader paging through them).
//
// # Errors
//
// ErrUnavailable when the records cannot be read.
func (d *Dispatcher) endedResult(ctx context.Context, j ha.Job, withRecords bool) (jobmaster.Result, error) {
	det := endedDetails(j)
	r := jobmaster.Result{Details: det, Duration: det.End.Sub(det.Start), RecordsOffset: j.Ended.RecordsTotal, RecordsTotal: j.Ended.RecordsTotal}
	if !withRecords || j.Ended.Records == "" {
		return r, nil
	}
	recs, err := d.loadRecords(ctx, j)
	if err != nil {
		return jobmaster.Result{}, err
	}
	r.Records, r.RecordsOffset = recs, j.Ended.RecordsOffset
	return r, nil
}

func (d *Dispatcher) loadRecords(ctx context.Context, j ha.Job) ([][]byte, error) {
	d.mu.Lock()
	c := d.endedRecords
	d.mu.Unlock()
	if c.job == j.ID && c.recs != nil {
		return c.recs, nil
	}
	recs, err := checkpoint.GetRecords(ctx, d.cfg.Blob, j.Ended.Records)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "read the records of job %s: %w", j.ID, err)
	}
	d.mu.Lock()
	d.endedRecords = cachedRecords{job: j.ID, recs: recs}
	d.mu.Unlock()
	return recs, nil
}

// cachedRecords are the records of one job that ended under an earlier
// leader, as last read.
type cachedRecords struct {
	job  string
	recs [][]byte
}

// deleteResults deletes an expired job's records, best effort.
func (d *Dispatcher) deleteResults(ctx context.Context, tenant, job string) {
	dir, _, _, err := checkpoint.ResultKeys(tenant, job)
	if err == nil {
		err = checkpoint.DeletePrefix(ctx, d.cfg.Blob, dir)
	}
	if err != nil {
		d.log.Warn("delete an expired job's records failed", "job", job, "tenant", tenant, "err", err)
	}
}
