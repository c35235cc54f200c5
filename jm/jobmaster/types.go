package jobmaster

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// JobState is a job's state, as Flink's.
type JobState string

// Job states. See the diagram in jobmaster.go.
const (
	Created    JobState = "CREATED"
	Running    JobState = "RUNNING"
	Failing    JobState = "FAILING"
	Restarting JobState = "RESTARTING"
	Cancelling JobState = "CANCELLING"
	Canceled   JobState = "CANCELED"
	Finished   JobState = "FINISHED"
	Failed     JobState = "FAILED"
	// Suspended: the JobManager shut down under the job.
	Suspended JobState = "SUSPENDED"
)

// Terminal reports whether a job in state s never changes state again.
func (s JobState) Terminal() bool {
	return s == Canceled || s == Finished || s == Failed || s == Suspended
}

// Execution (task attempt) states: the ones TaskManagers report
// (control.Task*) and the JobMaster's own, CREATED and CANCELING.
const (
	ExecCreated   = "CREATED"
	ExecDeploying = control.TaskDeploying
	ExecRunning   = control.TaskRunning
	ExecFinished  = control.TaskFinished
	ExecCanceling = "CANCELING"
	ExecCanceled  = control.TaskCanceled
	ExecFailed    = control.TaskFailed
)

func execTerminal(s string) bool { return s == ExecFinished || s == ExecCanceled || s == ExecFailed }

// TaskExecutorGateway reaches the TaskExecutor service of a TaskManager by
// its RPC address. jm/rpc implements it over Kitex; tests use a fake that
// can be told to fail.
type TaskExecutorGateway interface {
	DeployTask(ctx context.Context, address string, d control.Deployment) error
	CancelTask(ctx context.Context, address string, fencing control.FencingToken, executionID string) error
	FreeSlot(ctx context.Context, address string, allocationID string) error
	// TriggerCheckpoint starts checkpoint t.ID at a source task.
	TriggerCheckpoint(ctx context.Context, address string, fencing control.FencingToken, executionID string, t checkpoint.Trigger) error
	// NotifyCheckpoint tells a task that a checkpoint completed (or, with
	// completed false, was aborted).
	NotifyCheckpoint(ctx context.Context, address string, fencing control.FencingToken, executionID string, checkpointID int64, completed bool) error
}

// SlotPool is the ResourceManager as a JobMaster sees it.
type SlotPool interface {
	RequestSlots(ctx context.Context, jobID string, n int) ([]resourcemanager.Slot, error)
	ReleaseSlots(allocationIDs ...string)
	// ReportUnreachable says a call to the TaskManager failed on the network
	// (rpcerr.ErrUnreachable): its slots are held back until it heartbeats.
	ReportUnreachable(resourceID string)
}

// TenantSlotPool is a SlotPool that shares slots fairly between tenants;
// a JobMaster uses RequestTenantSlots when its pool has it.
type TenantSlotPool interface {
	SlotPool
	RequestTenantSlots(ctx context.Context, tenant, jobID string, n int) ([]resourcemanager.Slot, error)
}

// SubtaskStatus is one parallel instance of a vertex.
type SubtaskStatus struct {
	Index       int
	State       string
	TaskManager string // resource id; empty before deployment
	Attempt     int
	Failure     string
	// Metrics is the attempt's latest report from its TaskManager; zero
	// before the first. Every vertex of a chain shows its task's figures
	// (the chain runs as one task, as Flink's job vertices do).
	Metrics control.TaskMetrics

	execID string // the attempt's execution id; "" before deployment
}

// Fuel returns the guest fuel of the job's current attempts: each task's
// latest report once, though every vertex of its chain shows it (a
// restarted subtask starts again from 0).
func (d Details) Fuel() int64 {
	seen := map[string]bool{}
	var n int64
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			if s.execID == "" || seen[s.execID] {
				continue
			}
			seen[s.execID] = true
			n += s.Metrics.Fuel
		}
	}
	return n
}

// VertexStatus is one operator with its subtasks.
type VertexStatus struct {
	ID          int
	Name        string
	Parallelism int
	Subtasks    []SubtaskStatus
}

// Details is a job's state in full.
type Details struct {
	JobID        string
	Name         string
	Tenant       string
	ModuleDigest string
	State        JobState
	Start, End   time.Time // End is zero until the job ends
	Vertices     []VertexStatus
	// Failure is the root cause of the current failure, with the guest's
	// stack trace: set while FAILING or RESTARTING and once FAILED. The
	// failures a job recovered from are in History.
	Failure  string
	Restarts int
	// History is the failures that ended an attempt of the job (each
	// followed by a restart, or by FAILED), oldest first: the last
	// MaxHistory of them.
	History    []FailureRecord
	StateTimes map[JobState]time.Time // when the job last entered each state
	// Accumulators are summed over every task once the job FINISHED; nil
	// before.
	Accumulators map[string]int64
}

// FailureRecord is one failure of a job: when it happened and its root
// cause.
type FailureRecord struct {
	Time  time.Time
	Cause string
}

// MaxHistory bounds Details.History (as Flink's
// web.exception-history-size).
const MaxHistory = 16

// Result is a job's outcome: its details and, once FINISHED, the
// collect-sink records.
type Result struct {
	Details
	// Records are the collect-sink records the job has released: those a
	// completed checkpoint covers, and once FINISHED all of them. The
	// first RecordsOffset released records were dropped (past
	// MaxReleasedBytes) or trimmed from this answer; RecordsTotal counts
	// every record released.
	Records       [][]byte
	RecordsOffset int64
	RecordsTotal  int64
	Duration      time.Duration
}

// Spec is what a job was started as: its graph, default parallelism and
// parsed config (checkpoint defaults filled in). It never changes, so it
// is not part of the snapshot Details publishes. Treat it as read-only.
type Spec struct {
	Graph              *jobgraph.Graph
	DefaultParallelism int
	Config             jobconfig.Config
	Args               []string
}
