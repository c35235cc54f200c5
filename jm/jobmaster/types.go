package jobmaster

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
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

// Execution (task attempt) states. DEPLOYING, RUNNING, FINISHED, CANCELED
// and FAILED are also what TaskManagers report.
const (
	ExecCreated   = "CREATED"
	ExecDeploying = "DEPLOYING"
	ExecRunning   = "RUNNING"
	ExecFinished  = "FINISHED"
	ExecCanceling = "CANCELING"
	ExecCanceled  = "CANCELED"
	ExecFailed    = "FAILED"
)

func execTerminal(s string) bool { return s == ExecFinished || s == ExecCanceled || s == ExecFailed }

// FencingToken identifies the JobMaster attempt allowed to command a task:
// the JobManager's leader session, the job and the job's attempt. Every
// JobMaster→TaskManager call carries it, and every task report is checked
// against it.
type FencingToken struct {
	LeaderSession string
	JobID         string
	Attempt       int64
}

// InputSpec is one input of a task: an intermediate result and how many
// producer subtasks feed this consumer subtask (1 on a forward edge).
type InputSpec struct {
	ResultID  string
	Producers int
}

// OutputSpec is one output of a task: the intermediate result it writes,
// the partitioner, and the data address of each consumer subtask's
// TaskManager, in subtask order.
type OutputSpec struct {
	ResultID    string
	Partitioner jobgraph.Partitioner
	Targets     []string
}

// Deployment is everything a TaskManager needs to run one subtask of one
// chain.
type Deployment struct {
	Fencing        FencingToken
	ExecutionID    string
	JobID          string
	Tenant         string
	ModuleDigest   string
	Args           []string
	Chain          []jobgraph.Vertex // the whole chain, head first, host connectors included
	Subtask        int
	Parallelism    int
	MaxParallelism int
	Inputs         []InputSpec
	Outputs        []OutputSpec
	AllocationID   string
	// JobMasterAddress is the JobManager's Kitex address: where the task
	// reports its state and asks for input splits.
	JobMasterAddress string
	Config           map[string]string
	// Limits bound the task's sandbox (the tenant's quotas); zero fields
	// leave the TaskManager's defaults.
	Limits TaskLimits
	// Restore, when set, is the state the task starts from.
	Restore *checkpoint.TaskRestore
}

// TaskLimits are the sandbox limits a task runs under, from its tenant's
// quotas. Zero means the TaskManager's default.
type TaskLimits struct {
	MemoryBytes int64         // linear memory of each instance
	CallTimeout time.Duration // deadline of one guest call
	StateBytes  int64         // keyed and operator state of the task
}

// TaskExecutorGateway reaches the TaskExecutor service of a TaskManager by
// its RPC address. jm/rpc implements it over Kitex; tests use a fake that
// can be told to fail.
type TaskExecutorGateway interface {
	DeployTask(ctx context.Context, address string, d Deployment) error
	CancelTask(ctx context.Context, address string, fencing FencingToken, executionID string) error
	FreeSlot(ctx context.Context, address string, allocationID string) error
	// TriggerCheckpoint starts checkpoint t.ID at a source task.
	TriggerCheckpoint(ctx context.Context, address string, fencing FencingToken, executionID string, t checkpoint.Trigger) error
	// NotifyCheckpoint tells a task that a checkpoint completed (or, with
	// completed false, was aborted).
	NotifyCheckpoint(ctx context.Context, address string, fencing FencingToken, executionID string, checkpointID int64, completed bool) error
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

// TaskUpdate is a task's state report.
type TaskUpdate struct {
	Fencing      FencingToken
	ExecutionID  string
	State        string // DEPLOYING, RUNNING, FINISHED, CANCELED, FAILED
	Failure      string
	Accumulators map[string]int64
	Collected    [][]byte
	// SinkParts (FINISHED) are the file-sink parts no completed checkpoint
	// committed: the JobMaster commits them when the whole job finished.
	SinkParts []checkpoint.SinkPart
}

// SplitRequest asks for the next input split of a source subtask.
type SplitRequest struct {
	Fencing     FencingToken
	ExecutionID string
	VertexID    int
	Subtask     int
}

// Split is a byte range of one blob object. The task reading it applies the
// line-boundary rule: it skips a partial first line unless Offset is 0 and
// reads past the end to finish its last line.
type Split struct {
	Key    string
	Offset int64
	Length int64
}

// SubtaskStatus is one parallel instance of a vertex.
type SubtaskStatus struct {
	Index       int
	State       string
	TaskManager string // resource id; empty before deployment
	Attempt     int
	Failure     string
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
	Failure      string // the root cause, with the guest's stack trace
	Restarts     int
	StateTimes   map[JobState]time.Time // when the job last entered each state
}

// Result is a job's outcome: its details and, once FINISHED, the
// collect-sink records and the accumulators summed over every task.
type Result struct {
	Details
	Records      [][]byte
	Accumulators map[string]int64
	Duration     time.Duration
}
