package executor

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tm/task"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestRatesBetween(t *testing.T) {
	s := func(elapsed, idle, bp time.Duration) task.Sample {
		return task.Sample{Elapsed: elapsed, Idle: idle, BackPressured: bp}
	}
	for _, tc := range []struct {
		name string
		a, b task.Sample
		want rates
	}{
		{"all busy", s(0, 0, 0), s(time.Second, 0, 0), rates{busy: 1000}},
		{"split", s(time.Second, 100*time.Millisecond, 0), s(3*time.Second, 700*time.Millisecond, 400*time.Millisecond), rates{busy: 500, idle: 300, bp: 200}},
		{"all idle", s(0, 0, 0), s(2*time.Second, 2*time.Second, 0), rates{idle: 1000}},
		{"empty window", s(time.Second, 0, 0), s(time.Second, 0, 0), rates{}},
		{"overlap is clamped", s(0, 0, 0), s(time.Second, time.Second, time.Second), rates{idle: 1000, bp: 1000}},
	} {
		if got := ratesBetween(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A task's final report carries its figures; two scrapes see an ended
// task's, then it is gone; with metrics off nothing is measured.
func TestFinalMetricsAndEndedStats(t *testing.T) {
	jms := &fakeJMs{}
	e := newExecutor(t, 1, jms)
	d := deployment("j1", "e1", "a1", 1)
	d.JobName = "word count"
	if err := e.DeployTask(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended("e1") })
	final, _ := jms.final("e1")
	if final.Metrics == nil || final.Metrics.Reported.IsZero() {
		t.Fatalf("final report metrics: %+v", final.Metrics)
	}
	stats := e.TaskStats()
	if len(stats) != 1 || !stats[0].Ended || stats[0].ExecutionID != "e1" || stats[0].JobName != "word count" || stats[0].Task != "src" {
		t.Fatalf("stats after the task ended: %+v", stats)
	}
	if stats := e.TaskStats(); len(stats) != 1 || stats[0].ExecutionID != "e1" {
		t.Fatalf("second scrape after the task ended: %+v, want its figures again", stats)
	}
	if stats := e.TaskStats(); len(stats) != 0 {
		t.Fatalf("an ended task's figures were kept after two scrapes: %+v", stats)
	}

	off := New(Config{Slots: 1, JobMasters: jms, Logger: slog.New(slog.DiscardHandler), DisableMetrics: true})
	defer off.Close(context.Background())
	d2 := deployment("j2", "e2", "a2", 1)
	if err := off.DeployTask(context.Background(), d2); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended("e2") })
	if final, _ := jms.final("e2"); final.Metrics != nil {
		t.Errorf("metrics off, yet the final report has %+v", final.Metrics)
	}
	if stats := off.TaskStats(); len(stats) != 0 || off.HeartbeatMetrics() != nil {
		t.Errorf("metrics off, yet stats %+v", stats)
	}
}

// Ended figures stay bounded when nobody scrapes.
func TestEndedStatsAreBounded(t *testing.T) {
	e := New(Config{Slots: 1, Logger: slog.New(slog.DiscardHandler)})
	defer e.Close(context.Background())
	for i := range maxEndedStats + 10 {
		rt := &runningTask{d: deployment("j", fmt.Sprint("e", i), "a", 1), meter: &taskMeter{m: task.NewMetrics()}}
		e.finalMetrics(rt, nil)
	}
	stats := e.TaskStats()
	if len(stats) != maxEndedStats || stats[len(stats)-1].ExecutionID != fmt.Sprint("e", maxEndedStats+9) {
		t.Fatalf("%d stats kept, last %s: want the newest %d", len(stats), stats[len(stats)-1].ExecutionID, maxEndedStats)
	}
}

// Guest traps, deadline and fuel limit hits are counted by tenant; a guest that
// reported its own failure is neither.
func TestGuestFailuresByTenant(t *testing.T) {
	e := New(Config{Slots: 1, Logger: slog.New(slog.DiscardHandler)})
	defer e.Close(context.Background())
	fail := func(tenant string, cause error) {
		d := deployment("j", "e", "a", 1)
		d.Tenant = tenant
		e.finalMetrics(&runningTask{d: d}, fmt.Errorf("task e: %w", &wasmhost.GuestError{Cause: cause}))
	}
	fail("acme", wasmhost.ErrDeadline)
	fail("acme", wasmhost.ErrTrap)
	fail("acme", wasmhost.ErrStackOverflow)
	fail("beta", wasmhost.ErrGuestFailed)
	fail("beta", wasmhost.ErrDeadline)
	fail("beta", wasmhost.ErrFuelLimit)
	e.finalMetrics(&runningTask{d: deployment("j", "e", "a", 1)}, fmt.Errorf("no module"))
	got := e.GuestFailures()
	want := map[string]GuestFailures{"acme": {Traps: 2, Deadlines: 1}, "beta": {Deadlines: 1, FuelLimits: 1}}
	if len(got) != len(want) || got["acme"] != want["acme"] || got["beta"] != want["beta"] {
		t.Fatalf("guest failures %+v, want %+v", got, want)
	}
}

// The heartbeat carries the running tasks' figures: a text source waiting
// for its first split is idle.
func TestHeartbeatCarriesTaskMetrics(t *testing.T) {
	jms := &fakeJMs{splits: make(chan checkpoint.Split)}
	e := newExecutor(t, 1, jms)
	d := deployment("j1", "e1", "a1", 1)
	d.Chain = []jobgraph.Vertex{
		{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText},
		{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect},
	}
	if err := e.DeployTask(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	rm := &fakeRM{}
	runRegistration(t, e, rm)
	testutil.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		tasks, _ := rm.lastTasks.Load().([]control.ExecutionMetrics)
		if len(tasks) != 1 || tasks[0].ExecutionID != "e1" || tasks[0].JobID != "j1" {
			return fmt.Errorf("heartbeat tasks %+v", tasks)
		}
		if m := tasks[0].Metrics; m.IdleMsPerSecond < 900 || m.AccumulatedIdleMs == 0 {
			return fmt.Errorf("a task waiting for its split reports %+v", m)
		}
		return nil
	})
	close(jms.splits)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended("e1") })
}
