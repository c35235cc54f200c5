package jobmaster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/testutil"
)

// subtaskMetrics returns vertex v's subtask i figures.
func subtaskMetrics(d Details, v, i int) control.TaskMetrics {
	return d.Vertices[v].Subtasks[i].Metrics
}

// Heartbeat figures reach the subtasks of every vertex of the chain they
// were measured on; stale ones, unknown executions' and those after the
// final report are ignored; the final report's stay after the job ended.
func TestMetricsReachTheSubtasks(t *testing.T) {
	running := make(chan control.Deployment, 5)
	finish := make(chan struct{})
	h := start(t, wordcount(2, 3), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Name = "word count"
		g.onRunning = func(d control.Deployment) {
			running <- d
			<-finish
			g.jm().UpdateTaskState(context.Background(), control.TaskUpdate{
				Fencing: d.Fencing, ExecutionID: d.ExecutionID, State: ExecFinished,
				Metrics: &control.TaskMetrics{RecordsIn: int64(1000 + d.Subtask), Reported: time.Now()},
			})
		}
	})
	var src control.Deployment
	for range 5 {
		d := <-running
		if d.JobName != "word count" {
			t.Errorf("deployment %s carries job name %q", d.ExecutionID, d.JobName)
		}
		if d.Chain[0].ID == 1 && d.Subtask == 1 {
			src = d
		}
	}
	now := time.Now()
	h.jm.ReportMetrics([]control.ExecutionMetrics{
		{ExecutionID: src.ExecutionID, JobID: "j1", Metrics: control.TaskMetrics{RecordsIn: 7, BusyMsPerSecond: 300, Reported: now}},
		{ExecutionID: "nobody", JobID: "j1", Metrics: control.TaskMetrics{RecordsIn: 99, Reported: now}},
	})
	h.jm.ReportMetrics([]control.ExecutionMetrics{
		{ExecutionID: src.ExecutionID, JobID: "j1", Metrics: control.TaskMetrics{RecordsIn: 3, Reported: now.Add(-time.Second)}},
	})
	d := h.jm.Details()
	// Vertices 0..2 are the source chain (lines -> split -> by word).
	for v := range 3 {
		if m := subtaskMetrics(d, v, 1); m.RecordsIn != 7 || m.BusyMsPerSecond != 300 {
			t.Errorf("vertex %d subtask 1: %+v, want the heartbeat's", v, m)
		}
		if m := subtaskMetrics(d, v, 0); m.RecordsIn != 0 {
			t.Errorf("vertex %d subtask 0: %+v, want none yet", v, m)
		}
	}
	close(finish)
	h.wait(t, Finished)
	// A heartbeat sampled before the task ended, delivered after its final
	// report, changes nothing.
	h.jm.ReportMetrics([]control.ExecutionMetrics{
		{ExecutionID: src.ExecutionID, JobID: "j1", Metrics: control.TaskMetrics{RecordsIn: 8, Reported: now}},
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		d := h.jm.Details()
		for v, vs := range d.Vertices {
			for i, st := range vs.Subtasks {
				if st.Metrics.RecordsIn != int64(1000+i) {
					return fmt.Errorf("vertex %d subtask %d: %+v, want the final report's", v, i, st.Metrics)
				}
			}
		}
		return nil
	})
}

// A job's fuel counts each task once, though every vertex of its chain
// shows the task's figures, and nothing before a deployment.
func TestDetailsFuelCountsEachTaskOnce(t *testing.T) {
	task := func(exec string, fuel int64) SubtaskStatus {
		return SubtaskStatus{execID: exec, Metrics: control.TaskMetrics{Fuel: fuel}}
	}
	d := Details{Vertices: []VertexStatus{
		{Subtasks: []SubtaskStatus{task("e1", 100), task("e2", 20)}}, // a chain of two vertices
		{Subtasks: []SubtaskStatus{task("e1", 100), task("e2", 20)}},
		{Subtasks: []SubtaskStatus{task("e3", 3), task("", 0)}}, // one not deployed yet
	}}
	if got := d.Fuel(); got != 123 {
		t.Fatalf("fuel %d, want 123", got)
	}
}
