package dispatcher

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// With Config.Store (HA), the store holds every job this cluster's leaders
// ran: a new leader recovers the live ones from their latest completed
// checkpoint (Recover) and keeps the ended ones' outcome queryable.

// Recover reads the job store and starts every job that had not ended,
// with its id, from its latest completed checkpoint (or where it first
// started, before its first checkpoint). A job that cannot start again is
// recorded FAILED with the reason. Ended jobs are kept as their outcome.
//
// # Errors
//
// Without a store, or when the store cannot be read.
func (d *Dispatcher) Recover(ctx context.Context) error {
	if d.cfg.Store == nil {
		return errors.New("recover jobs: no job store")
	}
	jobs, err := d.cfg.Store.Jobs(ctx)
	if err != nil {
		return jobStoreErr("recover jobs", err)
	}
	d.mu.Lock()
	d.recovering = map[string]string{}
	for _, j := range jobs {
		if j.Ended == nil {
			d.recovering[j.ID] = j.Tenant
		}
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.recovering = nil
		d.mu.Unlock()
	}()
	for _, j := range jobs {
		if j.Ended != nil {
			d.mu.Lock()
			d.ended[j.ID] = j
			d.mu.Unlock()
			continue
		}
		s := Submission{ModuleDigest: j.ModuleDigest, Args: j.Args, Parallelism: j.Parallelism, Config: j.Config,
			Name: j.Name, FromSavepoint: j.FromSavepoint, FromCheckpoint: j.FromCheckpoint}
		d.log.Info("recovering job", "job", j.ID, "tenant", j.Tenant, "checkpoint", j.Checkpoint)
		// One past the restore point's attempt: every part a checkpoint
		// committed was written by that attempt or an earlier one.
		first := j.Attempt + 1
		if _, err := d.start(ctx, j.Tenant, s, j.ID, j.Submitted, j.Checkpoint, first); err != nil {
			if errors.Is(err, ha.ErrNotLeader) || ctx.Err() != nil {
				return err
			}
			d.log.Error("recovering job failed", "job", j.ID, "tenant", j.Tenant, "err", err)
			now := d.cfg.Now()
			j.Ended = &ha.Ended{State: string(jobmaster.Failed), Failure: "recovery after a JobManager failover failed: " + err.Error(), Start: j.Submitted, End: now}
			if err := d.cfg.Store.PutJob(ctx, j); err != nil {
				return jobStoreErr("record the failed recovery", err)
			}
			d.mu.Lock()
			d.ended[j.ID] = j
			d.mu.Unlock()
		}
	}
	return nil
}

// recordEnd writes a job's outcome to the store once it ended. A job
// SUSPENDED (this JobManager stopped, or lost its leadership) is left
// live: the next leader recovers it.
func (d *Dispatcher) recordEnd(jm *jobmaster.JobMaster, rec ha.Job) {
	defer d.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	r := jm.Wait(ctx)
	if !r.State.Terminal() || r.State == jobmaster.Suspended || ctx.Err() != nil {
		return
	}
	rec.Ended = &ha.Ended{State: string(r.State), Failure: r.Failure, Accumulators: maps.Clone(r.Accumulators),
		Restarts: r.Restarts, Start: r.Start, End: r.End}
	wctx, wcancel := context.WithTimeout(ctx, d.cfg.RPCTimeout+10*time.Second)
	defer wcancel()
	if err := d.storeRecords(wctx, rec.Tenant, rec.ID, r, rec.Ended); err != nil {
		// The outcome is still recorded: after a failover the job reads
		// as ended with no records to serve.
		d.log.Warn("keep the job's collect-sink records for after a failover failed", "job", rec.ID, "records", r.RecordsTotal, "err", err)
	}
	if err := d.cfg.Store.PutJob(wctx, rec); err != nil {
		d.log.Warn("record the job's outcome in the job store failed", "job", rec.ID, "state", r.State, "err", err)
	}
}

// endedDetails describes a job that ended under an earlier leader.
func endedDetails(j ha.Job) jobmaster.Details {
	e := j.Ended
	return jobmaster.Details{JobID: j.ID, Name: j.Name, Tenant: j.Tenant, ModuleDigest: j.ModuleDigest,
		State: jobmaster.JobState(e.State), Start: e.Start, End: e.End, Failure: e.Failure, Restarts: e.Restarts,
		Accumulators: maps.Clone(e.Accumulators), StateTimes: map[jobmaster.JobState]time.Time{jobmaster.JobState(e.State): e.End}}
}

// endedJob returns tenant's job id that ended under an earlier leader.
func (d *Dispatcher) endedJob(tenant, id string) (ha.Job, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.ended[id]
	return j, ok && j.Tenant == tenant
}

// endedOf returns tenant's jobs that ended under an earlier leader.
func (d *Dispatcher) endedOf(tenant string) []jobmaster.Details {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []jobmaster.Details
	for _, id := range slices.Sorted(maps.Keys(d.ended)) {
		if j := d.ended[id]; j.Tenant == tenant {
			out = append(out, endedDetails(j))
		}
	}
	return out
}

// expireEnded forgets, here and in the store, the jobs that ended under an
// earlier leader more than the retention ago.
func (d *Dispatcher) expireEnded(now time.Time) {
	var gone []expired
	d.mu.Lock()
	for id, j := range d.ended {
		if now.Sub(j.Ended.End) > d.cfg.Retention {
			delete(d.ended, id)
			gone = append(gone, expired{tenant: j.Tenant, id: id})
			if d.endedRecords.job == id {
				d.endedRecords = cachedRecords{}
			}
		}
	}
	d.mu.Unlock()
	d.forget(gone)
}

// expired names a job whose result expired.
type expired struct{ tenant, id string }

// forget deletes expired jobs from the store, and their records, best
// effort.
func (d *Dispatcher) forget(jobs []expired) {
	if d.cfg.Store == nil || len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RPCTimeout+10*time.Second)
	defer cancel()
	for _, j := range jobs {
		// The store's record first: it names the records.
		if err := d.cfg.Store.DeleteJob(ctx, j.id); err != nil {
			d.log.Warn("delete an expired job from the job store failed", "job", j.id, "err", err)
			continue
		}
		d.deleteResults(ctx, j.tenant, j.id)
	}
}

// jobStoreErr maps a job store failure: a lost leadership says where to go.
func jobStoreErr(what string, err error) error {
	if errors.Is(err, ha.ErrNotLeader) {
		return rpcerr.Errorf(rpcerr.ErrUnavailable, "%s: this JobManager is not the leader any more: retry, and the client finds the new leader: %w", what, err)
	}
	return rpcerr.Errorf(rpcerr.ErrUnavailable, "%s: job store: %w", what, err)
}
