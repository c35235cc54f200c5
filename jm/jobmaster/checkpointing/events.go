package checkpointing

import (
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
)

// Event is an input of the coordinator; see the types below.
type Event interface{ event() }

// Events.
type (
	// Deployed: the attempt's executions were created (View.Attempt);
	// Splits are the attempt's text-source splits by vertex id, what the
	// checkpoints' remaining splits are computed from.
	Deployed struct {
		Tasks  []Task
		Splits map[int][]checkpoint.Split
		// Discovered are, per text source that follows its paths, the
		// object keys found so far (checkpoint.Metadata.Discovered).
		Discovered map[int][]string
	}
	// SplitsDiscovered: a relist of following text source Vertex found
	// the objects Keys, cut into Splits; they join the attempt's splits.
	SplitsDiscovered struct {
		Vertex int
		Splits []checkpoint.Split
		Keys   []string
	}
	// Restarted: a new attempt begins (View.Attempt is already its
	// number); it has no executions until Deployed.
	Restarted struct{}
	// TaskStarted: a task reported DEPLOYING or RUNNING; once every task
	// runs, the periodic schedule starts.
	TaskStarted struct{}
	// TaskFinished: a task reported FINISHED; checkpoints still waiting
	// for its ack are aborted.
	TaskFinished struct{ ExecutionID string }
	// AttemptEnding: the attempt is torn down (failing, canceled,
	// finished, suspended); checkpoints collecting acks abort with Reason,
	// those already writing go on.
	AttemptEnding struct{ Reason string }
	// JobEnded: the job reached its terminal state (View.State); every
	// checkpoint still pending ends.
	JobEnded struct{}

	// Tick: the periodic timer armed by ArmTick fired.
	Tick struct{ Attempt int64 }
	// Expired: the timer armed by ArmExpiry fired.
	Expired struct{ ID int64 }
	// TriggerFailed: the SendTrigger call to a source failed.
	TriggerFailed struct {
		ID          int64
		ExecutionID string
		Err         error
	}
	// Acked: a task of the current attempt (the JobMaster checked its
	// fencing token and execution) acknowledged a checkpoint.
	Acked struct{ Ack checkpoint.Ack }
	// LateAck: an ack of an older attempt of this job, refused by its
	// fencing token; its state object is deleted if no checkpoint uses it.
	LateAck struct{ Ack checkpoint.Ack }
	// Declined: a task of the current attempt could not take a checkpoint.
	Declined struct{ Decline checkpoint.Decline }
	// Written: the WriteMetadata command ended; Err nil: the metadata
	// exists.
	Written struct {
		ID  int64
		Err error
	}
	// Committed: the CommitSinkParts command ended; Err is set only when
	// it gave up because the attempt ended.
	Committed struct {
		ID  int64
		Err error
	}
	// SavepointRequested: a caller wants a savepoint (with Stop: then the
	// job stops). Waiter, nonzero, names the caller in AnswerSavepoint.
	SavepointRequested struct {
		Stop bool
		// Drain (with Stop): the sources send the maximum watermark first.
		Drain  bool
		Waiter int64
	}
	// DeleteFailed: a DeleteDirs command could not delete Dir; it is
	// deleted again after the next completed checkpoint.
	DeleteFailed struct {
		ID  int64
		Dir string
	}
)

func (Deployed) event()           {}
func (SplitsDiscovered) event()   {}
func (Restarted) event()          {}
func (TaskStarted) event()        {}
func (TaskFinished) event()       {}
func (AttemptEnding) event()      {}
func (JobEnded) event()           {}
func (Tick) event()               {}
func (Expired) event()            {}
func (TriggerFailed) event()      {}
func (Acked) event()              {}
func (LateAck) event()            {}
func (Declined) event()           {}
func (Written) event()            {}
func (Committed) event()          {}
func (SavepointRequested) event() {}
func (DeleteFailed) event()       {}

// Command is an output of the coordinator, for the JobMaster to carry
// out in the order given; see the types below.
type Command interface{ command() }

// Commands.
type (
	// ArmTick: send Tick{Attempt} after After.
	ArmTick struct {
		Attempt int64
		After   time.Duration
	}
	// SendTrigger: call TriggerCheckpoint on a source task; a failure
	// comes back as TriggerFailed.
	SendTrigger struct {
		ExecutionID string
		Trigger     checkpoint.Trigger
	}
	// ArmExpiry: send Expired{ID} after After, unless DisarmExpiry{ID}
	// comes first.
	ArmExpiry struct {
		ID    int64
		After time.Duration
	}
	// DisarmExpiry: the checkpoint ended; stop its expiry timer.
	DisarmExpiry struct{ ID int64 }
	// WriteMetadata: for a savepoint, copy every state object (Copies)
	// and write SavepointMeta into SavepointDir; then write Meta into Dir,
	// last. The outcome comes back as Written.
	WriteMetadata struct {
		ID            int64
		Dir           string
		Meta          *checkpoint.Metadata
		Copies        []Copy
		SavepointDir  string
		SavepointMeta *checkpoint.Metadata
	}
	// CommitSinkParts: commit the parts, retrying until it works or the
	// attempt ends; the outcome comes back as Committed.
	CommitSinkParts struct {
		ID    int64
		Parts []checkpoint.SinkPart
	}
	// Notify: tell every live task of the attempt that the checkpoint
	// completed or aborted, best effort.
	Notify struct {
		ID        int64
		Completed bool
	}
	// DeleteDirs: delete these directories of checkpoint ID (What says
	// which, for the log); a failure comes back as DeleteFailed.
	DeleteDirs struct {
		What string
		ID   int64
		Dirs []string
	}
	// DeleteState: delete the state object of a late ack.
	DeleteState struct {
		ID  int64
		Key string
	}
	// AnswerSavepoint: the savepoint of Waiter completed (Err nil) or did
	// not.
	AnswerSavepoint struct {
		Waiter int64
		Stats  checkpoint.Stats
		Err    error
	}
	// StopTasks: a stop-with-savepoint completed: cancel every task; the
	// job then ends FINISHED (Coordinator.Stopping is true from now on).
	StopTasks struct{}
	// FailJob: too many checkpoints failed in a row.
	FailJob struct{ Cause string }
	// Proceed: a checkpoint stopped writing: what waited for the writes
	// (Coordinator.Writing) may go on.
	Proceed struct{}
)

// Copy is one state object copied into a savepoint.
type Copy struct{ From, To string }

func (ArmTick) command()         {}
func (SendTrigger) command()     {}
func (ArmExpiry) command()       {}
func (DisarmExpiry) command()    {}
func (WriteMetadata) command()   {}
func (CommitSinkParts) command() {}
func (Notify) command()          {}
func (DeleteDirs) command()      {}
func (DeleteState) command()     {}
func (AnswerSavepoint) command() {}
func (StopTasks) command()       {}
func (FailJob) command()         {}
func (Proceed) command()         {}
