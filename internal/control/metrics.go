package control

import "time"

// TaskMetrics is what one running task (one subtask of a vertex: its chain
// of operators) has measured, as its TaskManager reports it to the
// JobMaster. It is the one shape the REST API, the dashboard and the
// Prometheus exporters read.
//
// Counters are cumulative since the task attempt started. The per-second
// figures are Flink's task gauges (busyTimeMsPerSecond, idleTimeMsPerSecond,
// backPressuredTimeMsPerSecond) over the TaskManager's last report
// interval: a task's three add up to about 1000.
type TaskMetrics struct {
	RecordsIn, RecordsOut int64
	BytesIn, BytesOut     int64

	BusyMsPerSecond          int64
	IdleMsPerSecond          int64
	BackPressuredMsPerSecond int64

	// OutputBufferUsage is the share of the task's output buffers in use,
	// 0 to 1 (Flink's outPoolUsage).
	OutputBufferUsage float64
	// MemoryPages is the guest's linear memory in 64 KiB pages.
	MemoryPages int64
	// Fuel is the guest's fuel consumed so far (loop headers and function
	// entries, see docs/SECURITY.md).
	Fuel int64

	// Reported is when the TaskManager measured these; zero before the
	// first report.
	Reported time.Time

	// The accumulated busy, idle and back-pressured time since the task
	// started, in ms (Flink's accumulated-*-time).
	AccumulatedBusyMs, AccumulatedIdleMs, AccumulatedBackPressuredMs int64
	// LastAlignmentMs is how long the task's last checkpoint waited for
	// its barriers to align over all inputs; zero for sources.
	LastAlignmentMs int64
}

// ExecutionMetrics are the figures of one task attempt, by execution id,
// as a heartbeat carries them.
type ExecutionMetrics struct {
	ExecutionID string
	JobID       string
	Metrics     TaskMetrics
}
