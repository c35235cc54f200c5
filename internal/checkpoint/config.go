package checkpoint

import (
	"time"
)

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
	// Retained: the checkpoint's metadata is in the blob store, so a job
	// can resume from it (a completed checkpoint not yet subsumed, or one
	// its job kept when it ended).
	Retained bool
	// Subtasks is how many subtasks the checkpoint waits for, Acknowledged
	// how many of them have acknowledged it; both zero when unknown (a
	// checkpoint listed from the blob store alone).
	Subtasks, Acknowledged int
	// Alignment is the longest barrier alignment of the tasks that
	// acknowledged.
	Alignment time.Duration
}
