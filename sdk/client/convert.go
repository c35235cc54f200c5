package client

import (
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
)

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func summaryFromWire(s *dispatcher.JobSummary) JobSummary {
	if s == nil {
		return JobSummary{}
	}
	return JobSummary{
		ID:    s.GetJobId(),
		Name:  s.GetName(),
		State: s.GetState(),
		Start: msTime(s.GetStartTimeMs()),
		End:   msTime(s.GetEndTimeMs()),
	}
}

func detailsFromWire(d *dispatcher.JobDetails) JobDetails {
	if d == nil {
		return JobDetails{}
	}
	out := JobDetails{
		JobSummary:   summaryFromWire(d.GetSummary()),
		Failure:      d.GetFailure(),
		Restarts:     int(d.GetRestarts()),
		ModuleDigest: d.GetModuleDigest(),
		Accumulators: d.GetAccumulators(),
		Fuel:         d.GetFuel(),
	}
	for _, f := range d.GetHistory() {
		if f != nil {
			out.History = append(out.History, FailureRecord{Time: msTime(f.GetTimeMs()), Cause: f.GetCause()})
		}
	}
	if len(d.GetStateTimesMs()) > 0 {
		out.StateTimes = make(map[string]time.Time, len(d.GetStateTimesMs()))
		for s, ms := range d.GetStateTimesMs() {
			out.StateTimes[s] = msTime(ms)
		}
	}
	for _, v := range d.GetVertices() {
		if v == nil {
			continue
		}
		vs := VertexStatus{ID: int(v.GetId()), Name: v.GetName(), Parallelism: int(v.GetParallelism())}
		for _, st := range v.GetSubtasks() {
			if st == nil {
				continue
			}
			ss := SubtaskStatus{
				Index:       int(st.GetIndex()),
				State:       st.GetState(),
				TaskManager: st.GetTaskManager(),
				Attempt:     int(st.GetAttempt()),
				Failure:     st.GetFailure(),
			}
			if m := st.GetMetrics(); m != nil {
				ss.Metrics = &SubtaskMetrics{
					RecordsIn: m.RecordsIn, RecordsOut: m.RecordsOut, BytesIn: m.BytesIn, BytesOut: m.BytesOut,
					BusyMsPerSecond: m.BusyMsPerSecond, IdleMsPerSecond: m.IdleMsPerSecond,
					BackPressuredMsPerSecond: m.BackpressuredMsPerSecond, Reported: msTime(m.ReportedMs),
					Fuel: m.GetFuel(),
				}
			}
			vs.Subtasks = append(vs.Subtasks, ss)
		}
		out.Vertices = append(out.Vertices, vs)
	}
	return out
}

func resultFromWire(r *dispatcher.JobResult_) JobResult {
	if r == nil {
		return JobResult{}
	}
	out := JobResult{
		JobDetails:    detailsFromWire(r.GetDetails()),
		Records:       r.GetRecords(),
		RecordsOffset: r.GetRecordsOffset(),
		RecordsTotal:  r.GetRecordsTotal(),
		Duration:      time.Duration(r.GetDurationMs()) * time.Millisecond,
	}
	if out.Accumulators == nil {
		out.Accumulators = r.GetAccumulators() // a JobManager that does not put them in the details
	}
	return out
}

func overviewFromWire(o *dispatcher.ClusterOverview) Overview {
	if o == nil {
		return Overview{}
	}
	out := Overview{SlotsTotal: int(o.GetSlotsTotal()), SlotsFree: int(o.GetSlotsFree()), Tenant: o.GetTenant()}
	if len(o.GetJobsByState()) > 0 {
		out.JobsByState = make(map[string]int, len(o.GetJobsByState()))
		for s, n := range o.GetJobsByState() {
			out.JobsByState[s] = int(n)
		}
	}
	for _, tm := range o.GetTaskManagers() {
		if tm == nil {
			continue
		}
		out.TaskManagers = append(out.TaskManagers, TaskManagerInfo{
			ResourceID:  tm.GetResourceId(),
			Address:     tm.GetAddress(),
			DataAddress: tm.GetDataAddress(),
			SlotsTotal:  int(tm.GetSlotsTotal()),
			SlotsFree:   int(tm.GetSlotsFree()),
		})
	}
	return out
}

func checkpointFromWire(w *dispatcher.CheckpointInfo) Checkpoint {
	return Checkpoint{
		ID:          w.GetId(),
		Savepoint:   w.GetSavepoint(),
		SavepointID: w.GetSavepointId(),
		Status:      w.GetStatus(),
		Triggered:   msTime(w.GetTriggeredMs()),
		Duration:    time.Duration(w.GetDurationMs()) * time.Millisecond,
		Size:        w.GetSize(),
		Reason:      w.GetReason(),
		Location:    w.GetLocation(),
		Retained:    w.GetRetained(),
	}
}
