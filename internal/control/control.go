package control

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// FencingToken identifies the JobMaster attempt allowed to command a task:
// the JobManager's leader session, the job and the job's attempt (restart
// count). Every JobMaster→TaskManager call carries it, and every task
// report is checked against it.
type FencingToken struct {
	LeaderSession string
	JobID         string
	Attempt       int64
}

// InputSpec is one input of a task: the intermediate result it reads and
// how many producer subtasks feed this consumer subtask.
type InputSpec struct {
	ResultID string
	// Producers is the producer parallelism for hash, rebalance and
	// broadcast edges, 1 for a forward edge. The input ends after
	// END_OF_PARTITION from all of them.
	Producers int
}

// OutputSpec is one output of a task: the intermediate result it writes,
// how records are spread over the consumer subtasks, and where those run.
type OutputSpec struct {
	ResultID    string
	Partitioner jobgraph.Partitioner
	// Targets is the data address of each consumer subtask's TaskManager,
	// in subtask order.
	Targets []string
}

// TaskLimits are the sandbox limits a task runs under, from its tenant's
// quotas. Zero means the TaskManager's default; a TaskManager only ever
// lowers its own limits to these.
type TaskLimits struct {
	MemoryBytes int64         // linear memory of each instance
	CallTimeout time.Duration // deadline of one guest call
	StateBytes  int64         // keyed and operator state of the task
	// CPUWeight and FuelPerSecond are the tenant's CPU share on the
	// TaskManager (0: weight 1, no rate cap); CallFuel is the fuel limit
	// of one guest call (0: none).
	CPUWeight     int
	FuelPerSecond int64
	CallFuel      int64
}

// Deployment is everything a TaskManager needs to run one subtask of one
// chain.
type Deployment struct {
	Fencing     FencingToken
	ExecutionID string
	JobID       string
	// JobName labels the task's metrics on the TaskManager.
	JobName      string
	Tenant       string
	ModuleDigest string
	Args         []string
	// Chain is the whole chain, head first, host connectors included.
	Chain       []jobgraph.Vertex
	Subtask     int
	Parallelism int
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int
	Inputs         []InputSpec
	Outputs        []OutputSpec
	AllocationID   string
	// JobMasterAddress is the JobManager's RPC address: where the task
	// reports its state and asks for input splits.
	JobMasterAddress string
	// Config is the job's parsed config; its map form crosses the wire.
	Config jobconfig.Config
	// Limits bound the task's sandbox (the tenant's quotas).
	Limits TaskLimits
	// Restore, when set, is the state the task starts from.
	Restore *checkpoint.TaskRestore
}

// Task states a TaskManager reports in TaskUpdate.State. The JobMaster
// adds its own around them (CREATED before a deployment, CANCELING while
// it waits for a cancel to be confirmed).
const (
	TaskDeploying = "DEPLOYING"
	TaskRunning   = "RUNNING"
	TaskFinished  = "FINISHED"
	TaskCanceled  = "CANCELED"
	TaskFailed    = "FAILED"
)

// FailureKind says whether a task's failure started in the task or
// reached it from elsewhere, so the JobMaster blames the job's failure on
// its root cause.
type FailureKind string

const (
	// FailureCause: the task failed by itself — a guest trap or ERROR
	// status, a host-side error raised by the task's own records (a
	// keyless record on a hash edge, a record too large), a resource
	// limit, a module that cannot be loaded. The empty kind means a cause
	// too (a TaskManager that does not classify).
	FailureCause FailureKind = "CAUSE"
	// FailureConsequence: the task failed because of a failure elsewhere —
	// a producer aborted its channel, a consumer closed it, a data
	// connection to another TaskManager broke, a consumer never came up.
	FailureConsequence FailureKind = "CONSEQUENCE"
)

// TaskUpdate is one task state change the TaskManager reports to the
// task's JobMaster.
type TaskUpdate struct {
	Fencing     FencingToken
	ExecutionID string
	State       string // one of the Task* states
	// Failure (FAILED) is what went wrong, with the guest's stack trace.
	Failure string
	// FailureKind (FAILED) says whether Failure is the task's own cause or
	// a consequence of a failure elsewhere.
	FailureKind FailureKind
	// Accumulators (FINISHED, CANCELED) are the task's accumulator values.
	Accumulators map[string]int64
	// Collected (FINISHED) are the collect-sink records no acknowledged
	// checkpoint carried, and CollectedFrom the task's index of the first
	// (see checkpoint.Ack).
	Collected     [][]byte
	CollectedFrom int64
	// SinkParts (FINISHED) are the file-sink parts no completed checkpoint
	// committed: the JobMaster commits them when the whole job finished.
	SinkParts []checkpoint.SinkPart
	// Metrics (with a final state) are the task's last figures; nil when
	// the TaskManager measures none.
	Metrics *TaskMetrics
}

// SplitRequest asks a JobMaster for the next input split
// (a checkpoint.Split) of a source subtask.
type SplitRequest struct {
	Fencing     FencingToken
	ExecutionID string
	VertexID    int
	Subtask     int
}

// ModuleRef names a module a running job uses: the tenant whose modules
// hold it and its digest. The JobManager sends these to TaskManagers to
// compile ahead of a deployment (TaskExecutor.WarmModules).
type ModuleRef struct {
	Tenant string
	Digest string // "sha256-<hex>"
}

// HASession is the leader session of a JobManager elected at election
// revision rev: the revisions etcd gives successive leaders only grow, so
// sessions of this form order, and a TaskManager refuses the calls of a
// session older than the newest it has seen (a deposed leader).
func HASession(rev int64) string { return fmt.Sprintf("ha-%020d", rev) }

// SessionEpoch returns the election revision of an HA session; ok is false
// for a session of a JobManager without HA (random, unordered).
func SessionEpoch(s string) (rev int64, ok bool) {
	n, found := strings.CutPrefix(s, "ha-")
	if !found || len(n) != 20 {
		return 0, false
	}
	rev, err := strconv.ParseInt(n, 10, 64)
	return rev, err == nil && rev > 0
}
