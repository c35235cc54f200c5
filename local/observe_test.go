package local_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// guestLines returns the messages of lines whose message starts with
// prefix, in order.
func guestLines(lines []client.LogLine, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l.Message, prefix) {
			out = append(out, l.Message)
		}
	}
	return out
}

func hasMessage(lines []client.LogLine, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l.Message, sub) {
			return true
		}
	}
	return false
}

func TestJobLogsComeBackExactly(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 2})
	chatty := localtest.Guest(t, "local/testdata/chatty")
	cl := c.Client()
	ctx := context.Background()

	id := localtest.SubmitJob(t, c, chatty, []string{"log", "50"}, 1)
	localtest.WaitFinished(t, c, id)
	lines, err := cl.Logs(ctx, id, client.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	got := guestLines(lines, "line ")
	if len(got) != 50 {
		t.Fatalf("%d guest lines, want 50: %q", len(got), got)
	}
	for i, m := range got {
		if m != "line "+strconv.Itoa(i) {
			t.Fatalf("line %d is %q", i, m)
		}
	}
	for _, ev := range []string{"task deployed", "task running", "task finished", "done via the log import"} {
		if !hasMessage(lines, ev) {
			t.Errorf("no %q line among %d", ev, len(lines))
		}
	}
	for _, l := range lines {
		if l.JobID != id || l.Dropped != 0 || l.TaskManager == "" || l.Source == "" {
			t.Fatalf("line %+v", l)
		}
	}
	// The chain is "chatter -> drop"; --task takes an operator's name.
	if byTask, err := cl.Logs(ctx, id, client.LogQuery{Task: "chatter"}); err != nil || len(byTask) != len(lines) {
		t.Fatalf("--task chatter: %d lines, %v; want %d", len(byTask), err, len(lines))
	}
	if none, err := cl.Logs(ctx, id, client.LogQuery{Task: "nope"}); err != nil || len(none) != 0 {
		t.Fatalf("--task nope: %d lines, %v", len(none), err)
	}
	// Asking after the newest line gets nothing again.
	last := lines[len(lines)-1]
	if again, err := cl.Logs(ctx, id, client.LogQuery{After: map[string]uint64{last.Source: last.Seq}}); err != nil || len(again) != 0 {
		t.Fatalf("after the cursor: %d lines, %v", len(again), err)
	}

	// 1500 lines overflow the task's 1000-line ring: the oldest go, and the
	// first line kept says how many.
	id = localtest.SubmitJob(t, c, chatty, []string{"log", "1500"}, 1)
	localtest.WaitFinished(t, c, id)
	lines, err = cl.Logs(ctx, id, client.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || len(lines) > 1000 {
		t.Fatalf("%d lines kept of a 1000-line ring", len(lines))
	}
	if first := lines[0]; first.Dropped == 0 || first.Dropped != first.Seq-1 {
		t.Fatalf("first kept line %+v: want Dropped = Seq-1 > 0", first)
	}
	got = guestLines(lines, "line ")
	if got[len(got)-1] != "line 1499" {
		t.Fatalf("newest guest line %q, want line 1499", got[len(got)-1])
	}
	start, _ := strconv.Atoi(strings.TrimPrefix(got[0], "line "))
	for i, m := range got {
		if m != "line "+strconv.Itoa(start+i) {
			t.Fatalf("kept guest lines are not the newest in order: %q at %d (from %d)", m, i, start)
		}
	}
	if start == 0 {
		t.Fatal("no guest line was dropped")
	}
}

func TestFollowingLogsSeesEachLineOnce(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 1})
	cl := c.Client()
	ctx := context.Background()
	const n = 300
	id := localtest.SubmitJob(t, c, localtest.Guest(t, "local/testdata/chatty"), []string{"trickle", strconv.Itoa(n)}, 1)
	after := map[string]uint64{}
	var ticks []string
	polls := 0
	poll := func() {
		lines, err := cl.Logs(ctx, id, client.LogQuery{After: after})
		if err != nil {
			t.Fatal(err)
		}
		polls++
		for _, l := range lines {
			if l.Dropped != 0 {
				t.Fatalf("%d lines dropped while following", l.Dropped)
			}
			if l.Seq <= after[l.Source] {
				t.Fatalf("line %d of %s again (cursor %d)", l.Seq, l.Source, after[l.Source])
			}
			after[l.Source] = l.Seq
		}
		ticks = append(ticks, guestLines(lines, "tick ")...)
	}
	testutil.CheckFor(t, 3*time.Minute, 5*time.Millisecond, func() error {
		poll()
		d, err := cl.GetJob(ctx, id)
		if err != nil {
			return err
		}
		if !client.Terminal(d.State) {
			return fmt.Errorf("job %s, %d ticks so far", d.State, len(ticks))
		}
		return nil
	})
	poll()
	if len(ticks) != n {
		t.Fatalf("%d ticks in %d polls, want %d", len(ticks), polls, n)
	}
	for i, m := range ticks {
		if m != "tick "+strconv.Itoa(i) {
			t.Fatalf("tick %d is %q", i, m)
		}
	}
	t.Logf("%d ticks in %d polls", n, polls)
}

func TestStackNamesTheHotFunction(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 1})
	cl := c.Client()
	ctx := context.Background()
	id := localtest.SubmitJob(t, c, localtest.Guest(t, "local/testdata/chatty"), []string{"hot"}, 1)
	localtest.WaitAllRunning(t, c, id, time.Minute)
	defer cl.CancelJob(ctx, id)

	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		ts, err := cl.Stacks(ctx, id, client.StackQuery{})
		if err != nil {
			return err
		}
		if len(ts) != 1 || len(ts[0].Samples) != 1 {
			return fmt.Errorf("stacks %+v: want one task with one stack", ts)
		}
		fs := ts[0].Samples[0].Frames
		if inner := fs[len(fs)-1]; inner != "main.hotLoop" {
			return fmt.Errorf("innermost frame %q, want main.hotLoop (stack %q)", inner, fs)
		}
		return nil
	})

	ts, err := cl.Stacks(ctx, id, client.StackQuery{Duration: time.Second, Interval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var hot, total int64
	for _, line := range client.FoldedStacks(ts) {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if i < 0 || err != nil || n <= 0 || strings.ContainsAny(line[:i], " \n") {
			t.Fatalf("folded line %q does not parse as \"frame;frame count\"", line)
		}
		frames := strings.Split(line[:i], ";")
		total += n
		if frames[len(frames)-1] == "main.hotLoop" {
			hot += n
		}
	}
	if total < 10 || hot*2 <= total {
		t.Fatalf("%d of %d samples in main.hotLoop; want most", hot, total)
	}
	t.Logf("%d of %d samples in main.hotLoop", hot, total)
}

func TestTenantsSeeOnlyTheirOwnLogsAndStacks(t *testing.T) {
	_, ca, cb := tenantCluster(t, 2)
	ctx := context.Background()
	chatty := localtest.Guest(t, "local/testdata/chatty")
	digest, err := ca.UploadModule(ctx, chatty)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := ca.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: []string{"log", "5"}, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	hot, err := ca.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: []string{"hot"}, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.CancelJob(ctx, hot)
	if r, err := ca.WaitJob(ctx, logged); err != nil || r.State != client.StateFinished {
		t.Fatalf("job of tenant a: %v %v", r.State, err)
	}
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		d, err := ca.GetJob(ctx, hot)
		if err != nil {
			return err
		}
		return localtest.AllRunning(d)
	})

	if lines, err := ca.Logs(ctx, logged, client.LogQuery{}); err != nil || len(guestLines(lines, "line ")) != 5 {
		t.Fatalf("tenant a reads its job's logs: %d lines, %v", len(lines), err)
	}
	for _, job := range []string{logged, hot} {
		if lines, err := cb.Logs(ctx, job, client.LogQuery{}); !errors.Is(err, client.ErrJobNotFound) {
			t.Errorf("tenant b read tenant a's logs: %d lines, %v", len(lines), err)
		}
		if ts, err := cb.Stacks(ctx, job, client.StackQuery{}); !errors.Is(err, client.ErrJobNotFound) {
			t.Errorf("tenant b read tenant a's stacks: %+v, %v", ts, err)
		}
	}

	// A TaskManager's own log shows each tenant its own lines only.
	ov, err := cb.Overview(ctx)
	if err != nil || len(ov.TaskManagers) != 1 {
		t.Fatalf("overview: %+v %v", ov, err)
	}
	tmID := ov.TaskManagers[0].ResourceID
	mine, err := ca.TaskManagerLogs(ctx, tmID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !hasMessage(mine, "line 3") {
		t.Errorf("tenant a does not see its task's lines in the task manager's log (%d lines)", len(mine))
	}
	theirs, err := cb.TaskManagerLogs(ctx, tmID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range theirs {
		if l.JobID == logged || l.JobID == hot || strings.Contains(l.Message+l.Attrs, logged) || strings.Contains(l.Message+l.Attrs, hot) {
			t.Fatalf("tenant b sees tenant a's line in the task manager's log: %+v", l)
		}
	}
	if _, err := cb.TaskManagerLogs(ctx, "no-such-tm", 0, 0); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown task manager: %v", err)
	}
}
