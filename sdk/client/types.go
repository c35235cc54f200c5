package client

import (
	"fmt"
	"time"
)

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
	// FromCheckpoint starts the job from a retained checkpoint of the
	// caller's tenant, "<job>/<n>" (CheckpointRef) or its blob directory
	// (Checkpoint.Location), at any parallelism up to the job's max
	// parallelism. Not with FromSavepoint.
	FromCheckpoint string `json:"from_checkpoint,omitempty"`
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
	// Retained: its metadata is in the blob store, so a job can resume
	// from it (JobSpec.FromCheckpoint with CheckpointRef).
	Retained bool `json:"retained,omitempty"`
}

// CheckpointRef names checkpoint cp of job as JobSpec.FromCheckpoint takes it:
// "<job>/<n>".
func CheckpointRef(job string, cp int64) string { return fmt.Sprintf("%s/%d", job, cp) }

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
	// Metrics is the attempt's latest report from its TaskManager; nil
	// before the first.
	Metrics *SubtaskMetrics `json:"metrics,omitempty"`
}

// SubtaskMetrics are a subtask's live figures: counters since its attempt
// started, and Flink's per-second gauges over the TaskManager's last
// report interval.
type SubtaskMetrics struct {
	RecordsIn                int64     `json:"records_in"`
	RecordsOut               int64     `json:"records_out"`
	BytesIn                  int64     `json:"bytes_in"`
	BytesOut                 int64     `json:"bytes_out"`
	BusyMsPerSecond          int64     `json:"busy_ms_per_second"`
	IdleMsPerSecond          int64     `json:"idle_ms_per_second"`
	BackPressuredMsPerSecond int64     `json:"backpressured_ms_per_second"`
	Reported                 time.Time `json:"reported"` // when the TaskManager measured them
	// Fuel is the guest's fuel the attempt consumed: the checks it ran at
	// loop headers and function entries, the same for the same input (its
	// tenant's CPU share is measured in it). 0 for a task without a guest.
	Fuel int64 `json:"fuel"`
}

// LogLine is one kept log line of a task, or of a TaskManager's own log.
// Message and Attrs hold what a guest wrote: print them escaped.
type LogLine struct {
	// Source is the task's execution id ("" for a TaskManager's own log);
	// Seq numbers the lines of one source from 1, without gaps.
	Source string `json:"source"`
	Seq    uint64 `json:"seq"`
	// Dropped is how many lines of the source, after the cursor the
	// reader passed, were lost just before this one (the TaskManager keeps
	// a bounded number).
	Dropped     uint64    `json:"dropped,omitempty"`
	Time        time.Time `json:"time"`
	Level       string    `json:"level"`
	Message     string    `json:"message"`
	Attrs       string    `json:"attrs,omitempty"`
	TaskManager string    `json:"task_manager,omitempty"`
	JobID       string    `json:"job_id,omitempty"`
	Task        string    `json:"task,omitempty"`
	Subtask     int       `json:"subtask"`
	Attempt     int       `json:"attempt"`
}

// LogQuery selects log lines.
type LogQuery struct {
	// Task keeps only the task with this name or with an operator of this
	// name; "" keeps all.
	Task string
	// After is the cursor: the newest Seq seen of each Source. Lines up to
	// it are not sent again.
	After map[string]uint64
	// Limit bounds the lines of each source (the newest kept); 0 means
	// the server's bound.
	Limit int
}

// StackQuery asks for guest call stacks.
type StackQuery struct {
	Task string // as LogQuery.Task
	// Duration 0 takes one current stack of each running task; more
	// samples them at every Interval (0: the server's default, 10ms) for
	// that long (at most a minute).
	Duration time.Duration
	Interval time.Duration
}

// StackCount is one distinct guest call stack, outermost frame first
// (function names from the module's name section: print them escaped),
// and how many samples found it.
type StackCount struct {
	Frames []string `json:"frames"`
	Count  int64    `json:"count"`
}

// TaskStack is what sampling found in one running task: no samples when
// its guest ran no code meanwhile (it waited for input).
type TaskStack struct {
	ExecutionID string       `json:"execution_id"`
	TaskManager string       `json:"task_manager"`
	Task        string       `json:"task"`
	Subtask     int          `json:"subtask"`
	Attempt     int          `json:"attempt"`
	Samples     []StackCount `json:"samples,omitempty"`
	Total       int64        `json:"total"`
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
	Vertices []VertexStatus `json:"vertices,omitempty"`
	// Failure is the current failure's root cause, with the guest's
	// stack trace: while FAILING or RESTARTING, and once FAILED.
	Failure  string `json:"failure,omitempty"`
	Restarts int    `json:"restarts"`
	// History is the failures that ended an attempt (each followed by a
	// restart, or by FAILED), oldest first; a FINISHED job that recovered
	// shows its causes here.
	History      []FailureRecord      `json:"history,omitempty"`
	StateTimes   map[string]time.Time `json:"state_times,omitempty"` // when the job entered each state
	ModuleDigest string               `json:"module_digest,omitempty"`
	// Accumulators are summed over every task, once the job FINISHED.
	Accumulators map[string]int64 `json:"accumulators,omitempty"`
	// Fuel is the guest fuel of the job's current attempts, each task's
	// latest report once (a restarted subtask starts again from 0): the
	// same input gives the same fuel.
	Fuel int64 `json:"fuel,omitempty"`
}

// FailureRecord is one failure of a job.
type FailureRecord struct {
	Time  time.Time `json:"time"`
	Cause string    `json:"cause"`
}

// JobResult is a job's outcome: its details (with the accumulators), and
// for a finished job the collected records.
type JobResult struct {
	JobDetails
	Records [][]byte `json:"records,omitempty"` // collect-sink records, in no particular order
	// RecordsOffset is the index of Records[0] among the records the job
	// released; RecordsTotal how many it released so far (see PollRecords).
	RecordsOffset int64         `json:"records_offset,omitempty"`
	RecordsTotal  int64         `json:"records_total,omitempty"`
	Duration      time.Duration `json:"duration_ns"`
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
