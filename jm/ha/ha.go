package ha

import (
	"context"
	"errors"
	"time"
)

// ErrNotLeader is returned by a write of a leadership that was lost.
var ErrNotLeader = errors.New("not the leader")

// Elector campaigns for the leadership of one cluster.
type Elector interface {
	// Campaign blocks until this JobManager leads (or ctx ends). The
	// leadership is announced without an address until Proclaim.
	Campaign(ctx context.Context) (Leadership, error)
	// Jobs reads the job store without leading (a standby warms the
	// modules of the jobs it may have to recover).
	Jobs(ctx context.Context) ([]Job, error)
	// Close ends the elector's etcd session (a leadership held is lost).
	Close() error
}

// Leadership is one term as leader. Its JobStore writes succeed only
// while it lasts.
type Leadership interface {
	JobStore
	// Session is the leader session for fencing tokens
	// (control.HASession of the election revision).
	Session() string
	// Proclaim publishes the leader's RPC address, where TaskManagers and
	// clients find it.
	Proclaim(ctx context.Context, address string) error
	// Lost is closed when the leadership ends: the lease expired (the
	// process was paused, or cut off from etcd), or a guarded write found
	// another leader.
	Lost() <-chan struct{}
	// Resign gives the leadership up at once (a clean shutdown), so a
	// standby need not wait for the lease to expire.
	Resign(ctx context.Context) error
}

// Job is what the store keeps of a submitted job: enough for a new leader
// to submit it again, and its outcome once it ended.
type Job struct {
	ID           string            `json:"id"`
	Tenant       string            `json:"tenant"`
	Name         string            `json:"name,omitempty"`
	ModuleDigest string            `json:"module"`
	Args         []string          `json:"args,omitempty"`
	Parallelism  int               `json:"parallelism,omitempty"`
	Config       map[string]string `json:"config,omitempty"` // the job config's key form (internal/jobconfig)
	// FromSavepoint / FromCheckpoint are where the job first started.
	FromSavepoint  string    `json:"from_savepoint,omitempty"`
	FromCheckpoint string    `json:"from_checkpoint,omitempty"`
	Submitted      time.Time `json:"submitted"`
	// Checkpoint is the latest completed checkpoint, "<job>/<n>" (filled
	// by Jobs from its own key; PutJob ignores it).
	Checkpoint string `json:"-"`
	// Attempt is the job's attempt when that checkpoint completed (filled
	// with Checkpoint): a new leader starts after it, so its executions,
	// results and file-sink parts are named apart from everything the
	// checkpoint committed.
	Attempt int64 `json:"-"`
	// Ended is set once the job reached a terminal state.
	Ended *Ended `json:"ended,omitempty"`
}

// Ended is a job's outcome, kept so it stays queryable after a failover.
type Ended struct {
	State        string           `json:"state"`
	Failure      string           `json:"failure,omitempty"`
	Accumulators map[string]int64 `json:"accumulators,omitempty"`
	Restarts     int              `json:"restarts,omitempty"`
	Start        time.Time        `json:"start"`
	End          time.Time        `json:"end"`
	// Records is the blob key of the collect-sink records the job had
	// released when it ended ("" when none): the ones from index
	// RecordsOffset on, of RecordsTotal released in all (those before
	// were dropped past the JobMaster's bound). Written before this
	// record, so it never names a missing object.
	Records       string `json:"records,omitempty"`
	RecordsOffset int64  `json:"records_offset,omitempty"`
	RecordsTotal  int64  `json:"records_total,omitempty"`
}

// JobStore keeps the cluster's jobs.
type JobStore interface {
	// PutJob writes a job's record (a new job, or one that ended).
	PutJob(ctx context.Context, j Job) error
	// PutCheckpoint points a job at its latest completed checkpoint,
	// "<job>/<n>": called after the checkpoint's metadata is written, so
	// it never points at a half checkpoint.
	PutCheckpoint(ctx context.Context, jobID, ref string, attempt int64) error
	// DeleteJob forgets a job (its result expired).
	DeleteJob(ctx context.Context, jobID string) error
	// Jobs returns every job the store holds, with its checkpoint pointer.
	Jobs(ctx context.Context) ([]Job, error)
	// Check returns ErrNotLeader once the leadership is lost: asked
	// before anything that deletes from the blob store.
	Check(ctx context.Context) error
}
