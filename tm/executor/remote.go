package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// JobMasters reaches the JobMaster of a job at the address its deployment
// named. Implementations time out every call.
type JobMasters interface {
	UpdateTaskState(ctx context.Context, address string, u control.TaskUpdate) error
	NextSplit(ctx context.Context, address string, req control.SplitRequest) (split checkpoint.Split, done bool, err error)
	AcknowledgeCheckpoint(ctx context.Context, address string, f control.FencingToken, a checkpoint.Ack) error
	DeclineCheckpoint(ctx context.Context, address string, f control.FencingToken, d checkpoint.Decline) error
}

// ResourceManager is the JobManager's ResourceManager as seen from a
// TaskManager. Heartbeat answers known=false when the ResourceManager does
// not know the registration (it restarted, or declared this TaskManager dead).
type ResourceManager interface {
	Register(ctx context.Context, r control.Registration) (control.Registered, error)
	Heartbeat(ctx context.Context, h control.Heartbeat) (known bool, err error)
}

// Errors returned by the Executor. Each wraps the internal/rpcerr sentinel of
// its class, so tm/rpc sends it with the right code and a client can test
// for either with errors.Is.
var (
	// ErrInvalidDeployment: the deployment is malformed (missing ids, a chain
	// that does not decode, a subtask out of range).
	ErrInvalidDeployment = fmt.Errorf("invalid task deployment: %w", rpcerr.ErrInvalidArgument)
	// ErrNoFreeSlot: every slot is allocated to another allocation.
	ErrNoFreeSlot = fmt.Errorf("no free slot: %w", rpcerr.ErrResourceExhausted)
	// ErrSlotMismatch: the allocation belongs to another job.
	ErrSlotMismatch = fmt.Errorf("allocation belongs to another job: %w", rpcerr.ErrFailedPrecondition)
	// ErrStaleFencing: the command comes from an older attempt of the job
	// than one this TaskManager has already seen.
	ErrStaleFencing = fmt.Errorf("older attempt: %w", rpcerr.ErrStaleFencingToken)
	// ErrUnavailable: the TaskManager is shutting down.
	ErrUnavailable = fmt.Errorf("task manager is shutting down: %w", rpcerr.ErrUnavailable)
	// ErrTaskNotFound: no such execution runs here (any more).
	ErrTaskNotFound = fmt.Errorf("no such task: %w", rpcerr.ErrNotFound)
	// ErrNotSource: a checkpoint trigger for a task that is not a source.
	ErrNotSource = fmt.Errorf("task is not a source: %w", rpcerr.ErrFailedPrecondition)
	// ErrRejected is wrapped by JobMasters implementations when the
	// JobMaster refuses a call for good (a stale fencing token, an unknown
	// job or execution, an invalid request): retrying cannot help, and the
	// task it concerns is no longer wanted.
	ErrRejected = errors.New("rejected by the job master")
)
