package rpc

import (
	"maps"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/internal/checkpoint"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
	jmd "github.com/sluicehq/sluice/jm/jobmaster"
)

func checkpointToWire(s checkpoint.Stats) *dispatcher.CheckpointInfo {
	return &dispatcher.CheckpointInfo{
		Id:          s.ID,
		Savepoint:   s.Savepoint,
		SavepointId: s.SavepointID,
		Status:      s.Status,
		TriggeredMs: ms(s.Triggered),
		DurationMs:  s.Duration.Milliseconds(),
		Size:        s.Size,
		Reason:      s.Reason,
		Location:    s.Location,
		Retained:    &s.Retained,
	}
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func summaryToWire(d jmd.Details) *dispatcher.JobSummary {
	return &dispatcher.JobSummary{JobId: d.JobID, Name: d.Name, State: string(d.State), StartTimeMs: ms(d.Start), EndTimeMs: ms(d.End)}
}

func detailsToWire(d jmd.Details) *dispatcher.JobDetails {
	w := &dispatcher.JobDetails{
		Summary:      summaryToWire(d),
		Failure:      d.Failure,
		Restarts:     int32(d.Restarts),
		StateTimesMs: map[string]int64{},
	}
	if f := d.Fuel(); f > 0 {
		w.Fuel = &f
	}
	if d.ModuleDigest != "" {
		digest := d.ModuleDigest
		w.ModuleDigest = &digest
	}
	if d.Accumulators != nil {
		w.Accumulators = maps.Clone(d.Accumulators)
	}
	for _, f := range d.History {
		w.History = append(w.History, &dispatcher.FailureRecord{TimeMs: ms(f.Time), Cause: f.Cause})
	}
	for s, t := range d.StateTimes {
		w.StateTimesMs[string(s)] = ms(t)
	}
	for _, v := range d.Vertices {
		vs := &dispatcher.VertexStatus{Id: int32(v.ID), Name: v.Name, Parallelism: int32(v.Parallelism)}
		for _, s := range v.Subtasks {
			st := &dispatcher.SubtaskStatus{
				Index: int32(s.Index), State: s.State, TaskManager: s.TaskManager, Attempt: int32(s.Attempt), Failure: s.Failure,
			}
			if m := s.Metrics; !m.Reported.IsZero() {
				st.Metrics = &dispatcher.SubtaskMetrics{
					RecordsIn: m.RecordsIn, RecordsOut: m.RecordsOut, BytesIn: m.BytesIn, BytesOut: m.BytesOut,
					BusyMsPerSecond: m.BusyMsPerSecond, IdleMsPerSecond: m.IdleMsPerSecond,
					BackpressuredMsPerSecond: m.BackPressuredMsPerSecond, ReportedMs: m.Reported.UnixMilli(),
					Fuel: &m.Fuel,
				}
			}
			vs.Subtasks = append(vs.Subtasks, st)
		}
		w.Vertices = append(w.Vertices, vs)
	}
	return w
}

func resultToWire(r jmd.Result) *dispatcher.JobResult_ {
	return &dispatcher.JobResult_{
		Details:       detailsToWire(r.Details),
		Records:       r.Records,
		Accumulators:  maps.Clone(r.Accumulators),
		DurationMs:    r.Duration.Milliseconds(),
		RecordsOffset: &r.RecordsOffset,
		RecordsTotal:  &r.RecordsTotal,
	}
}

func overviewToWire(o dsp.Overview) *dispatcher.ClusterOverview {
	w := &dispatcher.ClusterOverview{
		SlotsTotal:  int32(o.SlotsTotal),
		SlotsFree:   int32(o.SlotsFree),
		JobsByState: map[string]int32{},
	}
	for _, tm := range o.TaskManagers {
		data := tm.DataAddress
		w.TaskManagers = append(w.TaskManagers, &dispatcher.TaskManagerInfo{
			ResourceId: tm.ResourceID, Address: tm.RPCAddress, SlotsTotal: int32(tm.Slots), SlotsFree: int32(tm.FreeSlots), DataAddress: &data,
		})
	}
	for s, n := range o.JobsByState {
		w.JobsByState[string(s)] = int32(n)
	}
	return w
}
