package metrics

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/jobmaster/checkpointing"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

type fakeJob struct {
	d      jobmaster.Details
	cps    []checkpoint.Stats
	counts checkpointing.Counts
}

func (f fakeJob) Details() jobmaster.Details             { return f.d }
func (f fakeJob) Checkpoints() []checkpoint.Stats        { return f.cps }
func (f fakeJob) CheckpointCounts() checkpointing.Counts { return f.counts }

func TestCollectorExportsJobsCheckpointsAndSlots(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	sub := func(align int64) jobmaster.SubtaskStatus {
		return jobmaster.SubtaskStatus{Metrics: control.TaskMetrics{LastAlignmentMs: align}}
	}
	jobs := []Job{
		fakeJob{
			d: jobmaster.Details{JobID: "j1", Name: "wc", Tenant: "acme", State: jobmaster.Running, Start: now.Add(-90 * time.Second), Restarts: 2,
				Vertices: []jobmaster.VertexStatus{{Subtasks: []jobmaster.SubtaskStatus{sub(3), sub(11)}}, {Subtasks: []jobmaster.SubtaskStatus{sub(5)}}}},
			cps: []checkpoint.Stats{
				{ID: 9, Status: checkpoint.StatusInProgress},
				{ID: 8, Status: checkpoint.StatusCompleted, Duration: 250 * time.Millisecond, Size: 4096},
				{ID: 7, Status: checkpoint.StatusCompleted, Duration: time.Second, Size: 1},
			},
			counts: checkpointing.Counts{Completed: 8, Failed: 1},
		},
		fakeJob{d: jobmaster.Details{JobID: "j2", Name: "old", Tenant: "acme", State: jobmaster.Finished, Start: now.Add(-time.Hour)}},
		fakeJob{d: jobmaster.Details{JobID: "j3", Name: "other", Tenant: "beta", State: jobmaster.Failed, Start: now.Add(-time.Hour)}},
	}
	c := NewCollector(Source{
		Jobs: func() []Job { return jobs },
		Overview: func() resourcemanager.Overview {
			return resourcemanager.Overview{TaskManagers: make([]resourcemanager.TaskManagerInfo, 2), SlotsTotal: 8, SlotsFree: 5}
		},
		Now: func() time.Time { return now },
	})
	got := promtest.Gather(t, c)
	j1 := "job_id=j1,job_name=wc,tenant=acme"
	want := map[string]float64{
		"sluice_job_uptime_seconds{" + j1 + "}":                     90,
		"sluice_job_restarts_total{" + j1 + "}":                     2,
		"sluice_job_fuel_total{job_id=j2,job_name=old,tenant=acme}": 0,
		"sluice_job_checkpoints_completed_total{" + j1 + "}":        8,
		"sluice_job_checkpoints_failed_total{" + j1 + "}":           1,
		"sluice_job_last_checkpoint_duration_ms{" + j1 + "}":        250,
		"sluice_job_last_checkpoint_size_bytes{" + j1 + "}":         4096,
		"sluice_job_last_checkpoint_alignment_ms{" + j1 + "}":       11,
		"sluice_jobs{state=RUNNING,tenant=acme}":                    1,
		"sluice_jobs{state=FINISHED,tenant=acme}":                   1,
		"sluice_jobs{state=FAILED,tenant=acme}":                     0,
		"sluice_jobs{state=FAILED,tenant=beta}":                     1,
		"sluice_taskmanagers{}":                                     2,
		"sluice_slots_total{}":                                      8,
		"sluice_slots_free{}":                                       5,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["sluice_job_uptime_seconds{job_id=j2,job_name=old,tenant=acme}"]; ok {
		t.Error("an ended job has an uptime")
	}
	if _, ok := got["sluice_job_last_checkpoint_duration_ms{job_id=j2,job_name=old,tenant=acme}"]; ok {
		t.Error("a job without a completed checkpoint has a last checkpoint")
	}
}
