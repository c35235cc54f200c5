package checkpoint

import (
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
)

// Config is a job's checkpointing: the Checkpoints part of its parsed
// config. jobconfig owns the keys, their defaults and their parsing; the
// name stays here because it is the coordinator's vocabulary.
type Config = jobconfig.Checkpoints

// Status of a checkpoint in Stats.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
	StatusAborted    = "ABORTED"
)

// Stats is what `sluice checkpoints` shows of one checkpoint.
type Stats struct {
	ID          int64
	Savepoint   bool
	SavepointID string // savepoints only
	Status      string
	Triggered   time.Time
	Duration    time.Duration // until completed or aborted
	Size        int64
	Reason      string // why it aborted
	// Location is the directory of its metadata: where it can be resumed
	// from.
	Location string
}
