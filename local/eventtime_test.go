package local_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/sdk/guest/jobtest"
)

// The event-time guest (local/testdata/eventtime) counts events per key in
// tumbling windows of keyed state and event-time timers.
const eventTimeGuest = "local/testdata/eventtime"

// windowCounts is what the guest must emit for events [0, n) of keys keys
// in windows of window ms, leaving out the events of source subtask silent
// (of sourceP): "key end count", sorted.
func windowCounts(n int64, keys int, window int64, sourceP, silent int) []string {
	const base = 1_700_000_000_000
	counts := map[string]int{}
	for i := int64(0); i < n; i++ {
		if int(i%int64(sourceP)) == silent {
			continue
		}
		t := base + 10*i
		counts[fmt.Sprintf("k%d %d", i%int64(keys), t-t%window+window)]++
	}
	var out []string
	for k, c := range counts {
		out = append(out, fmt.Sprintf("%s %d", k, c))
	}
	sort.Strings(out)
	return out
}

// splitHow drops the "wm"/"end" field of each line and returns the lines
// (sorted) and how many of each.
func splitHow(t *testing.T, recs [][]byte) ([]string, map[string][]string) {
	t.Helper()
	var lines []string
	how := map[string][]string{}
	for _, r := range recs {
		f := strings.Fields(string(r))
		if len(f) != 4 {
			t.Fatalf("bad output line %q", r)
		}
		l := strings.Join(f[:3], " ")
		lines = append(lines, l)
		how[f[3]] = append(how[f[3]], l)
	}
	sort.Strings(lines)
	return lines, how
}

// Event-time timers fire once each when the watermark passes them, and
// only then: every window but the last of each key is fired by a
// watermark, the last ones by the end of input (no later watermark
// passes them).
func TestEventTimersFireOnceWhenTheWatermarkPasses(t *testing.T) {
	c := localtest.Start(t, local.Config{Slots: 3})
	args := []string{"--events", "2000", "--keys", "3", "--window", "100", "--wm-every", "25"}
	id := localtest.SubmitJob(t, c, localtest.Guest(t, eventTimeGuest), args, 2)
	r := localtest.WaitFinished(t, c, id)
	got, how := splitHow(t, r.Records)
	want := windowCounts(2000, 3, 100, 1, -1)
	if d := localtest.Diff(want, got); d != "" {
		t.Fatalf("window counts:\n%s", d)
	}
	// The last event is at base+19990, the last watermark too: only the
	// window ending at base+20000 (one per key) is left for the end.
	const lastEnd = "1700000020000"
	if len(how["end"]) != 3 {
		t.Errorf("%d windows fired at the end of input, want the last one of each of the 3 keys: %v", len(how["end"]), how["end"])
	}
	for _, l := range how["end"] {
		if !strings.Contains(l, " "+lastEnd+" ") {
			t.Errorf("window %q fired only at the end, though a watermark passed it", l)
		}
	}
	if r.Accumulators["late"] != 0 {
		t.Errorf("%d records were late; the source's watermarks are exact", r.Accumulators["late"])
	}
}

// An idle source subtask does not stall the watermark: with an idle
// timeout, the windows of the other subtask fire while the job runs,
// though one source subtask never emits anything and never ends.
func TestIdleSourceSubtaskDoesNotStallTheWatermark(t *testing.T) {
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	ctx := context.Background()
	args := []string{"--events", "1000", "--keys", "3", "--window", "100", "--source-p", "2", "--silent", "1",
		"--forever", "--idle", "100ms", "--log"}
	id := localtest.SubmitJob(t, c, localtest.Guest(t, eventTimeGuest), args, 2)
	all := windowCounts(1000, 3, 100, 2, 1)
	// The last window of each key waits for a watermark that never comes.
	var want []string
	for _, l := range all {
		if !strings.Contains(l, " 1700000010000 ") {
			want = append(want, l)
		}
	}
	var got []string
	testutil.CheckFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
		var err error
		if got, err = firedLogs(ctx, cl, id); err != nil {
			return err
		}
		if len(got) < len(want) {
			return fmt.Errorf("%d of %d windows fired while the job runs", len(got), len(want))
		}
		return nil
	})
	lines, how := splitHow(t, toBytes(got))
	if d := localtest.Diff(want, lines); d != "" {
		t.Fatalf("windows fired while the job runs:\n%s", d)
	}
	if len(how["end"]) != 0 {
		t.Errorf("windows fired by an end of event time while the job runs: %v", how["end"])
	}
	// The job never ends by itself: it runs until canceled.
	if det, err := cl.GetJob(ctx, id); err != nil || det.State != client.StateRunning {
		t.Fatalf("the unbounded job is %s (%v), want RUNNING", det.State, err)
	}
	if err := cl.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	localtest.WaitJobState(t, c, id, client.StateCanceled, time.Minute)
}

// A TaskManager killed under the job: the restarted attempt restores the
// event timers from the checkpoint, and no window is lost or fired twice
// (the collect sink is exactly-once too, so the result holds each window
// once).
func TestEventTimersSurviveATaskManagerKill(t *testing.T) {
	const events = 400_000
	args := []string{"--events", fmt.Sprint(events), "--keys", "3", "--window", "1000", "--per-poll", "20", "--wm-every", "100"}
	r := runKillingVertexTM(t, 3, eventTimeGuest, args, "windows")
	got, _ := splitHow(t, r.Records)
	if diff := localtest.Diff(windowCounts(events, 3, 1000, 1, -1), got); diff != "" {
		t.Fatalf("window counts after the kill:\n%s", diff)
	}
}

// runKillingVertexTM runs guest with args at parallelism 2 on a fresh
// cluster of two TaskManagers (checkpoints every 50 ms, fixed-delay
// restarts), kills the TaskManager running the first subtask of the vertex
// whose name contains vertex once a checkpoint completed, and returns the
// job's result; it fails the test unless the job restarted.
func runKillingVertexTM(t *testing.T, slots int, guest string, args []string, vertex string) client.JobResult {
	t.Helper()
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: slots, JobManager: func(j *jm.Config) {
		// 500 ms declares living TaskManagers dead on a loaded machine.
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, guest))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 2, Config: map[string]string{
		jobconfig.KeyCheckpointInterval: "50ms",
		jobconfig.KeyRestartStrategy:    "fixed-delay",
		jobconfig.KeyFixedDelayAttempts: "20",
		jobconfig.KeyFixedDelayDelay:    "500ms",
	}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil || len(cps) == 0 {
			return fmt.Errorf("job %s has no checkpoint yet (%v)", id, err)
		}
		return nil
	})
	d := localtest.WaitAllRunning(t, c, id, time.Minute)
	var victim string
	for _, v := range d.Vertices {
		if strings.Contains(v.Name, vertex) {
			victim = v.Subtasks[0].TaskManager
		}
	}
	if victim == "" {
		t.Fatalf("no %s vertex in %+v", vertex, d.Vertices)
	}
	c.KillTaskManager(localtest.TaskManagerIndex(t, c, victim))
	r := localtest.WaitFinished(t, c, id)
	if det, err := cl.GetJob(ctx, id); err != nil || det.Restarts == 0 {
		t.Fatalf("the job did not restart (restarts %d, %v): it ended before the kill; give it more events", det.Restarts, err)
	}
	return r
}

// Stop-with-savepoint while windows are open, resume at another
// parallelism: the event timers move with their key groups and every
// window is fired once.
func TestEventTimersResumeFromASavepointAtAnotherParallelism(t *testing.T) {
	const events = 20_000
	recs := stopAndResume(t, 6, eventTimeGuest, []string{"--events", fmt.Sprint(events), "--keys", "7", "--window", "1000"})
	got, _ := splitHow(t, recs)
	if d := localtest.Diff(windowCounts(events, 7, 1000, 1, -1), got); d != "" {
		t.Fatalf("window counts after the resume at p=3:\n%s", d)
	}
}

// stopAndResume runs guest with args and --forever at parallelism 2
// (checkpoints every 50 ms) on a cluster of slots, stops it with a
// savepoint once a checkpoint completed, resumes args at parallelism 3
// from the savepoint, and returns the records of both jobs: the collect
// sink released what the savepoint covers to the stopped job's result, and
// the resumed job adds the rest.
func stopAndResume(t *testing.T, slots int, guest string, args []string) [][]byte {
	t.Helper()
	c := localtest.Start(t, local.Config{Slots: slots})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, guest))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: append(slices.Clone(args), "--forever"), Parallelism: 2,
		Config: map[string]string{jobconfig.KeyCheckpointInterval: "50ms"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		cps, err := cl.ListCheckpoints(ctx, id)
		if err != nil || len(cps) == 0 {
			det, _ := cl.GetJob(ctx, id)
			return fmt.Errorf("job %s (%s) has no checkpoint yet (%v)", id, det.State, err)
		}
		return nil
	})
	sp, err := cl.TriggerSavepoint(ctx, id, true, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stopped := localtest.WaitFinished(t, c, id)
	if len(stopped.Records) == 0 {
		t.Log("the savepoint came before any record was released")
	}
	id, err = cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 3, FromSavepoint: sp.SavepointID})
	if err != nil {
		t.Fatal(err)
	}
	return append(stopped.Records, localtest.WaitFinished(t, c, id).Records...)
}

// The job test harness drives event time in the sandbox: a task's
// watermark moves when the test sets it, timers at or below it fire in
// time order, each once, and a snapshot taken between restores them at
// another parallelism; a Go source's own watermarks are visible too.
func TestJobtestDrivesEventTime(t *testing.T) {
	ctx := context.Background()
	m := jobtest.Wasm(t, filepath.Join(localtest.ModuleRoot(t), eventTimeGuest))
	args := []string{"--window", "100"}
	task, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"windows"}})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if wm := task.Watermark(); wm != math.MinInt64 {
		t.Fatalf("watermark before any: %d", wm)
	}
	rec := func(key string, ts int64) jobtest.Record {
		return jobtest.Record{Key: []byte(key), HasKey: true, Value: []byte("x"), Time: ts, HasTime: true}
	}
	if err := task.Process(rec("a", 1050), rec("b", 1010), rec("a", 1120), rec("a", 1099)); err != nil {
		t.Fatal(err)
	}
	if at, ok := task.NextEventTimer(); !ok || at != 1099 {
		t.Fatalf("next event timer %d %v, want 1099", at, ok)
	}
	if err := task.SetWatermark(1098); err != nil {
		t.Fatal(err)
	}
	if out := task.OutputValues(); len(out) != 0 {
		t.Fatalf("fired below the timers: %v", out)
	}
	snap, err := task.Barrier(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.SetWatermark(1099); err != nil {
		t.Fatal(err)
	}
	if got, want := task.OutputValues(), []string{"a 1100 2 wm", "b 1100 1 wm"}; !slices.Equal(got, want) {
		t.Fatalf("at 1099: %v, want %v", got, want)
	}
	if err := task.SetWatermark(1099); err != nil { // again: nothing
		t.Fatal(err)
	}
	if err := task.SetWatermark(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if got := task.OutputValues(); len(got) != 3 || got[2] != "a 1200 1 end" {
		t.Fatalf("at the end: %v", got)
	}
	if err := task.Close(); err != nil {
		t.Fatal(err)
	}
	// The snapshot from before 1099 holds the three timers; at parallelism
	// 2 each subtask gets those of its key groups.
	var fired []string
	for s := range 2 {
		r, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"windows"}, Subtask: s, Parallelism: 2, Restore: [][]byte{snap}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetWatermark(math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		fired = append(fired, r.OutputValues()...)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(fired)
	if want := []string{"a 1100 2 end", "a 1200 1 end", "b 1100 1 end"}; !slices.Equal(fired, want) {
		t.Fatalf("restored at p=2: %v, want %v", fired, want)
	}

	src, err := m.Open(ctx, jobtest.TaskConfig{Args: []string{"--events", "10", "--wm-every", "5"}, Operators: []string{"events"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Poll(100); err != nil {
		t.Fatal(err)
	}
	const base = 1_700_000_000_000
	if got, want := src.EmittedWatermarks(), []int64{base + 40, base + 90, base + 90}; !slices.Equal(got, want) {
		t.Fatalf("the source's watermarks: %v, want %v", got, want)
	}
}

// firedLogs returns the windows the guest logged as fired ("key end count
// how").
func firedLogs(ctx context.Context, cl *client.Client, id string) ([]string, error) {
	lines, err := cl.Logs(ctx, id, client.LogQuery{Task: "windows", Limit: 10000})
	if err != nil {
		return nil, err
	}
	var got []string
	for _, l := range lines {
		// The guest's slog text: msg="fired k0 1700000000100 2 wm"
		if i := strings.Index(l.Message, "fired k"); i >= 0 {
			got = append(got, strings.TrimRight(l.Message[i+len("fired "):], `"`))
		}
	}
	return got, nil
}

// stop --drain on an unbounded job: the sources send the maximum
// watermark before the savepoint, so the windows no watermark had passed
// fire (once) before the job stops, and a job resumed from that savepoint
// has every window once.
func TestStopWithDrainFiresPendingTimers(t *testing.T) {
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, eventTimeGuest))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--events", "2000", "--keys", "3", "--window", "100", "--log"}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: append(args, "--forever"), Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	all := windowCounts(2000, 3, 100, 1, -1)
	// Every window but the last of each key fires by the source's
	// watermarks while it runs; the last three wait.
	testutil.CheckFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
		got, err := firedLogs(ctx, cl, id)
		if err != nil {
			return err
		}
		if len(got) < len(all)-3 {
			return fmt.Errorf("%d of %d windows fired", len(got), len(all)-3)
		}
		return nil
	})
	localtest.WaitAllRunning(t, c, id, time.Minute)
	sp, err := cl.StopWithDrain(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stopped := localtest.WaitFinished(t, c, id)
	got, err := firedLogs(ctx, cl, id)
	if err != nil {
		t.Fatal(err)
	}
	lines, how := splitHow(t, toBytes(got))
	if d := localtest.Diff(all, lines); d != "" {
		t.Fatalf("windows fired up to the drained stop:\n%s", d)
	}
	if len(how["end"]) != 3 {
		t.Fatalf("%d windows fired by the drain's maximum watermark, want the last one of each key: %v", len(how["end"]), how["end"])
	}
	// The windows reached the sink before the savepoint: the stopped job's
	// result has them all, and the savepoint no pending timer.
	res, _ := splitHow(t, stopped.Records)
	if d := localtest.Diff(all, res); d != "" {
		t.Fatalf("the drained job's result:\n%s", d)
	}
	id, err = cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: 3, FromSavepoint: sp.SavepointID})
	if err != nil {
		t.Fatal(err)
	}
	if r := localtest.WaitFinished(t, c, id); len(r.Records) != 0 {
		t.Fatalf("the job resumed from the drained savepoint fired %d more windows", len(r.Records))
	}
}
