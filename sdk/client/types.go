package client

import "time"

// Job states, as Flink's.
const (
	StateCreated    = "CREATED"
	StateRunning    = "RUNNING"
	StateFailing    = "FAILING"
	StateRestarting = "RESTARTING"
	StateCancelling = "CANCELLING"
	StateCanceled   = "CANCELED"
	StateFinished   = "FINISHED"
	StateFailed     = "FAILED"
	StateSuspended  = "SUSPENDED"
)

// Terminal reports whether a job in state s will not change state again.
func Terminal(s string) bool {
	switch s {
	case StateFinished, StateFailed, StateCanceled:
		return true
	}
	return false
}

// JobSpec is a job to submit: an uploaded module and its arguments.
type JobSpec struct {
	ModuleDigest string            `json:"module_digest"`    // from UploadModule
	Args         []string          `json:"args,omitempty"`   // passed to the module's plan and to every task
	Parallelism  int               `json:"parallelism"`      // default parallelism of vertices that set none; 0 means the cluster's default
	Config       map[string]string `json:"config,omitempty"` // job settings
	Name         string            `json:"name,omitempty"`   // optional; the graph's name otherwise
	// FromSavepoint starts the job from a savepoint of the caller's
	// tenant, at any parallelism up to the job's max parallelism.
	FromSavepoint string `json:"from_savepoint,omitempty"`
}

// Checkpoint is one checkpoint or savepoint of a job.
type Checkpoint struct {
	ID          int64         `json:"id"`
	Savepoint   bool          `json:"savepoint,omitempty"`
	SavepointID string        `json:"savepoint_id,omitempty"`
	Status      string        `json:"status"` // IN_PROGRESS, COMPLETED, ABORTED
	Triggered   time.Time     `json:"triggered"`
	Duration    time.Duration `json:"duration_ns"`
	Size        int64         `json:"size"`
	Reason      string        `json:"reason,omitempty"`   // why it aborted
	Location    string        `json:"location,omitempty"` // blob directory of its metadata
}

// The types below carry JSON tags: `sluice list --json`, `status --json` and
// `overview --json` print them, and scripts read that output.

// JobSummary is one line of ListJobs.
type JobSummary struct {
	ID    string    `json:"job_id"`
	Name  string    `json:"name"`
	State string    `json:"state"`
	Start time.Time `json:"start,omitzero"` // zero when not started
	End   time.Time `json:"end,omitzero"`   // zero when not ended
}

// SubtaskStatus is one parallel instance of a vertex.
type SubtaskStatus struct {
	Index       int    `json:"index"`
	State       string `json:"state"`
	TaskManager string `json:"task_manager,omitempty"`
	Attempt     int    `json:"attempt"`
	Failure     string `json:"failure,omitempty"`
}

// VertexStatus is one operator of the job graph with its subtasks.
type VertexStatus struct {
	ID          int             `json:"id"`
	Name        string          `json:"name"`
	Parallelism int             `json:"parallelism"`
	Subtasks    []SubtaskStatus `json:"subtasks"`
}

// JobDetails is a job's state in full.
type JobDetails struct {
	JobSummary
	Vertices     []VertexStatus       `json:"vertices,omitempty"`
	Failure      string               `json:"failure,omitempty"` // the root cause when FAILED, with the guest's stack trace
	Restarts     int                  `json:"restarts"`
	StateTimes   map[string]time.Time `json:"state_times,omitempty"` // when the job entered each state
	ModuleDigest string               `json:"module_digest,omitempty"`
}

// JobResult is a job's outcome: its details, and for a finished job the
// collected records and accumulators.
type JobResult struct {
	JobDetails
	Records      [][]byte         `json:"records,omitempty"` // collect-sink records, in no particular order
	Accumulators map[string]int64 `json:"accumulators,omitempty"`
	Duration     time.Duration    `json:"duration_ns"`
}

// TaskManagerInfo is one TaskManager in the overview.
type TaskManagerInfo struct {
	ResourceID  string `json:"resource_id"`
	Address     string `json:"address"`
	DataAddress string `json:"data_address,omitempty"`
	SlotsTotal  int    `json:"slots_total"`
	SlotsFree   int    `json:"slots_free"`
}

// Overview is the cluster at a glance.
type Overview struct {
	TaskManagers []TaskManagerInfo `json:"task_managers"`
	SlotsTotal   int               `json:"slots_total"`
	SlotsFree    int               `json:"slots_free"`
	JobsByState  map[string]int    `json:"jobs_by_state,omitempty"`
	// Tenant is the caller's tenant, the one whose jobs JobsByState counts
	// ("default" on a JobManager without tenants).
	Tenant string `json:"tenant,omitempty"`
}
