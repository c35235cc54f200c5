package checkpointing

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

var keys, _ = blob.ForTenant("default")

// The job of these tests: a text source chain (vertices 1-3, execution
// "src") feeding a keyed chain "count -> out" of parallelism 2 ("k0",
// "k1").
var tasks = []Task{
	{ExecutionID: "src", Name: "lines -> split -> by word", Subtask: 0, Parallelism: 1, Vertices: []int{1, 2, 3}, Source: true, TextSource: true},
	{ExecutionID: "k0", Name: "count -> out", Subtask: 0, Parallelism: 2, Vertices: []int{4, 5}},
	{ExecutionID: "k1", Name: "count -> out", Subtask: 1, Parallelism: 2, Vertices: []int{4, 5}},
}

var splits = map[int][]checkpoint.Split{1: {{Key: "in/a", Length: 10}, {Key: "in/b", Length: 10}}}

var t0 = time.Unix(1_700_000_000, 0)

func config() Config {
	return Config{
		JobID: "j1", Tenant: "default", ModuleDigest: "sha256-00", MaxParallelism: 128, Keys: keys, Store: true,
		Interval: 10 * time.Millisecond, Timeout: 10 * time.Second, MaxConcurrent: 1, Retained: 1, TolerableFailures: -1,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewSavepointID: func() string { return "sp-0123456789abcdef" },
	}
}

func dir(id int64) string {
	d, _ := keys.Checkpoint("j1", uint64(id))
	return d
}

func ack(id int64, exec string) Acked {
	return Acked{Ack: checkpoint.Ack{ExecutionID: exec, CheckpointID: id,
		State: &checkpoint.StateHandle{Key: dir(id) + exec + ".state", Size: 10, KeyGroupEnd: 127}}}
}

// aligned is a with the task's barrier alignment.
func aligned(a Acked, d time.Duration) Acked { a.Ack.Alignment = d; return a }

func acks(id int64) []Event { return []Event{ack(id, "src"), ack(id, "k0"), ack(id, "k1")} }

// step is one event, seen with the view the test keeps (changed by at and
// view first), and the commands it must give, as render writes them.
type step struct {
	ev   Event
	at   time.Duration // the monotonic clock, from t0
	view func(*View)   // changes the view from now on
	want []string
	err  error // the kind Handle must return
}

// run feeds steps to a coordinator of cfg whose attempt 0 is deployed and
// runs; it returns the coordinator.
func run(t *testing.T, cfg Config, steps ...step) *Coordinator {
	t.Helper()
	c := New(cfg)
	v := View{Running: true, AllRunning: true, State: "RUNNING", Now: t0, Mono: t0}
	if _, err := c.Handle(v, Deployed{Tasks: tasks, Splits: splits}); err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if s.view != nil {
			s.view(&v)
		}
		v.Mono = t0.Add(s.at)
		v.Now = t0.Add(s.at)
		cmds, err := c.Handle(v, s.ev)
		var got []string
		for _, cmd := range cmds {
			got = append(got, render(cmd))
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d %T%+v:\ngot  %q\nwant %q", i, s.ev, s.ev, got, s.want)
		}
		if (s.err == nil) != (err == nil) || (err != nil && !errors.Is(err, s.err)) {
			t.Fatalf("step %d %T: error %v, want %v", i, s.ev, err, s.err)
		}
	}
	return c
}

// many are steps for several events that must give no command.
func quiet(evs ...Event) []step {
	out := make([]step, len(evs))
	for i, ev := range evs {
		out[i] = step{ev: ev}
	}
	return out
}

func steps(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("steps: %T", p))
		}
	}
	return out
}

var cpDigits = regexp.MustCompile(`tenants/default/jobs/j1/checkpoints/0*(\d+)/`)

// short writes keys of the tests' job briefly: cp1/…, sp/….
func short(key string) string {
	key = cpDigits.ReplaceAllString(key, "cp$1/")
	return strings.ReplaceAll(key, "tenants/default/savepoints/sp-0123456789abcdef/", "sp/")
}

func kind(err error) string {
	for _, k := range []struct {
		name string
		err  error
	}{
		{"Unavailable", rpcerr.ErrUnavailable}, {"DeadlineExceeded", rpcerr.ErrDeadlineExceeded},
		{"FailedPrecondition", rpcerr.ErrFailedPrecondition}, {"Internal", rpcerr.ErrInternal},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "?"
}

func render(c Command) string {
	switch c := c.(type) {
	case ArmTick:
		return fmt.Sprintf("tick a%d +%v", c.Attempt, c.After)
	case SendTrigger:
		s := fmt.Sprintf("trigger %d -> %s", c.Trigger.ID, c.ExecutionID)
		if c.Trigger.Savepoint {
			s += " savepoint"
		}
		if c.Trigger.Stop {
			s += " stop"
		}
		return s
	case ArmExpiry:
		return fmt.Sprintf("expiry %d +%v", c.ID, c.After)
	case DisarmExpiry:
		return fmt.Sprintf("disarm %d", c.ID)
	case WriteMetadata:
		s := fmt.Sprintf("write %d %s", c.ID, short(c.Dir))
		if c.SavepointMeta != nil {
			s += fmt.Sprintf(" after %d copies and %s", len(c.Copies), short(c.SavepointDir))
		}
		return s
	case CommitSinkParts:
		return fmt.Sprintf("commit %d (%d parts)", c.ID, len(c.Parts))
	case Notify:
		if c.Completed {
			return fmt.Sprintf("notify %d completed", c.ID)
		}
		return fmt.Sprintf("notify %d aborted", c.ID)
	case DeleteDirs:
		dirs := make([]string, len(c.Dirs))
		for i, d := range c.Dirs {
			dirs[i] = short(d)
		}
		return fmt.Sprintf("delete %s %d: %s", c.What, c.ID, strings.Join(dirs, " "))
	case DeleteState:
		return fmt.Sprintf("delete state %d: %s", c.ID, short(c.Key))
	case AnswerSavepoint:
		if c.Err != nil {
			return fmt.Sprintf("answer w%d %s: %v", c.Waiter, kind(c.Err), c.Err)
		}
		return fmt.Sprintf("answer w%d %s %s", c.Waiter, c.Stats.Status, short(c.Stats.Location))
	case StopTasks:
		return "stop tasks"
	case FailJob:
		return "fail: " + c.Cause
	case Proceed:
		return "proceed"
	}
	return fmt.Sprintf("%T", c)
}

// The commands of checkpoint id's start and completion in the tests' job.
func triggered(id int64) []string {
	return []string{fmt.Sprintf("trigger %d -> src", id), fmt.Sprintf("expiry %d +10s", id)}
}

func startTick() step {
	return step{ev: TaskStarted{}, want: []string{"tick a0 +10ms"}}
}

func tickStep(id int64) step {
	return step{ev: Tick{}, want: append(triggered(id), "tick a0 +10ms")}
}

// acked is the three acks of id; the last one has its metadata written.
func acked(id int64) []step {
	s := quiet(acks(id)...)
	s[2].want = []string{fmt.Sprintf("write %d cp%d/", id, id)}
	return s
}

func completed(id int64, extra ...string) step {
	return step{ev: Written{ID: id}, want: append(append([]string{fmt.Sprintf("disarm %d", id), fmt.Sprintf("notify %d completed", id)}, extra...), "proceed")}
}

func aborted(id int64) []string {
	return []string{fmt.Sprintf("disarm %d", id), fmt.Sprintf("notify %d aborted", id), fmt.Sprintf("delete aborted checkpoint %d: cp%d/", id, id)}
}

func stat(t *testing.T, c *Coordinator, id int64) checkpoint.Stats {
	t.Helper()
	for _, s := range c.Stats() {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no checkpoint %d in %+v", id, c.Stats())
	return checkpoint.Stats{}
}

func TestPeriodicCheckpoint(t *testing.T) {
	notAll := func(v *View) { v.AllRunning = false }
	all := func(v *View) { v.AllRunning = true }
	tests := []struct {
		name  string
		cfg   func(*Config)
		steps []step
		check func(*testing.T, *Coordinator)
	}{{
		name: "acks complete it, the metadata is written only after the last",
		steps: steps(startTick(), tickStep(1),
			step{ev: aligned(ack(1, "k0"), 3*time.Millisecond)}, step{ev: ack(1, "src")},
			step{ev: ack(1, "k0")}, // repeated: nothing
			step{ev: Written{ID: 1}},
			step{ev: aligned(ack(1, "k1"), 7*time.Millisecond), want: []string{"write 1 cp1/"}},
			step{ev: Tick{}, want: []string{"tick a0 +10ms"}}, // one at a time
			completed(1),
			tickStep(2)),
		check: func(t *testing.T, c *Coordinator) {
			if s := stat(t, c, 1); s.Status != checkpoint.StatusCompleted || s.Location != dir(1) || s.Size != 30 || s.Alignment != 7*time.Millisecond {
				t.Fatalf("stats %+v", s)
			}
			if s := stat(t, c, 2); s.Status != checkpoint.StatusInProgress {
				t.Fatalf("stats %+v", s)
			}
			if l := c.Latest(); l == nil || l.ID != 1 || !slices.Equal(c.Completed(), []int64{1}) {
				t.Fatalf("latest %+v completed %v", l, c.Completed())
			}
		},
	}, {
		name: "no schedule until every task runs, and none after one finished",
		steps: steps(
			step{ev: TaskStarted{}, view: notAll},
			step{ev: TaskStarted{}, view: all, want: []string{"tick a0 +10ms"}},
			step{ev: TaskStarted{}}, // armed once
			step{ev: TaskFinished{ExecutionID: "k1"}, view: notAll},
			step{ev: Tick{}}, // not re-armed
			step{ev: TaskStarted{}}),
	}, {
		name: "a decline aborts it; the next one goes on",
		steps: steps(startTick(), tickStep(1), step{ev: ack(1, "src")},
			step{ev: Declined{Decline: checkpoint.Decline{ExecutionID: "k1", CheckpointID: 1, Reason: "disk full"}}, want: aborted(1)},
			step{ev: ack(1, "k0"), want: []string{"delete state 1: cp1/k0.state"}}, // late: its state goes
			step{ev: Declined{Decline: checkpoint.Decline{ExecutionID: "k0", CheckpointID: 1}}},
			tickStep(2)),
		check: func(t *testing.T, c *Coordinator) {
			if s := stat(t, c, 1); s.Status != checkpoint.StatusAborted || s.Reason != `task "count -> out" subtask 2/2 declined: disk full` {
				t.Fatalf("stats %+v", s)
			}
		},
	}, {
		name: "it expires, naming the tasks that did not ack",
		steps: steps(startTick(), tickStep(1), step{ev: ack(1, "k0")},
			step{ev: Expired{ID: 1}, want: aborted(1)},
			step{ev: Expired{ID: 1}}),
		check: func(t *testing.T, c *Coordinator) {
			want := `checkpoint 1 expired after 10s before all tasks acknowledged (missing: "lines -> split -> by word" 1/1, "count -> out" 2/2)`
			if s := stat(t, c, 1); s.Reason != want {
				t.Fatalf("reason %q\nwant   %q", s.Reason, want)
			}
		},
	}, {
		name: "more failures in a row than tolerable fail the job; a completion resets the count",
		cfg:  func(c *Config) { c.TolerableFailures = 1 },
		steps: steps(startTick(), tickStep(1), step{ev: Expired{ID: 1}, want: aborted(1)},
			tickStep(2), acked(2), completed(2),
			tickStep(3), step{ev: Expired{ID: 3}, want: aborted(3)},
			tickStep(4), step{ev: TriggerFailed{ID: 4, ExecutionID: "src", Err: rpcerr.Errorf(rpcerr.ErrUnavailable, "unreachable")},
				want: append(aborted(4), `fail: checkpoint 4 failed: trigger at task "lines -> split -> by word" subtask 1/1: unreachable (more than 1 checkpoints failed in a row)`)}),
	}, {
		name: "a trigger that meets a source not running is no failure",
		cfg:  func(c *Config) { c.TolerableFailures = 0 },
		steps: steps(startTick(), tickStep(1),
			step{ev: TriggerFailed{ID: 1, ExecutionID: "src", Err: rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "not running")}, want: aborted(1)},
			tickStep(2),
			step{ev: TriggerFailed{ID: 2, ExecutionID: "src", Err: rpcerr.Errorf(rpcerr.ErrNotFound, "no such task")}, want: aborted(2)}),
	}, {
		name: "at most MaxConcurrent in flight",
		cfg:  func(c *Config) { c.MaxConcurrent = 2 },
		steps: steps(startTick(), tickStep(1), tickStep(2),
			step{ev: Tick{}, want: []string{"tick a0 +10ms"}},
			step{ev: Tick{}, want: []string{"tick a0 +10ms"}},
			acked(1), completed(1),
			tickStep(3)),
	}, {
		name: "MinPause: none in flight with another, and a pause after the last one ended",
		cfg:  func(c *Config) { c.MinPause = 50 * time.Millisecond; c.MaxConcurrent = 3 },
		steps: steps(startTick(), tickStep(1),
			step{ev: Tick{}, want: []string{"tick a0 +10ms"}},
			acked(1), step{ev: Written{ID: 1}, at: 20 * time.Millisecond, want: []string{"disarm 1", "notify 1 completed", "proceed"}},
			step{ev: Tick{}, at: 30 * time.Millisecond, want: []string{"tick a0 +40ms"}},
			step{ev: Tick{}, at: 70 * time.Millisecond, want: append(triggered(2), "tick a0 +10ms")}),
	}, {
		name: "a finished task aborts the checkpoints that wait for it",
		steps: steps(startTick(), tickStep(1), step{ev: ack(1, "k1")},
			step{ev: TaskFinished{ExecutionID: "k1"}, view: notAll}, // it acked: no abort
			step{ev: TaskFinished{ExecutionID: "k0"}, want: aborted(1)},
			step{ev: Tick{}}),
		check: func(t *testing.T, c *Coordinator) {
			if s := stat(t, c, 1); !strings.Contains(s.Reason, `task "count -> out" subtask 1/2 finished before it acknowledged checkpoint 1`) {
				t.Fatalf("reason %q", s.Reason)
			}
		},
	}, {
		name: "subsumed checkpoints are deleted beyond Retained, never the restore point",
		cfg:  func(c *Config) { c.Retained = 2 },
		steps: steps(startTick(),
			tickStep(1), acked(1), completed(1),
			tickStep(2), acked(2), completed(2),
			tickStep(3), acked(3), completed(3, "delete subsumed checkpoint 1: cp1/")),
		check: func(t *testing.T, c *Coordinator) {
			if !slices.Equal(c.Completed(), []int64{2, 3}) || c.Latest().ID != 3 {
				t.Fatalf("completed %v latest %d", c.Completed(), c.Latest().ID)
			}
		},
	}, {
		name: "a bad ack is refused and aborts the checkpoint",
		steps: steps(startTick(), tickStep(1),
			step{ev: Acked{Ack: checkpoint.Ack{ExecutionID: "k0", CheckpointID: 1, State: &checkpoint.StateHandle{Key: "tenants/default/modules/x"}}},
				want: aborted(1), err: rpcerr.ErrInvalidArgument},
			tickStep(2),
			step{ev: Acked{Ack: checkpoint.Ack{ExecutionID: "k0", CheckpointID: 2, SinkParts: []checkpoint.SinkPart{{Pending: "tenants/default/files/x", Final: "tenants/default/files/y"}}}},
				want: aborted(2), err: rpcerr.ErrInvalidArgument}),
		check: func(t *testing.T, c *Coordinator) {
			if s := stat(t, c, 1); !strings.Contains(s.Reason, `task "count -> out" subtask 1/2 sent a bad acknowledgement: state "tenants/default/modules/x"`) {
				t.Fatalf("reason %q", s.Reason)
			}
		},
	}, {
		name: "a failed write aborts it (counted), and what waited for it proceeds",
		cfg:  func(c *Config) { c.TolerableFailures = 0 },
		steps: steps(startTick(), tickStep(1), acked(1),
			step{ev: Written{ID: 1, Err: errors.New("store down")}, want: append(aborted(1), "fail: checkpoint 1 failed: store down (more than 0 checkpoints failed in a row)", "proceed")}),
		check: func(t *testing.T, c *Coordinator) {
			if c.Writing() || c.Latest() != nil {
				t.Fatal("an aborted write is the restore point")
			}
		},
	}, {
		name: "directories not deleted are deleted again after the next completion",
		steps: steps(startTick(), tickStep(1), step{ev: Expired{ID: 1}, want: aborted(1)},
			step{ev: DeleteFailed{ID: 1, Dir: dir(1)}},
			tickStep(2), acked(2), completed(2, "delete aborted checkpoint (again) 1: cp1/"),
			tickStep(3), acked(3), completed(3, "delete subsumed checkpoint 2: cp2/")),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			c := run(t, cfg, tc.steps...)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestSinkPartsCommittedAfterTheMetadata(t *testing.T) {
	job, _ := keys.Job("j1")
	part := func(exec string) checkpoint.SinkPart {
		return checkpoint.SinkPart{Pending: job + "pending/" + exec, Final: "tenants/default/files/out/" + exec}
	}
	withPart := func(id int64, exec string) Acked {
		a := ack(id, exec)
		a.Ack.SinkParts = []checkpoint.SinkPart{part(exec), part("shared")}
		return a
	}
	ended := func(v *View) { v.Running = false }
	c := run(t, config(), steps(startTick(), tickStep(1),
		step{ev: withPart(1, "k0")}, step{ev: withPart(1, "k1")},
		step{ev: ack(1, "src"), want: []string{"write 1 cp1/"}},
		step{ev: Written{ID: 1}, want: []string{"commit 1 (3 parts)"}},
		step{ev: Tick{}, want: []string{"tick a0 +10ms"}},
		step{ev: Committed{ID: 1}, want: []string{"disarm 1", "notify 1 completed", "proceed"}},
		tickStep(2),
		step{ev: withPart(2, "k0")}, step{ev: ack(2, "k1")},
		step{ev: ack(2, "src"), want: []string{"write 2 cp2/"}},
		// The attempt ended meanwhile: complete without committing (a
		// restore commits the parts) and without telling the tasks.
		step{ev: Written{ID: 2}, view: ended, want: []string{"disarm 2", "delete subsumed checkpoint 1: cp1/", "proceed"}})...)
	if c.Latest().ID != 2 || len(c.Latest().SinkParts) != 2 {
		t.Fatalf("latest %+v", c.Latest())
	}
}

func TestSavepoints(t *testing.T) {
	const sp = "tenants/default/savepoints/sp-0123456789abcdef/"
	spTriggered := func(id int64, stop bool) []string {
		tr := fmt.Sprintf("trigger %d -> src savepoint", id)
		if stop {
			tr += " stop"
		}
		return []string{tr, fmt.Sprintf("expiry %d +10s", id)}
	}
	spAcked := func(id int64) []step {
		s := quiet(acks(id)...)
		s[2].want = []string{fmt.Sprintf("write %d cp%d/ after 3 copies and sp/", id, id)}
		return s
	}
	tests := []struct {
		name  string
		cfg   func(*Config)
		steps []step
	}{{
		name: "while a periodic checkpoint is in flight",
		steps: steps(startTick(), tickStep(1),
			step{ev: SavepointRequested{Waiter: 7}, want: spTriggered(2, false)},
			step{ev: Tick{}, want: []string{"tick a0 +10ms"}}, // savepoints do not count against MaxConcurrent
			spAcked(2),
			step{ev: Written{ID: 2}, want: []string{"disarm 2", "notify 2 completed", "answer w7 COMPLETED sp/", "proceed"}},
			// 1 completes after the newer savepoint: it is subsumed at once.
			acked(1),
			step{ev: Written{ID: 1}, want: []string{"disarm 1", "notify 1 completed", "delete subsumed checkpoint 1: cp1/", "proceed"}}),
	}, {
		name: "stop with savepoint: no checkpoint after its barrier, the tasks stop once it completed",
		steps: steps(startTick(),
			step{ev: SavepointRequested{Stop: true, Waiter: 1}, want: spTriggered(1, true)},
			step{ev: Tick{}}, // not re-armed
			step{ev: SavepointRequested{Waiter: 2}, want: []string{"answer w2 FailedPrecondition: job j1: a stop-with-savepoint is in progress"}},
			spAcked(1),
			step{ev: Written{ID: 1}, want: []string{"disarm 1", "notify 1 completed", "answer w1 COMPLETED sp/", "stop tasks", "proceed"}},
			step{ev: SavepointRequested{Waiter: 3}, want: []string{"answer w3 FailedPrecondition: job j1: cannot take a savepoint while the job is stopping: wait until it is RUNNING"}},
			step{ev: TaskStarted{}}),
	}, {
		name: "a stop whose job failed before it completed answers so",
		steps: steps(
			step{ev: SavepointRequested{Stop: true, Waiter: 1}, want: spTriggered(1, true)},
			spAcked(1),
			step{ev: Written{ID: 1}, view: func(v *View) { v.Running, v.Failure = false, "boom" }, want: []string{"disarm 1",
				"answer w1 Unavailable: savepoint sp-0123456789abcdef completed at " + sp + " but the job failed before it could stop (boom): it keeps running from its restart", "proceed"}}),
	}, {
		name: "a declined one answers why, is not counted, and the job goes on",
		cfg:  func(c *Config) { c.TolerableFailures = 0 },
		steps: steps(
			step{ev: SavepointRequested{Stop: true, Waiter: 1}, want: spTriggered(1, true)},
			step{ev: Declined{Decline: checkpoint.Decline{ExecutionID: "src", CheckpointID: 1, Reason: "upload failed"}}, want: append(aborted(1),
				`answer w1 Unavailable: savepoint of job j1 aborted: task "lines -> split -> by word" subtask 1/1 declined: upload failed`)},
			step{ev: SavepointRequested{Waiter: 2}, want: spTriggered(2, false)}),
	}, {
		name: "an expired one answers DeadlineExceeded",
		steps: steps(
			step{ev: SavepointRequested{Waiter: 1}, want: spTriggered(1, false)},
			step{ev: Expired{ID: 1}, want: append(aborted(1), `answer w1 DeadlineExceeded: savepoint of job j1 aborted: checkpoint 1 expired after 10s before all tasks acknowledged (missing: "lines -> split -> by word" 1/1, "count -> out" 1/2, "count -> out" 2/2)`)}),
	}, {
		name: "a failed write deletes the savepoint's directory too",
		steps: steps(
			step{ev: SavepointRequested{Waiter: 1}, want: spTriggered(1, false)},
			spAcked(1),
			step{ev: Written{ID: 1, Err: errors.New("copy failed")}, want: []string{"disarm 1", "notify 1 aborted", "delete aborted checkpoint 1: cp1/ sp/",
				"answer w1 Unavailable: savepoint of job j1 aborted: copy failed", "proceed"}}),
	}, {
		name: "refused unless every task runs",
		steps: steps(
			step{ev: SavepointRequested{Waiter: 1}, view: func(v *View) { v.AllRunning = false },
				want: []string{"answer w1 FailedPrecondition: job j1: cannot take a savepoint until every task is RUNNING (some are deploying or have finished)"}},
			step{ev: SavepointRequested{Waiter: 2}, view: func(v *View) { v.AllRunning, v.Finishing = true, true },
				want: []string{"answer w2 FailedPrecondition: job j1: cannot take a savepoint while the job is finishing: wait until it is RUNNING"}},
			step{ev: SavepointRequested{Waiter: 3}, view: func(v *View) { v.Finishing, v.Running, v.State = false, false, "FAILING" },
				want: []string{"answer w3 FailedPrecondition: job j1: cannot take a savepoint while the job is FAILING: wait until it is RUNNING"}}),
	}, {
		name: "refused without a store",
		cfg:  func(c *Config) { c.Store = false },
		steps: steps(step{ev: SavepointRequested{Waiter: 1},
			want: []string{"answer w1 FailedPrecondition: job j1: no blob store to keep savepoints in: configure the JobManager's blob store"}}),
	}, {
		name: "one in flight when the job ends is answered",
		steps: steps(startTick(), tickStep(1),
			step{ev: SavepointRequested{Waiter: 1}, want: spTriggered(2, false)},
			step{ev: JobEnded{}, view: func(v *View) { v.Running, v.State = false, "CANCELED" }, want: []string{"disarm 1", "disarm 2",
				"answer w1 Unavailable: savepoint of job j1: the job ended CANCELED before the checkpoint completed"}}),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			run(t, cfg, tc.steps...)
		})
	}
}

func TestAttempts(t *testing.T) {
	attempt1 := func(v *View) { v.Attempt = 1; v.AllRunning = false }
	cfg := config()
	cfg.MaxConcurrent = 2
	c := run(t, cfg, steps(startTick(), tickStep(1), tickStep(2), acked(2),
		// The attempt fails: checkpoints collecting acks abort, those
		// writing go on.
		step{ev: AttemptEnding{Reason: "the job is failing: boom"}, want: aborted(1)},
		step{ev: Restarted{}, view: attempt1},
		step{ev: Tick{Attempt: 0}}, // the old attempt's timer
		step{ev: Written{ID: 2}, want: []string{"disarm 2", "proceed"}},
		// Late acks of the old attempt: the state of an aborted checkpoint
		// goes, that of a completed one stays.
		step{ev: LateAck{Ack: ack(1, "k0").Ack}, want: []string{"delete state 1: cp1/k0.state"}},
		step{ev: LateAck{Ack: ack(2, "k0").Ack}},
		step{ev: LateAck{Ack: checkpoint.Ack{ExecutionID: "k0", CheckpointID: 1, State: &checkpoint.StateHandle{Key: "tenants/default/modules/x"}}}},
		step{ev: Deployed{Tasks: tasks, Splits: splits}},
		step{ev: TaskStarted{}, view: func(v *View) { v.AllRunning = true }, want: []string{"tick a1 +10ms"}},
		// Ids go on across attempts.
		step{ev: Tick{Attempt: 1}, want: append(triggered(3), "tick a1 +10ms")})...)
	if c.Latest().ID != 2 {
		t.Fatalf("restore point %d", c.Latest().ID)
	}
	if s := stat(t, c, 1); s.Reason != "the job is failing: boom" {
		t.Fatalf("reason %q", s.Reason)
	}
}

func TestMetadata(t *testing.T) {
	c := New(config())
	v := View{Running: true, AllRunning: true, State: "RUNNING", Now: t0, Mono: t0}
	c.Handle(v, Deployed{Tasks: tasks, Splits: splits})
	c.Handle(v, SavepointRequested{Waiter: 1})
	rest, _ := splits[1][1].Rest(4)
	src := ack(1, "src")
	src.Ack.Source = &checkpoint.SourcePosition{Finished: []string{splits[1][0].ID()}, Current: &rest}
	c.Handle(v, src)
	c.Handle(v, ack(1, "k0"))
	v.Now = t0.Add(time.Second)
	cmds, _ := c.Handle(v, ack(1, "k1"))
	if len(cmds) != 1 {
		t.Fatalf("commands %v", cmds)
	}
	w := cmds[0].(WriteMetadata)
	m := w.Meta
	if m.JobID != "j1" || m.Tenant != "default" || m.ID != 1 || m.ModuleDigest != "sha256-00" || m.MaxParallelism != 128 ||
		m.TriggeredMs != t0.UnixMilli() || m.CompletedMs != t0.Add(time.Second).UnixMilli() || m.Savepoint || len(m.Tasks) != 3 {
		t.Fatalf("metadata %+v", m)
	}
	if got := fmt.Sprint(m.Sources); got != fmt.Sprint(map[int][]checkpoint.Split{1: {rest}}) {
		t.Fatalf("sources %s: a was read, b from byte 4", got)
	}
	for i, ts := range m.Tasks {
		if ts.State.Key != dir(1)+tasks[i].ExecutionID+".state" || ts.Subtask != tasks[i].Subtask || !slices.Equal(ts.Vertices, tasks[i].Vertices) {
			t.Fatalf("task state %d %+v", i, ts)
		}
		sp := w.SavepointMeta.Tasks[i]
		if cp := w.Copies[i]; cp.From != ts.State.Key || cp.To != sp.State.Key || short(cp.To) != "sp/"+tasks[i].ExecutionID+".state" {
			t.Fatalf("copy %+v of %+v", cp, sp)
		}
	}
	if s := w.SavepointMeta; !s.Savepoint || s.SavepointID != "sp-0123456789abcdef" || short(w.SavepointDir) != "sp/" {
		t.Fatalf("savepoint metadata %+v in %s", s, w.SavepointDir)
	}
}

func TestStatsNewestFirstAndBounded(t *testing.T) {
	var s []step
	s = append(s, startTick())
	for id := int64(1); id <= maxHistory+5; id++ {
		s = append(s, tickStep(id), step{ev: Expired{ID: id}, want: aborted(id)})
	}
	c := run(t, config(), s...)
	st := c.Stats()
	if len(st) != maxHistory || st[0].ID != maxHistory+5 {
		t.Fatalf("%d stats, newest %d", len(st), st[0].ID)
	}
	// The counts cover every checkpoint, beyond the history.
	if got := c.Counts(); got != (Counts{Failed: maxHistory + 5}) {
		t.Fatalf("counts %+v, want %d failed", got, maxHistory+5)
	}
	for i := 1; i < len(st); i++ {
		if st[i-1].ID <= st[i].ID {
			t.Fatalf("not newest first at %d", i)
		}
	}
	if id := strconv.FormatInt(st[len(st)-1].ID, 10); id != "6" {
		t.Fatalf("oldest kept %s", id)
	}
}

// TestDiscoveredSplits: splits a following source's relist found after
// deploy are among a checkpoint's remaining splits until read (one read to
// the end before the barrier is not), and every key found, read or not,
// is in the metadata's Discovered.
func TestDiscoveredSplits(t *testing.T) {
	c := New(config())
	v := View{Running: true, AllRunning: true, State: "RUNNING", Now: t0, Mono: t0}
	c.Handle(v, Deployed{Tasks: tasks, Splits: splits, Discovered: map[int][]string{1: {"in/a", "in/b"}}})
	found := []checkpoint.Split{{Key: "in/c", Length: 5}, {Key: "in/d", Length: 7}}
	c.Handle(v, SplitsDiscovered{Vertex: 1, Splits: found, Keys: []string{"in/c", "in/d"}})
	c.Handle(v, SavepointRequested{Waiter: 1})
	src := ack(1, "src")
	src.Ack.Source = &checkpoint.SourcePosition{Finished: []string{splits[1][0].ID(), found[0].ID()}}
	c.Handle(v, src)
	c.Handle(v, ack(1, "k0"))
	cmds, _ := c.Handle(v, ack(1, "k1"))
	if len(cmds) != 1 {
		t.Fatalf("commands %v", cmds)
	}
	m := cmds[0].(WriteMetadata).Meta
	if got, want := fmt.Sprint(m.Sources), fmt.Sprint(map[int][]checkpoint.Split{1: {splits[1][1], found[1]}}); got != want {
		t.Errorf("sources %s, want %s (a and c read; b and the discovered d left)", got, want)
	}
	if got := fmt.Sprint(m.Discovered); got != fmt.Sprint(map[int][]string{1: {"in/a", "in/b", "in/c", "in/d"}}) {
		t.Errorf("discovered %s, want every key found", got)
	}
	// A source that does not follow its paths has no Discovered.
	c2 := New(config())
	c2.Handle(v, Deployed{Tasks: tasks, Splits: splits})
	c2.Handle(v, SplitsDiscovered{Vertex: 1, Splits: found, Keys: []string{"in/c"}})
	c2.Handle(v, SavepointRequested{Waiter: 1})
	for _, a := range acks(1) {
		cmds, _ = c2.Handle(v, a)
	}
	if m := cmds[0].(WriteMetadata).Meta; m.Discovered != nil || len(m.Sources[1]) != 2 {
		t.Errorf("fixed source: discovered %v, sources %v", m.Discovered, m.Sources)
	}
}
