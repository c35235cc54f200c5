package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/logring"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

func logDeployment(exec, job, tenant string) control.Deployment {
	return control.Deployment{ExecutionID: exec, JobID: job, Tenant: tenant, Subtask: 1,
		Chain: []jobgraph.Vertex{{ID: 1, Name: "src"}, {ID: 2, Name: "map"}}}
}

func TestTaskLogsAreKeptPerTaskAndTenant(t *testing.T) {
	own := logring.New(100, 1<<20)
	e := New(Config{Slots: 1, ResourceID: "tm-x", EndedTaskLogs: 2, OwnLog: own,
		Logger: slog.New(logring.NewHandler(slog.DiscardHandler, own, slog.LevelInfo, nil))})
	ctx := context.Background()
	var execs []string
	for i := range 4 {
		exec := fmt.Sprintf("e%d", i)
		execs = append(execs, exec)
		tl := e.newTaskLog(logDeployment(exec, "j1", "acme"))
		log := e.taskLogger(tl, exec).With("job", "j1", "task", exec, "tenant", "acme")
		log.Debug("guest line", "stream", "stdout")
		log.Info("task finished")
	}
	e.newTaskLog(logDeployment("other", "j1", "eve")) // the same job id, another tenant

	lines, err := e.TaskLogs(ctx, control.TaskLogsRequest{JobID: "j1", Tenant: "acme", Query: control.LogQuery{Task: "map"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 8 {
		t.Fatalf("%d lines, want 2 of each of 4 tasks: %+v", len(lines), lines)
	}
	for _, l := range lines {
		if l.Tenant != "acme" || l.JobID != "j1" || l.TaskManager != "tm-x" || l.Task != "src -> map" || l.Subtask != 1 || l.Source == "other" {
			t.Fatalf("line %+v", l)
		}
	}
	if lines[0].Level != "DEBUG" || lines[0].Attrs != "stream=stdout" {
		t.Errorf("debug line %+v", lines[0])
	}
	// Two ended tasks' logs are kept: the oldest go.
	for _, x := range execs {
		e.taskEnded(x)
	}
	lines, _ = e.TaskLogs(ctx, control.TaskLogsRequest{JobID: "j1", Tenant: "acme"})
	if len(lines) != 4 || lines[0].Source != "e2" || lines[3].Source != "e3" {
		t.Fatalf("after 4 tasks ended, kept %+v; want e2's and e3's", lines)
	}
	if none, _ := e.TaskLogs(ctx, control.TaskLogsRequest{JobID: "j1", Tenant: "acme", Query: control.LogQuery{Task: "sink"}}); len(none) != 0 {
		t.Errorf("--task sink: %+v", none)
	}
	if _, err := e.TaskLogs(ctx, control.TaskLogsRequest{JobID: "j1"}); !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Errorf("no tenant: %v", err)
	}

	// The TaskManager's own log: every line, or one tenant's.
	all, _ := e.TaskManagerLogs(ctx, control.TaskManagerLogsRequest{All: true})
	mine, _ := e.TaskManagerLogs(ctx, control.TaskManagerLogsRequest{Tenant: "acme"})
	theirs, _ := e.TaskManagerLogs(ctx, control.TaskManagerLogsRequest{Tenant: "eve"})
	if len(all) != 4 || len(mine) != 4 || len(theirs) != 0 {
		t.Fatalf("own log: %d lines, acme %d, eve %d; want 4, 4, 0", len(all), len(mine), len(theirs))
	}
	if _, err := e.SampleStacks(ctx, control.TaskStacksRequest{JobID: "j1", Tenant: "acme", Query: control.StackQuery{Duration: 2 * control.MaxStackDuration}}); !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Errorf("too long a sample: %v", err)
	}
}
