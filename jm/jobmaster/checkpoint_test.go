package jobmaster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/testutil"
)

type triggerCall struct {
	execID string
	f      control.FencingToken
	tr     checkpoint.Trigger
}

type notifyCall struct {
	execID    string
	id        int64
	completed bool
}

// cpReply is what a fake task does for a checkpoint: ack (the zero value),
// decline with a reason, or nothing at all.
type cpReply struct {
	ignore  bool
	decline string
}

func (g *fakeGateway) deployment(execID string) (control.Deployment, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.deploys {
		if d.ExecutionID == execID {
			return d, true
		}
	}
	return control.Deployment{}, false
}

// TriggerCheckpoint plays the barrier: once every source of the attempt was
// triggered for a checkpoint, every task of the attempt snapshots (a state
// object written to the store) and acknowledges, unless onCheckpoint says
// otherwise.
func (g *fakeGateway) TriggerCheckpoint(ctx context.Context, addr string, f control.FencingToken, id string, tr checkpoint.Trigger) error {
	g.mu.Lock()
	g.triggers = append(g.triggers, triggerCall{id, f, tr})
	fail := g.failTrigger
	var all []control.Deployment
	if g.store != nil {
		if g.seen == nil {
			g.seen = map[[2]int64]int{}
		}
		k := [2]int64{f.Attempt, tr.ID}
		g.seen[k]++
		sources := 0
		var deps []control.Deployment
		for _, d := range g.deploys {
			if d.Fencing.Attempt == f.Attempt {
				deps = append(deps, d)
				if len(d.Inputs) == 0 {
					sources++
				}
			}
		}
		if g.seen[k] == sources {
			all = deps
		}
	}
	g.mu.Unlock()
	if fail != nil {
		d, _ := g.deployment(id)
		if err := fail(d, tr); err != nil {
			return err
		}
	}
	for _, d := range all {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.snapshot1(d, tr)
		}()
	}
	return nil
}

// snapshot1 is one task's part of a checkpoint.
func (g *fakeGateway) snapshot1(d control.Deployment, tr checkpoint.Trigger) {
	keys, _ := blob.ForTenant(d.Tenant)
	dir, _ := keys.Checkpoint(d.JobID, uint64(tr.ID))
	ids := make([]int, len(d.Chain))
	for i, v := range d.Chain {
		ids[i] = v.ID
	}
	key := dir + checkpoint.StateObject(ids, d.Subtask)
	body := []byte(fmt.Sprintf("state of %s at checkpoint %d", d.ExecutionID, tr.ID))
	if err := g.store.Put(context.Background(), key, bytes.NewReader(body), int64(len(body))); err != nil {
		g.t.Logf("fake task: put %s: %v", key, err)
		return
	}
	start, end := keygroup.Range(d.Subtask, d.Parallelism, d.MaxParallelism)
	a := checkpoint.Ack{ExecutionID: d.ExecutionID, CheckpointID: tr.ID,
		State: &checkpoint.StateHandle{Key: key, Size: int64(len(body)), KeyGroupStart: start, KeyGroupEnd: end}}
	if d.Chain[0].Connector == jobgraph.ConnectorText {
		a.Source = &checkpoint.SourcePosition{}
	}
	var r cpReply
	g.mu.Lock()
	on := g.onCheckpoint
	g.mu.Unlock()
	if on != nil {
		r = on(d, tr, &a)
	}
	switch {
	case r.ignore:
	case r.decline != "":
		g.jm().DeclineCheckpoint(context.Background(), d.Fencing, checkpoint.Decline{ExecutionID: d.ExecutionID, CheckpointID: tr.ID, Reason: r.decline})
	default:
		g.jm().AcknowledgeCheckpoint(context.Background(), d.Fencing, a)
	}
}

func (g *fakeGateway) NotifyCheckpoint(ctx context.Context, addr string, f control.FencingToken, id string, cp int64, completed bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.notifies = append(g.notifies, notifyCall{id, cp, completed})
	return nil
}

func (g *fakeGateway) cpCalls() ([]triggerCall, []notifyCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.triggers), slices.Clone(g.notifies)
}

// recStore is a blob.Store that records the order of Puts and can be taken
// down: every call then fails with ErrUnavailable.
type recStore struct {
	blob.Store
	down  atomic.Bool
	fails atomic.Int64
	mu    sync.Mutex
	puts  []string
}

func (s *recStore) unavailable(op, key string) error {
	if !s.down.Load() {
		return nil
	}
	s.fails.Add(1)
	return &blob.Error{Op: op, Key: key, Kind: blob.ErrUnavailable, Msg: "the test took the store down"}
}

func (s *recStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.unavailable("put", key); err != nil {
		return err
	}
	if err := s.Store.Put(ctx, key, r, size); err != nil {
		return err
	}
	s.mu.Lock()
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	return nil
}

func (s *recStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.unavailable("get", key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

func (s *recStore) Stat(ctx context.Context, key string) (blob.Info, error) {
	if err := s.unavailable("stat", key); err != nil {
		return blob.Info{}, err
	}
	return s.Store.Stat(ctx, key)
}

func (s *recStore) List(ctx context.Context, prefix, after string, limit int) (blob.Page, error) {
	if err := s.unavailable("list", prefix); err != nil {
		return blob.Page{}, err
	}
	return s.Store.List(ctx, prefix, after, limit)
}

func (s *recStore) Delete(ctx context.Context, key string) error {
	if err := s.unavailable("delete", key); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

// putIndex is the position of key's last Put, -1 if none.
func (s *recStore) putIndex(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.puts) - 1; i >= 0; i-- {
		if s.puts[i] == key {
			return i
		}
	}
	return -1
}

func (s *recStore) keys(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for o, err := range blob.All(context.Background(), s.Store, prefix) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

func (s *recStore) exists(key string) bool {
	_, err := s.Store.Stat(context.Background(), key)
	return err == nil
}

func (s *recStore) read(t *testing.T, key string) string {
	t.Helper()
	rc, err := s.Store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

func (s *recStore) write(t *testing.T, key, body string) {
	t.Helper()
	if err := s.Store.Put(context.Background(), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
}

func newStore(t *testing.T) *recStore {
	t.Helper()
	st, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &recStore{Store: st}
}

var testKeys, _ = blob.ForTenant("default")

func cpDir(id int64) string {
	d, _ := testKeys.Checkpoint("j1", uint64(id))
	return d
}

// cpDirGone says whether the (what: aborted, expired...) checkpoint id's
// directory was deleted.
func cpDirGone(t *testing.T, st *recStore, id int64, what string) error {
	if left := st.keys(t, cpDir(id)); len(left) != 0 {
		return fmt.Errorf("%s checkpoint %d's directory still holds %v, want it deleted", what, id, left)
	}
	return nil
}

// startCP starts a job whose tasks take checkpoints into a fresh store.
func startCP(t *testing.T, g *jobgraph.Graph, cc jobconfig.Checkpoints, mod func(*Config, *fakeGateway)) (*harness, *recStore) {
	t.Helper()
	st := newStore(t)
	h := start(t, g, func(c *Config, gw *fakeGateway, _ *fakePool) {
		c.Blob = st
		c.JobConfig.Checkpoints = cc
		gw.store = st
		if mod != nil {
			mod(c, gw)
		}
	})
	return h, st
}

func periodic(interval time.Duration) jobconfig.Checkpoints {
	c := jobconfig.DefaultCheckpoints()
	c.Interval = interval
	c.Timeout = 10 * time.Second
	return c
}

func (h *harness) checkpoint(t *testing.T, id int64, status string) checkpoint.Stats {
	t.Helper()
	var got checkpoint.Stats
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		stats := h.jm.Checkpoints()
		for _, s := range stats {
			if s.ID == id && s.Status == status {
				got = s
				return nil
			}
		}
		return fmt.Errorf("checkpoint %d not %s yet: %+v", id, status, stats)
	})
	return got
}

func (h *harness) allRunning(t *testing.T) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		d := h.jm.Details()
		if d.State != Running {
			return fmt.Errorf("job is %s, want RUNNING", d.State)
		}
		for _, v := range d.Vertices {
			if len(v.Subtasks) == 0 { // before its slots arrive
				return fmt.Errorf("%q lists no subtasks yet", v.Name)
			}
			for _, s := range v.Subtasks {
				if s.State != ExecRunning {
					return fmt.Errorf("%q subtask %d is %s, want every task RUNNING", v.Name, s.Index, s.State)
				}
			}
		}
		return nil
	})
}

// deployed says whether want tasks of the given attempt were deployed.
func deployed(h *harness, attempt int64, want int) error {
	if n := len(h.deploysOf(attempt)); n != want {
		return fmt.Errorf("%d tasks of attempt %d deployed, want %d", n, attempt, want)
	}
	return nil
}

// toldAborted says whether a task was told that checkpoint id was aborted.
func toldAborted(h *harness, id int64) error {
	_, ns := h.gw.cpCalls()
	if !slices.ContainsFunc(ns, func(c notifyCall) bool { return c.id == id && !c.completed }) {
		return fmt.Errorf("no task told that checkpoint %d was aborted (notifications %+v)", id, ns)
	}
	return nil
}

func (h *harness) deploysOf(attempt int64) []control.Deployment {
	deps, _, _ := h.gw.snapshot()
	return slices.DeleteFunc(deps, func(d control.Deployment) bool { return d.Fencing.Attempt != attempt })
}

func chainIDs(d control.Deployment) []int {
	ids := make([]int, len(d.Chain))
	for i, v := range d.Chain {
		ids[i] = v.ID
	}
	return ids
}

func readMeta(t *testing.T, st *recStore, dir string) *checkpoint.Metadata {
	t.Helper()
	m, err := checkpoint.ReadMetadata(context.Background(), st.Store, dir)
	if err != nil {
		t.Fatalf("metadata of %s: %v", dir, err)
	}
	return m
}

func TestPeriodicCheckpointsCompleteWithMetadataLastAndRetention(t *testing.T) {
	splits := []checkpoint.Split{{Key: "in/a", Offset: 0, Length: 10}, {Key: "in/b", Offset: 0, Length: 10}}
	cc := periodic(20 * time.Millisecond)
	cc.Retained = 2
	var snapshots5 atomic.Int64 // tasks that stored their state of checkpoint 5
	h, st := startCP(t, wordcount(2, 2), cc, func(c *Config, g *fakeGateway) {
		c.Splits = map[int][]checkpoint.Split{1: splits}
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			if tr.ID == 5 {
				snapshots5.Add(1)
			}
			return cpReply{ignore: tr.ID > 4} // 5 stays in progress
		}
	})

	h.checkpoint(t, 4, checkpoint.StatusCompleted)
	// Retention: checkpoints 1 and 2 are deleted once 3 and 4 completed.
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if left := append(st.keys(t, cpDir(1)), st.keys(t, cpDir(2))...); len(left) != 0 {
			return fmt.Errorf("subsumed checkpoints 1 and 2 still hold %v, want them deleted", left)
		}
		return nil
	})

	stats := h.jm.Checkpoints()
	for i := 1; i < len(stats); i++ {
		if stats[i-1].ID <= stats[i].ID {
			t.Fatalf("not newest first: %+v", stats)
		}
	}
	var s4 checkpoint.Stats
	for _, s := range stats {
		if s.ID == 4 {
			s4 = s
		}
	}
	if s4.Location != cpDir(4) || s4.Savepoint || s4.Size == 0 || s4.Triggered.IsZero() {
		t.Fatalf("stats %+v", s4)
	}
	m := readMeta(t, st, cpDir(4))
	if m.JobID != "j1" || m.Tenant != "default" || m.ID != 4 || m.ModuleDigest != "sha256-00" || m.MaxParallelism != 128 || len(m.Tasks) != 4 {
		t.Fatalf("metadata %+v", m)
	}
	if fmt.Sprint(m.Sources[1]) != fmt.Sprint(splits) {
		t.Fatalf("sources %+v: nothing was read, all splits remain", m.Sources)
	}
	// The metadata was written after every state object it names.
	meta := st.putIndex(cpDir(4) + checkpoint.MetadataObject)
	for _, ts := range m.Tasks {
		if i := st.putIndex(ts.State.Key); i < 0 || i > meta || !strings.HasPrefix(ts.State.Key, cpDir(4)) {
			t.Fatalf("state %s put at %d, metadata at %d", ts.State.Key, i, meta)
		}
	}
	// Every task was told that checkpoint 4 completed.
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		_, ns := h.gw.cpCalls()
		n := 0
		for _, c := range ns {
			if c.id == 4 && c.completed {
				n++
			}
		}
		if n != 4 {
			return fmt.Errorf("%d of 4 tasks told checkpoint 4 completed", n)
		}
		return nil
	})
	// Triggers only reach the source tasks, with the job's fencing.
	trs, _ := h.gw.cpCalls()
	for _, c := range trs {
		d, _ := h.gw.deployment(c.execID)
		if len(d.Inputs) != 0 || c.f != d.Fencing || c.tr.Savepoint {
			t.Fatalf("trigger %+v to %+v", c, d)
		}
	}

	// Canceled: the job's checkpoints are deleted, 5's state too (once
	// stored: a later upload would be a zombie's, which only a restart
	// sweeps).
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := snapshots5.Load(); n != 4 {
			return fmt.Errorf("%d tasks stored their state of checkpoint 5, want 4", n)
		}
		return nil
	})
	h.jm.Cancel(context.Background())
	h.wait(t, Canceled)
	h.jm.Close()
	cps, _ := testKeys.Checkpoints("j1")
	if left := st.keys(t, cps); len(left) != 0 {
		t.Fatalf("checkpoints left after cancel: %v", left)
	}
}

func TestDeclinedCheckpointAborts(t *testing.T) {
	h, st := startCP(t, wordcount(2, 2), periodic(20*time.Millisecond), func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			if tr.ID == 1 && d.Chain[0].ID == 4 && d.Subtask == 1 {
				return cpReply{decline: "blob store down"}
			}
			return cpReply{}
		}
	})
	s := h.checkpoint(t, 1, checkpoint.StatusAborted)
	if !strings.Contains(s.Reason, `task "count -> out" subtask 2/2 declined: blob store down`) {
		t.Fatalf("reason %q", s.Reason)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return cpDirGone(t, st, 1, "aborted") })
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return toldAborted(h, 1) })
	// Failures are tolerated (no limit): the next checkpoint completes.
	h.checkpoint(t, 2, checkpoint.StatusCompleted)
	if d := h.jm.Details(); d.State != Running {
		t.Fatalf("state %s", d.State)
	}
}

func TestCheckpointExpires(t *testing.T) {
	cc := periodic(20 * time.Millisecond)
	cc.Timeout = time.Second // ample for the tasks that do ack, on a loaded machine
	h, st := startCP(t, wordcount(1, 2), cc, func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			return cpReply{ignore: tr.ID == 1 && d.Chain[0].ID == 4 && d.Subtask == 1}
		}
	})
	s := h.checkpoint(t, 1, checkpoint.StatusAborted)
	if want := `checkpoint 1 expired after 1s before all tasks acknowledged (missing: "count -> out" 2/2)`; s.Reason != want {
		t.Fatalf("reason %q\nwant   %q", s.Reason, want)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return cpDirGone(t, st, 1, "expired") })
	// A later one completes (on a loaded machine not necessarily 2).
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		stats := h.jm.Checkpoints()
		if !slices.ContainsFunc(stats, func(s checkpoint.Stats) bool { return s.ID > 1 && s.Status == checkpoint.StatusCompleted }) {
			return fmt.Errorf("no checkpoint completed after the expired one: %+v", stats)
		}
		return nil
	})
}

func TestTriggerFailureAbortsAndToleranceFailsTheJob(t *testing.T) {
	cc := periodic(10 * time.Millisecond)
	cc.TolerableFailures = 1
	h, _ := startCP(t, wordcount(1, 1), cc, func(c *Config, g *fakeGateway) {
		c.Restart = RestartStrategy{Attempts: 1}
		g.failTrigger = func(d control.Deployment, tr checkpoint.Trigger) error {
			return rpcerr.Errorf(rpcerr.ErrUnavailable, "task manager unreachable")
		}
	})
	r := h.wait(t, Failed)
	if r.Restarts != 1 || !strings.Contains(r.Failure, "checkpoint 4 failed: trigger at task \"lines -> split -> by word\" subtask 1/1: task manager unreachable (more than 1 checkpoints failed in a row)") ||
		!strings.Contains(r.Failure, "gave up after 1 restarts: fixed-delay allows 1 restarts") {
		t.Fatalf("restarts %d failure %q", r.Restarts, r.Failure)
	}
	// Ids go on across attempts and are never reused.
	var ids []int64
	for _, s := range h.jm.Checkpoints() {
		ids = append(ids, s.ID)
	}
	if fmt.Sprint(ids) != "[4 3 2 1]" {
		t.Fatalf("checkpoint ids %v", ids)
	}
}

func TestRestartRestoresLatestCheckpointAndResumesSplits(t *testing.T) {
	splits := []checkpoint.Split{{Key: "in/a", Offset: 0, Length: 100}, {Key: "in/b", Offset: 0, Length: 100}, {Key: "in/c", Offset: 0, Length: 50}}
	var once sync.Once
	release := make(chan struct{})
	h, st := startCP(t, wordcount(2, 2), periodic(20*time.Millisecond), func(c *Config, g *fakeGateway) {
		c.Splits = map[int][]checkpoint.Split{1: splits}
		c.Restart = RestartStrategy{Attempts: 1}
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			if d.Fencing.Attempt > 0 {
				// 3 stays the restore point: a later one would subsume it
				// before the test reads its metadata.
				return cpReply{ignore: tr.ID > 3}
			}
			if tr.ID > 1 {
				once.Do(func() { close(release) })
				return cpReply{ignore: true} // stays in progress until the failure
			}
			if d.Chain[0].ID == 1 && d.Subtask == 0 {
				rest, _ := checkpoint.Split(splits[1]).Rest(40)
				a.Source = &checkpoint.SourcePosition{Finished: []string{checkpoint.Split(splits[0]).ID()}, Current: &rest}
			}
			return cpReply{}
		}
	})
	h.checkpoint(t, 1, checkpoint.StatusCompleted)
	<-release
	// Leftovers a restart must clean: a checkpoint directory without
	// metadata (a zombie upload) and an uncommitted file-sink part.
	st.write(t, cpDir(99)+"task-4_5-0.state", "zombie")
	job, _ := testKeys.Job("j1")
	st.write(t, job+"pending/5-0-a0-1", "uncommitted")

	first := h.deploysOf(0)
	h.gw.report(first[len(first)-1], ExecFailed, "boom", nil, nil)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return deployed(h, 1, 4) })

	if st.exists(cpDir(99)+"task-4_5-0.state") || st.exists(job+"pending/5-0-a0-1") {
		t.Fatal("leftovers not swept before the restart")
	}
	if !st.exists(cpDir(1) + checkpoint.MetadataObject) {
		t.Fatal("the restore point was swept")
	}
	s2 := h.checkpoint(t, 2, checkpoint.StatusAborted)
	if !strings.Contains(s2.Reason, "the job is failing: ") {
		t.Fatalf("in-progress checkpoint: %+v", s2)
	}
	for _, d := range h.deploysOf(1) {
		want := cpDir(1) + checkpoint.StateObject(chainIDs(d), d.Subtask)
		if d.Restore == nil || d.Restore.CheckpointID != 1 || len(d.Restore.States) != 1 || d.Restore.States[0].Key != want {
			t.Fatalf("%s restores %+v, want %s", d.ExecutionID, d.Restore, want)
		}
	}
	var src control.Deployment
	for _, d := range h.deploysOf(1) {
		if d.Chain[0].ID == 1 && d.Subtask == 1 {
			src = d
		}
	}
	var got []checkpoint.Split
	for {
		s, done, err := h.jm.NextSplit(context.Background(), control.SplitRequest{Fencing: src.Fencing, ExecutionID: src.ExecutionID, VertexID: 1, Subtask: 1})
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		got = append(got, s)
	}
	// a was read; b is cut to its unread rest (from byte 40, the first
	// unread line) and comes first; c is untouched.
	if want := []checkpoint.Split{{Key: "in/b", Offset: 40, Length: 60}, {Key: "in/c", Offset: 0, Length: 50}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("splits after restore %v, want %v", got, want)
	}
	// The counter goes on: the next checkpoint of attempt 1 is 3.
	h.checkpoint(t, 3, checkpoint.StatusCompleted)
	m := readMeta(t, st, cpDir(3))
	if fmt.Sprint(m.Sources[1]) != fmt.Sprint([]checkpoint.Split{{Key: "in/b", Offset: 40, Length: 60}, {Key: "in/c", Offset: 0, Length: 50}}) {
		t.Fatalf("sources of checkpoint 3 (base is the restored splits) %v", m.Sources)
	}
}

func TestStartFromSavepointAtAnotherParallelism(t *testing.T) {
	st := newStore(t)
	sp, _ := testKeys.Savepoint("sp-0123456789abcdef")
	oldJob, _ := testKeys.Job("old")
	h0 := checkpoint.StateHandle{Key: sp + "task-4_5-0.state", Size: 1, KeyGroupStart: 0, KeyGroupEnd: 63}
	h1 := checkpoint.StateHandle{Key: sp + "task-4_5-1.state", Size: 1, KeyGroupStart: 64, KeyGroupEnd: 127}
	hs := checkpoint.StateHandle{Key: sp + "task-1_2_3-0.state", Size: 1, KeyGroupStart: 0, KeyGroupEnd: 127}
	part := checkpoint.SinkPart{Pending: oldJob + "pending/5-0-a0-1", Final: "tenants/default/files/out/part-old-5-0-a0-1", Size: 4}
	st.write(t, part.Pending, "part")
	meta := &checkpoint.Metadata{
		JobID: "old", Tenant: "default", ID: 7, Savepoint: true, SavepointID: "sp-0123456789abcdef", MaxParallelism: 128,
		Tasks: []checkpoint.TaskState{
			{Vertices: []int{1, 2, 3}, Subtask: 0, Parallelism: 1, State: hs},
			{Vertices: []int{4, 5}, Subtask: 0, Parallelism: 2, State: h0},
			{Vertices: []int{4, 5}, Subtask: 1, Parallelism: 2, State: h1},
		},
		Sources:   map[int][]checkpoint.Split{1: {{Key: "in/z", Offset: 5, Length: 10}}},
		SinkParts: []checkpoint.SinkPart{part},
	}
	h := start(t, wordcount(1, 3), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Blob, c.Restore = st, meta
		c.Splits = map[int][]checkpoint.Split{1: {{Key: "in/a", Offset: 0, Length: 100}}}
	})
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return deployed(h, 0, 4) })
	want := map[string][]checkpoint.StateHandle{
		"1/0": {hs},
		"4/0": {h0},     // key groups 0..42
		"4/1": {h0, h1}, // 43..85
		"4/2": {h1},     // 86..127
	}
	var src control.Deployment
	for _, d := range h.deploysOf(0) {
		k := fmt.Sprintf("%d/%d", d.Chain[0].ID, d.Subtask)
		if d.Restore == nil || d.Restore.CheckpointID != 7 || fmt.Sprint(d.Restore.States) != fmt.Sprint(want[k]) {
			t.Fatalf("%s restores %+v, want %v", k, d.Restore, want[k])
		}
		if d.Chain[0].ID == 1 {
			src = d
		}
	}
	if !st.exists(part.Final) || st.exists(part.Pending) {
		t.Fatal("the savepoint's sink parts were not committed before the deployment")
	}
	s, done, err := h.jm.NextSplit(context.Background(), control.SplitRequest{Fencing: src.Fencing, ExecutionID: src.ExecutionID, VertexID: 1})
	if err != nil || done || s != (checkpoint.Split{Key: "in/z", Offset: 5, Length: 10}) {
		t.Fatalf("first split %v %v %v: want the savepoint's", s, done, err)
	}
	if _, done, _ := h.jm.NextSplit(context.Background(), control.SplitRequest{Fencing: src.Fencing, ExecutionID: src.ExecutionID, VertexID: 1}); !done {
		t.Fatal("more splits than the savepoint had left")
	}
}

func TestStartValidatesCheckpointing(t *testing.T) {
	base := func() Config {
		return Config{JobID: "j1", Tenant: "default", Graph: wordcount(1, 1), Slots: &fakePool{}, Gateway: &fakeGateway{}}
	}
	st := newStore(t)
	tests := map[string]func(c *Config){
		"checkpointing without a store": func(c *Config) { c.JobConfig.Checkpoints = periodic(time.Second) },
		"restore without a store":       func(c *Config) { c.Restore = &checkpoint.Metadata{ID: 1, Tenant: "default", MaxParallelism: 128} },
		"restore of another tenant": func(c *Config) {
			c.Blob, c.Restore = st, &checkpoint.Metadata{ID: 1, Tenant: "other", MaxParallelism: 128}
		},
		"restore at another max parallelism": func(c *Config) {
			c.Blob, c.Restore = st, &checkpoint.Metadata{ID: 1, Tenant: "default", MaxParallelism: 64}
		},
		"bad tenant for keys":    func(c *Config) { c.Blob, c.Tenant = st, "Not A Tenant" },
		"bad restart strategy":   func(c *Config) { c.Restart = RestartStrategy{Kind: "sometimes"} },
		"negative backoff":       func(c *Config) { c.Restart = RestartStrategy{Kind: RestartExponentialDelay, MaxBackoff: -1} },
		"negative min pause":     func(c *Config) { c.Blob, c.JobConfig.Checkpoints = st, jobconfig.Checkpoints{MinPause: -1} },
		"negative restart delay": func(c *Config) { c.Restart = RestartStrategy{Attempts: 1, Delay: -time.Second} },
	}
	for name, mod := range tests {
		c := base()
		mod(&c)
		if _, err := Start(c); !errors.Is(err, rpcerr.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// fileSinkJob: text source -> map -> file sink, one chain of parallelism 2.
func fileSinkJob() *jobgraph.Graph {
	return &jobgraph.Graph{
		Name: "copy",
		Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Parallelism: 2, Config: map[string]string{"paths": `["in/"]`}},
			{ID: 2, Name: "upper", Kind: jobgraph.KindMap, Parallelism: 2},
			{ID: 3, Name: "files", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorFile, Parallelism: 2, Config: map[string]string{"path": "out"}},
		},
		Edges: []jobgraph.Edge{{Source: 1, Target: 2, Partitioner: jobgraph.Forward}, {Source: 2, Target: 3, Partitioner: jobgraph.Forward}},
	}
}

func sinkPart(subtask, seq int) checkpoint.SinkPart {
	job, _ := testKeys.Job("j1")
	name := fmt.Sprintf("3-%d-a0-%d", subtask, seq)
	return checkpoint.SinkPart{Pending: job + "pending/" + name, Final: "tenants/default/files/out/part-j1-" + name, Size: 6}
}

func TestSinkPartsCommittedAfterCheckpointAndWhenFinished(t *testing.T) {
	cc := periodic(20 * time.Millisecond)
	h, st := startCP(t, fileSinkJob(), cc, func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			if tr.ID > 1 {
				return cpReply{ignore: true} // in progress until the tasks finish
			}
			p := sinkPart(d.Subtask, 1)
			g.store.(*recStore).write(t, p.Pending, fmt.Sprintf("part-%d", d.Subtask))
			a.SinkParts = []checkpoint.SinkPart{p}
			return cpReply{}
		}
	})
	h.checkpoint(t, 1, checkpoint.StatusCompleted)
	m := readMeta(t, st, cpDir(1))
	if len(m.SinkParts) != 2 {
		t.Fatalf("sink parts %+v", m.SinkParts)
	}
	for i := range 2 {
		p := sinkPart(i, 1)
		if st.exists(p.Pending) || st.read(t, p.Final) != fmt.Sprintf("part-%d", i) {
			t.Fatalf("part %d not committed", i)
		}
		// Metadata before commit: every committed part is covered.
		if st.putIndex(p.Final) < st.putIndex(cpDir(1)+checkpoint.MetadataObject) {
			t.Fatal("a part was committed before the checkpoint's metadata was written")
		}
	}

	// The tasks finish with parts no checkpoint committed.
	for _, d := range h.deploysOf(0) {
		p := sinkPart(d.Subtask, 2)
		st.write(t, p.Pending, "final")
		err := h.jm.UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: d.Fencing, ExecutionID: d.ExecutionID, State: ExecFinished, SinkParts: []checkpoint.SinkPart{p}})
		if err != nil {
			t.Fatal(err)
		}
	}
	h.wait(t, Finished)
	for i := range 2 {
		if p := sinkPart(i, 2); st.exists(p.Pending) || !st.exists(p.Final) {
			t.Fatalf("final part %d not committed before FINISHED", i)
		}
	}
	h.jm.Close()
	job, _ := testKeys.Job("j1")
	if left := st.keys(t, job); len(left) != 0 {
		t.Fatalf("left after FINISHED: %v", left)
	}
}

func TestFinalCommitRetriesThenCancelFails(t *testing.T) {
	h, st := startCP(t, fileSinkJob(), jobconfig.Checkpoints{}, nil)
	h.allRunning(t)
	st.down.Store(true)
	for _, d := range h.deploysOf(0) {
		err := h.jm.UpdateTaskState(context.Background(), control.TaskUpdate{Fencing: d.Fencing, ExecutionID: d.ExecutionID, State: ExecFinished, SinkParts: []checkpoint.SinkPart{sinkPart(d.Subtask, 1)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := st.fails.Load(); n < 2 {
			return fmt.Errorf("%d store calls failed, want at least 2 (the commit retried)", n)
		}
		return nil
	})
	if s := h.jm.Details().State; s != Running {
		t.Fatalf("state %s while the final commit cannot finish", s)
	}
	h.jm.Cancel(context.Background())
	r := h.wait(t, Failed)
	if !strings.Contains(r.Failure, "canceled before the job's final output (2 file-sink parts) was committed") || !strings.Contains(r.Failure, "took the store down") {
		t.Fatalf("failure %q", r.Failure)
	}
	st.down.Store(false)
}

func TestRestorePreparationRetriesWhileStoreIsDown(t *testing.T) {
	st := newStore(t)
	st.down.Store(true)
	meta := &checkpoint.Metadata{JobID: "old", Tenant: "default", ID: 3, MaxParallelism: 128}
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) { c.Blob, c.Restore = st, meta })
	// One try fails twice (the sweep's delete and list); a third failure
	// is the retry, 200ms later, long after the loop published RUNNING.
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := st.fails.Load(); n < 3 {
			return fmt.Errorf("%d store calls failed, want at least 3 (the restore preparation retried)", n)
		}
		return nil
	})
	if d, _, _ := h.gw.snapshot(); len(d) != 0 || h.jm.Details().State != Running {
		t.Fatalf("deployed while the store is down: %d, %s", len(d), h.jm.Details().State)
	}
	st.down.Store(false)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error { return deployed(h, 0, 2) })
	for _, d := range h.deploysOf(0) {
		if d.Restore == nil || d.Restore.CheckpointID != 3 || len(d.Restore.States) != 0 {
			t.Fatalf("restore %+v", d.Restore)
		}
	}
}

func TestSavepointCopiesStateAndOutlivesTheJob(t *testing.T) {
	h, st := startCP(t, wordcount(1, 2), jobconfig.Checkpoints{}, nil)
	h.allRunning(t)
	s, err := h.jm.TriggerSavepoint(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Savepoint || len(s.SavepointID) != 19 || !strings.HasPrefix(s.SavepointID, "sp-") || s.Status != checkpoint.StatusCompleted || s.ID != 1 {
		t.Fatalf("stats %+v", s)
	}
	spDir, _ := testKeys.Savepoint(s.SavepointID)
	if s.Location != spDir {
		t.Fatalf("location %s, want %s", s.Location, spDir)
	}
	trs, _ := h.gw.cpCalls()
	if len(trs) != 1 || !trs[0].tr.Savepoint || trs[0].tr.Stop {
		t.Fatalf("triggers %+v", trs)
	}
	m := readMeta(t, st, spDir)
	if !m.Savepoint || m.SavepointID != s.SavepointID || len(m.Tasks) != 3 {
		t.Fatalf("savepoint metadata %+v", m)
	}
	for _, ts := range m.Tasks {
		orig := cpDir(1) + strings.TrimPrefix(ts.State.Key, spDir)
		if !strings.HasPrefix(ts.State.Key, spDir) || st.read(t, ts.State.Key) != st.read(t, orig) {
			t.Fatalf("state %s is not a copy of %s", ts.State.Key, orig)
		}
	}
	// It is also the job's completed checkpoint.
	if cp := readMeta(t, st, cpDir(1)); cp.Savepoint || len(cp.Tasks) != 3 {
		t.Fatalf("checkpoint metadata %+v", cp)
	}
	h.jm.Cancel(context.Background())
	h.wait(t, Canceled)
	h.jm.Close()
	if cps, _ := testKeys.Checkpoints("j1"); len(st.keys(t, cps)) != 0 {
		t.Fatal("checkpoints left after cancel")
	}
	if len(st.keys(t, spDir)) != 4 {
		t.Fatalf("savepoint did not survive: %v", st.keys(t, spDir))
	}
	if _, err := h.jm.TriggerSavepoint(context.Background(), false); !errors.Is(err, rpcerr.ErrFailedPrecondition) {
		t.Fatalf("savepoint of an ended job: %v", err)
	}
}

func TestStopWithSavepointEndsFinished(t *testing.T) {
	h, st := startCP(t, wordcount(2, 2), periodic(time.Hour), nil)
	h.allRunning(t)
	s, err := h.jm.TriggerSavepoint(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	r := h.wait(t, Finished)
	if r.Restarts != 0 || r.Failure != "" {
		t.Fatalf("result %+v", r.Details)
	}
	trs, _ := h.gw.cpCalls()
	for _, c := range trs {
		if !c.tr.Stop || !c.tr.Savepoint {
			t.Fatalf("trigger %+v", c.tr)
		}
	}
	h.jm.Close()
	if m := readMeta(t, st, s.Location); !m.Savepoint || len(m.Tasks) != 4 {
		t.Fatalf("savepoint %+v", m)
	}
	_, cancels, _ := h.gw.snapshot()
	if len(cancels) != 4 {
		t.Fatalf("canceled %v", cancels)
	}
}

func TestSavepointAbortsAndStoppingJobKeepsRunning(t *testing.T) {
	h, _ := startCP(t, wordcount(1, 1), jobconfig.Checkpoints{}, func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			if tr.ID == 1 {
				return cpReply{decline: "state upload failed"}
			}
			return cpReply{}
		}
	})
	h.allRunning(t)
	_, err := h.jm.TriggerSavepoint(context.Background(), true)
	if !errors.Is(err, rpcerr.ErrUnavailable) || !strings.Contains(err.Error(), "declined: state upload failed") {
		t.Fatalf("aborted savepoint: %v", err)
	}
	if s := h.jm.Details().State; s != Running {
		t.Fatalf("state %s after an aborted stop-with-savepoint", s)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return toldAborted(h, 1) })
	// The next one works.
	if _, err := h.jm.TriggerSavepoint(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

func TestSavepointNeedsARunningJobAndAStore(t *testing.T) {
	h := start(t, wordcount(1, 1), nil)
	h.allRunning(t)
	if _, err := h.jm.TriggerSavepoint(context.Background(), false); !errors.Is(err, rpcerr.ErrFailedPrecondition) {
		t.Fatalf("no store: %v", err)
	}
	st := newStore(t)
	release := make(chan struct{})
	h2 := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Blob = st
		g.failDep = func(d control.Deployment) error {
			if d.Chain[0].ID == 1 {
				<-release // a slow TaskManager: the source stays DEPLOYING
			}
			return nil
		}
	})
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if d, _, _ := h2.gw.snapshot(); len(d) != 2 {
			return fmt.Errorf("%d tasks deployed, want 2", len(d))
		}
		return nil
	})
	_, err := h2.jm.TriggerSavepoint(context.Background(), false)
	close(release)
	if !errors.Is(err, rpcerr.ErrFailedPrecondition) || !strings.Contains(err.Error(), "until every task is RUNNING") {
		t.Fatalf("savepoint while deploying: %v", err)
	}
	h2.allRunning(t)
	h2.jm.Cancel(context.Background())
	h2.wait(t, Canceled)
	if _, err := h2.jm.TriggerSavepoint(context.Background(), false); !errors.Is(err, rpcerr.ErrFailedPrecondition) {
		t.Fatalf("canceled job: %v", err)
	}
}

func TestCheckpointReportsAreFencedAndLateAcksCleanedUp(t *testing.T) {
	// The sink declines checkpoint 1 once the source stored its state
	// (which it never acks): a later upload would outlive the abort's delete.
	srcStored := make(chan struct{})
	var once sync.Once
	h, st := startCP(t, wordcount(1, 1), jobconfig.Checkpoints{}, func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			if tr.ID == 1 {
				if d.Chain[0].ID == 4 {
					<-srcStored
					return cpReply{decline: "no"}
				}
				once.Do(func() { close(srcStored) })
			}
			return cpReply{ignore: true}
		}
	})
	h.allRunning(t)
	if _, err := h.jm.TriggerSavepoint(context.Background(), false); err == nil {
		t.Fatal("declined savepoint succeeded")
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error { return cpDirGone(t, st, 1, "declined") })
	d := h.deploysOf(0)[1]
	ctx := context.Background()
	key := cpDir(1) + checkpoint.StateObject(chainIDs(d), 0)
	st.write(t, key, "late")
	ack := checkpoint.Ack{ExecutionID: d.ExecutionID, CheckpointID: 1, State: &checkpoint.StateHandle{Key: key, KeyGroupEnd: 127}}
	for _, f := range []control.FencingToken{{LeaderSession: "s1", JobID: "j1", Attempt: 7}, {LeaderSession: "other", JobID: "j1", Attempt: 0}} {
		if err := h.jm.AcknowledgeCheckpoint(ctx, f, ack); !errors.Is(err, rpcerr.ErrStaleFencingToken) {
			t.Fatalf("ack with %+v: %v", f, err)
		}
		if err := h.jm.DeclineCheckpoint(ctx, f, checkpoint.Decline{ExecutionID: d.ExecutionID, CheckpointID: 1}); !errors.Is(err, rpcerr.ErrStaleFencingToken) {
			t.Fatalf("decline with %+v: %v", f, err)
		}
	}
	bad := ack
	bad.ExecutionID = "nope"
	if err := h.jm.AcknowledgeCheckpoint(ctx, d.Fencing, bad); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("unknown execution: %v", err)
	}
	if err := h.jm.DeclineCheckpoint(ctx, d.Fencing, checkpoint.Decline{ExecutionID: "nope", CheckpointID: 1}); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("unknown execution: %v", err)
	}
	// A late ack of the aborted checkpoint: accepted, its state deleted.
	if err := h.jm.AcknowledgeCheckpoint(ctx, d.Fencing, ack); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if st.exists(key) {
			return fmt.Errorf("late ack's state %s still stored, want it deleted", key)
		}
		return nil
	})

	// An ack naming state outside its checkpoint is refused and aborts it.
	go h.jm.TriggerSavepoint(ctx, false)
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if trs, _ := h.gw.cpCalls(); len(trs) != 2 {
			return fmt.Errorf("%d checkpoint triggers sent, want 2", len(trs))
		}
		return nil
	})
	src := h.deploysOf(0)[1]
	outside := checkpoint.Ack{ExecutionID: src.ExecutionID, CheckpointID: 2, State: &checkpoint.StateHandle{Key: "tenants/default/modules/x"}}
	if err := h.jm.AcknowledgeCheckpoint(ctx, src.Fencing, outside); !errors.Is(err, rpcerr.ErrInvalidArgument) {
		t.Fatalf("ack outside the checkpoint: %v", err)
	}
	if s := h.checkpoint(t, 2, checkpoint.StatusAborted); !strings.Contains(s.Reason, "bad acknowledgement") {
		t.Fatalf("reason %q", s.Reason)
	}
}

func TestFinishedTaskAbortsCheckpointAndStopsThePeriodicSchedule(t *testing.T) {
	h, _ := startCP(t, wordcount(1, 1), periodic(10*time.Millisecond), func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			return cpReply{ignore: d.Chain[0].ID == 4 && tr.ID == 2}
		}
	})
	h.checkpoint(t, 2, checkpoint.StatusInProgress)
	sink := h.deploysOf(0)[0]
	h.gw.report(sink, ExecFinished, "", nil, nil)
	s := h.checkpoint(t, 2, checkpoint.StatusAborted)
	if !strings.Contains(s.Reason, `task "count -> out" subtask 1/1 finished before it acknowledged checkpoint 2`) {
		t.Fatalf("reason %q", s.Reason)
	}
	if h.jm.Details().State != Running {
		t.Fatal("a finished task is no failure")
	}
	// No checkpoint starts once a task finished.
	n := len(h.jm.Checkpoints())
	src := h.deploysOf(0)[1]
	h.gw.report(src, ExecFinished, "", nil, nil)
	h.wait(t, Finished)
	if m := len(h.jm.Checkpoints()); m != n {
		t.Fatalf("%d checkpoints after a task finished, had %d", m, n)
	}
}

func TestTriggerRaceWithAFinishingSourceIsNoFailure(t *testing.T) {
	cc := periodic(10 * time.Millisecond)
	cc.TolerableFailures = 0
	h, _ := startCP(t, wordcount(1, 1), cc, func(c *Config, g *fakeGateway) {
		g.failTrigger = func(d control.Deployment, tr checkpoint.Trigger) error {
			if tr.ID == 1 {
				return rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "task %s is not running", d.ExecutionID)
			}
			return nil
		}
	})
	h.checkpoint(t, 1, checkpoint.StatusAborted)
	h.checkpoint(t, 2, checkpoint.StatusCompleted)
	if d := h.jm.Details(); d.State != Running || d.Restarts != 0 {
		t.Fatalf("state %s restarts %d", d.State, d.Restarts)
	}
}

func TestMaxConcurrentCheckpoints(t *testing.T) {
	cc := periodic(5 * time.Millisecond)
	cc.MaxConcurrent = 2
	cc.Timeout = 300 * time.Millisecond
	h, _ := startCP(t, wordcount(1, 1), cc, func(c *Config, g *fakeGateway) {
		g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
			return cpReply{ignore: true}
		}
	})
	// With two in flight the third starts only once the first expired,
	// though the interval is far shorter than the timeout.
	byID := func(id int64) (checkpoint.Stats, bool) {
		for _, s := range h.jm.Checkpoints() {
			if s.ID == id {
				return s, true
			}
		}
		return checkpoint.Stats{}, false
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if _, ok := byID(3); !ok {
			return fmt.Errorf("no third checkpoint yet: %+v", h.jm.Checkpoints())
		}
		return nil
	})
	// One of the first two expired to make room (their expiry timers
	// may fire in either order on a loaded machine), and no earlier than a
	// timeout after the first was triggered.
	s1, _ := byID(1)
	s2, _ := byID(2)
	s3, _ := byID(3)
	expired := func(s checkpoint.Stats) bool {
		return s.Status == checkpoint.StatusAborted && strings.Contains(s.Reason, "expired")
	}
	if !expired(s1) && !expired(s2) || s3.Triggered.Sub(s1.Triggered) < cc.Timeout {
		t.Fatalf("checkpoint 3 %+v started while checkpoints 1 %+v and 2 %+v were in flight: at most 2 at a time", s3, s1, s2)
	}
}
