package rpcwire

import (
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/internal/control"
)

// taskMetricsToWire converts one task's figures; nil stays nil.
func taskMetricsToWire(executionID, jobID string, m *control.TaskMetrics) *common.TaskMetrics {
	if m == nil {
		return nil
	}
	var reported int64
	if !m.Reported.IsZero() {
		reported = m.Reported.UnixMilli()
	}
	return &common.TaskMetrics{
		ExecutionId:                executionID,
		JobId:                      jobID,
		RecordsIn:                  m.RecordsIn,
		RecordsOut:                 m.RecordsOut,
		BytesIn:                    m.BytesIn,
		BytesOut:                   m.BytesOut,
		BusyMsPerSecond:            m.BusyMsPerSecond,
		IdleMsPerSecond:            m.IdleMsPerSecond,
		BackPressuredMsPerSecond:   m.BackPressuredMsPerSecond,
		OutputBufferUsage:          m.OutputBufferUsage,
		MemoryPages:                m.MemoryPages,
		Fuel:                       m.Fuel,
		ReportedMs:                 reported,
		AccumulatedBusyMs:          m.AccumulatedBusyMs,
		AccumulatedIdleMs:          m.AccumulatedIdleMs,
		AccumulatedBackPressuredMs: m.AccumulatedBackPressuredMs,
		LastAlignmentMs:            m.LastAlignmentMs,
	}
}

// taskMetricsFromWire converts one task's figures; nil stays nil.
func taskMetricsFromWire(w *common.TaskMetrics) *control.TaskMetrics {
	if w == nil {
		return nil
	}
	m := &control.TaskMetrics{
		RecordsIn:                  w.GetRecordsIn(),
		RecordsOut:                 w.GetRecordsOut(),
		BytesIn:                    w.GetBytesIn(),
		BytesOut:                   w.GetBytesOut(),
		BusyMsPerSecond:            w.GetBusyMsPerSecond(),
		IdleMsPerSecond:            w.GetIdleMsPerSecond(),
		BackPressuredMsPerSecond:   w.GetBackPressuredMsPerSecond(),
		OutputBufferUsage:          w.GetOutputBufferUsage(),
		MemoryPages:                w.GetMemoryPages(),
		Fuel:                       w.GetFuel(),
		AccumulatedBusyMs:          w.GetAccumulatedBusyMs(),
		AccumulatedIdleMs:          w.GetAccumulatedIdleMs(),
		AccumulatedBackPressuredMs: w.GetAccumulatedBackPressuredMs(),
		LastAlignmentMs:            w.GetLastAlignmentMs(),
	}
	if ms := w.GetReportedMs(); ms != 0 {
		m.Reported = time.UnixMilli(ms)
	}
	return m
}

func executionMetricsToWire(ms []control.ExecutionMetrics) []*common.TaskMetrics {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*common.TaskMetrics, len(ms))
	for i := range ms {
		out[i] = taskMetricsToWire(ms[i].ExecutionID, ms[i].JobID, &ms[i].Metrics)
	}
	return out
}

// executionMetricsFromWire drops nil entries.
func executionMetricsFromWire(ws []*common.TaskMetrics) []control.ExecutionMetrics {
	var out []control.ExecutionMetrics
	for _, w := range ws {
		if w != nil {
			out = append(out, control.ExecutionMetrics{ExecutionID: w.GetExecutionId(), JobID: w.GetJobId(), Metrics: *taskMetricsFromWire(w)})
		}
	}
	return out
}
