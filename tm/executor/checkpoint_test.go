package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tm/exchange"
)

// checkpointExecutor is an Executor with a file blob store and an exchange
// Manager, so tasks without guest code really run.
func checkpointExecutor(t *testing.T, jms JobMasters) (*Executor, blob.Store) {
	t.Helper()
	store, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := exchange.NewManager(context.Background(), exchange.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Slots: 2, Blob: store, Exchange: m, JobMasters: jms, Logger: slog.New(slog.DiscardHandler), ReportTimeout: 5 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
		m.Close()
		store.Close()
	})
	return e, store
}

// textDeployment is a source task without guest code: text source (splits
// from the JobMaster) into tail, a collect or file sink.
func textDeployment(exec string, attempt int64, tail jobgraph.Vertex) control.Deployment {
	d := deployment("job1", exec, "a1", attempt)
	d.Tenant = "acme"
	d.Chain = []jobgraph.Vertex{{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText}, tail}
	return d
}

var collectSink = jobgraph.Vertex{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}

func (f *fakeJMs) hasState(exec, state string) bool {
	return slices.Contains(f.states(exec), state)
}

// splitRequests says whether the tasks asked for want splits so far.
func (f *fakeJMs) splitRequests(want int32) error {
	if n := f.nextCalls.Load(); n != want {
		return fmt.Errorf("%d split requests, want %d", n, want)
	}
	return nil
}

// logged says whether the JobMaster saw event ev.
func (f *fakeJMs) logged(ev string) error {
	if evs := f.eventLog(); !slices.Contains(evs, ev) {
		return fmt.Errorf("no %q among the events %q", ev, evs)
	}
	return nil
}

// Triggers and notifications reach the right task, fenced like CancelTask;
// the answers go to the JobMaster in order with the task's state updates:
// FINISHED never overtakes an answer.
func TestCheckpointRouting(t *testing.T) {
	jms := &fakeJMs{splits: make(chan checkpoint.Split)}
	e, store := checkpointExecutor(t, jms)
	ctx := context.Background()
	data := []byte("a\nb\nc\n")
	if err := store.Put(ctx, "in/a.txt", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	src := textDeployment("src", 1, collectSink)
	sink := deployment("job1", "sink", "a1", 1)
	sink.Chain = []jobgraph.Vertex{collectSink}
	sink.Inputs = []control.InputSpec{{ResultID: "never", Producers: 1}}
	for _, d := range []control.Deployment{src, sink} {
		if err := e.DeployTask(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		for _, ex := range []string{"src", "sink"} {
			if !jms.hasState(ex, control.TaskRunning) {
				return fmt.Errorf("task %s reported %v, want RUNNING among them", ex, jms.states(ex))
			}
		}
		return nil
	})

	tok := src.Fencing
	old := tok
	old.Attempt = 0
	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"stale trigger", rpcerr.ErrStaleFencingToken, func() error { return e.TriggerCheckpoint(ctx, old, "src", checkpoint.Trigger{ID: 1}) }},
		{"trigger for another job", ErrStaleFencing, func() error {
			return e.TriggerCheckpoint(ctx, control.FencingToken{LeaderSession: "s1", JobID: "other", Attempt: 1}, "src", checkpoint.Trigger{ID: 1})
		}},
		{"unknown trigger", rpcerr.ErrNotFound, func() error { return e.TriggerCheckpoint(ctx, tok, "nope", checkpoint.Trigger{ID: 1}) }},
		{"not a source", rpcerr.ErrFailedPrecondition, func() error { return e.TriggerCheckpoint(ctx, tok, "sink", checkpoint.Trigger{ID: 1}) }},
		{"bad id", rpcerr.ErrInvalidArgument, func() error { return e.TriggerCheckpoint(ctx, tok, "src", checkpoint.Trigger{ID: 0}) }},
		{"stale notify", ErrStaleFencing, func() error { return e.NotifyCheckpoint(ctx, old, "sink", 1, true) }},
		{"unknown notify", ErrTaskNotFound, func() error { return e.NotifyCheckpoint(ctx, tok, "nope", 1, false) }},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}

	// Trigger 1 reaches the source while it waits for a split: it takes it
	// there, before any split.
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.splitRequests(1) })
	if err := e.TriggerCheckpoint(ctx, tok, "src", checkpoint.Trigger{ID: 1, TimestampMs: 1}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.logged("src ack 1") })
	jms.mu.Lock()
	a := jms.acks[0]
	f := jms.fencing[0]
	jms.mu.Unlock()
	if a.ExecutionID != "src" || a.Source == nil || a.Source.Current != nil || len(a.Source.Finished) != 0 || f != tok {
		t.Fatalf("ack %+v (position %+v) with token %+v; want an empty position", a, a.Source, f)
	}
	if err := e.NotifyCheckpoint(ctx, tok, "src", 1, true); err != nil {
		t.Fatal(err)
	}
	if err := e.NotifyCheckpoint(ctx, tok, "sink", 1, true); err != nil {
		t.Fatal(err)
	}
	// After the split: trigger 2's position has it finished.
	jms.splits <- checkpoint.Split{Key: "in/a.txt", Length: int64(len(data))}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.splitRequests(2) })
	if err := e.TriggerCheckpoint(ctx, tok, "src", checkpoint.Trigger{ID: 2}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.logged("src ack 2") })
	jms.mu.Lock()
	a = jms.acks[1]
	jms.mu.Unlock()
	if a.Source == nil || !slices.Equal(a.Source.Finished, []string{"in/a.txt@6"}) || a.Source.Current != nil {
		t.Fatalf("ack 2 position %+v, want the split finished", a.Source)
	}
	close(jms.splits)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended("src") })
	var srcEvents []string
	for _, ev := range jms.eventLog() {
		if strings.HasPrefix(ev, "src ") {
			srcEvents = append(srcEvents, ev)
		}
	}
	if want := []string{"src DEPLOYING", "src RUNNING", "src ack 1", "src ack 2", "src FINISHED"}; !slices.Equal(srcEvents, want) {
		t.Fatalf("events %q, want %q", srcEvents, want)
	}
	if err := e.TriggerCheckpoint(ctx, tok, "src", checkpoint.Trigger{ID: 3}); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("trigger of a finished task: %v, want not found", err)
	}
	if err := e.CancelTask(ctx, tok, "sink"); err != nil {
		t.Fatal(err)
	}
}

// The fencing attempt names the file sink's parts; the parts the task did
// not see committed come back with FINISHED.
func TestFinishedCarriesSinkParts(t *testing.T) {
	jms := &fakeJMs{splits: make(chan checkpoint.Split, 1)}
	e, store := checkpointExecutor(t, jms)
	ctx := context.Background()
	data := []byte("x\ny\n")
	if err := store.Put(ctx, "in/a.txt", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	jms.splits <- checkpoint.Split{Key: "in/a.txt", Length: int64(len(data))}
	close(jms.splits)
	d := textDeployment("files", 7, jobgraph.Vertex{ID: 2, Name: "files", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorFile, Config: map[string]string{"path": "out"}})
	if err := e.DeployTask(ctx, d); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return jms.ended("files") })
	u, _ := jms.final("files")
	want := []checkpoint.SinkPart{{
		Pending: "tenants/acme/jobs/job1/pending/2-0-a7-00000000",
		Final:   "tenants/acme/files/out/part-job1-2-0-a7-00000000",
		Size:    int64(len(data)),
	}}
	if u.State != control.TaskFinished || !slices.Equal(u.SinkParts, want) {
		t.Fatalf("final update %+v, want FINISHED with %+v", u, want)
	}
	if !strings.HasPrefix(u.SinkParts[0].Pending, "tenants/acme/") {
		t.Fatal("part outside the tenant")
	}
}
