package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/sdk/nexmark/reference"
)

// TestE2EWindowsExactlyOnceAcrossKillsAndRescale: Nexmark q5 (sliding
// event-time windows over an unbounded, paced generator) writes its rows
// through the transactional file sink. The TaskManager running the
// windows is kill -9ed twice while windows are open; the job is stopped
// with a savepoint, resumed from it at another parallelism and finally
// stopped with --drain. The committed rows of both jobs are then exactly
// the reference's for every window the stream had passed: no window lost,
// none fired twice.
func TestE2EWindowsExactlyOnceAcrossKillsAndRescale(t *testing.T) {
	const rate = 4000 // events per second, which also spaces their times
	c := proctest.Start(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s",
		"--restart-attempts", "20", "--restart-delay", "200ms"}, 2, 2)
	args := []string{moduleDir(t, "examples/nexmark"), "--", "--query", "q5", "--events", "0", "--rate", fmt.Sprint(rate),
		"--text", "--out", "nx/q5"}
	run := func(extra ...string) string {
		t.Helper()
		r := c.Run(append(append([]string{"run", "--detached", "--checkpoint-interval", "300ms"}, extra...), args...)...)
		if r.Code != 0 {
			t.Fatalf("sluice run: exit %d: %s", r.Code, r.Stderr)
		}
		return strings.TrimSpace(r.Stdout)
	}
	// newWindows waits until the committed rows hold n more windows (q5
	// slides every 2 s of event time, which is paced as wall time here).
	newWindows := func(n int) {
		t.Helper()
		had := len(windowStarts(t, committedLines(t, c.Blob(), "nx/q5")))
		testutil.CheckFor(t, 2*time.Minute, 100*time.Millisecond, func() error {
			if got := len(windowStarts(t, committedLines(t, c.Blob(), "nx/q5"))); got < had+n {
				return fmt.Errorf("%d windows committed, want %d", got, had+n)
			}
			return nil
		})
	}
	// stop runs sluice stop and returns the savepoint's id.
	stop := func(flags ...string) string {
		t.Helper()
		r := c.Run(append([]string{"stop"}, flags...)...)
		if r.Code != 0 {
			t.Fatalf("sluice stop %s: exit %d: %s", strings.Join(flags, " "), r.Code, r.Stderr)
		}
		return strings.TrimSpace(r.Stdout)
	}

	id := run("-p", "2")
	restarts := 0
	for kill := 1; kill <= 2; kill++ {
		newWindows(1)
		d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
		// The windows' TaskManager: q5's first window operator.
		i := slices.IndexFunc(d.Vertices, func(v client.VertexStatus) bool { return strings.Contains(v.Name, "q5.count") })
		if i < 0 {
			t.Fatalf("job %s has no q5.count vertex: %+v", id, d.Vertices)
		}
		c.KillTaskManager(localtest.TaskManagerIndex(t, c, d.Vertices[i].Subtasks[0].TaskManager))
		c.StartTaskManager(2)
		localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
			if d.Restarts <= restarts {
				return fmt.Errorf("job %s restarted %d times, want more than %d after kill %d", id, d.Restarts, restarts, kill)
			}
			return localtest.AllRunning(d)
		})
		restarts = localtest.WaitAllRunning(t, c, id, time.Minute).Restarts
	}
	newWindows(2)
	sp := stop(id)
	before := committedLines(t, c.Blob(), "nx/q5")

	resumed := run("-p", "3", "--from-savepoint", sp)
	// Two timelines, so one of the three source subtasks has no split and
	// finishes; checkpoints go on without it.
	localtest.WaitJobState(t, c, resumed, client.StateRunning, 2*time.Minute)
	newWindows(3)
	stop("--drain", resumed)

	got := committedLines(t, c.Blob(), "nx/q5")
	starts := windowStarts(t, got)
	lastStart := slices.Max(starts)
	rows := map[string]int{}
	for _, l := range got {
		rows[l]++
	}
	// The drain fired the windows open at the stop, each with what it had:
	// every window that ended by the newest start was complete.
	var want []string
	for _, h := range reference.Q5(generated(t, rate, lastStart+reference.WindowMs)) {
		if h.End <= lastStart {
			want = append(want, fmt.Sprintf("%d\t%d\t%d\t%d", h.Auction, h.Start, h.End, h.Num))
		}
	}
	var complete []string
	for l, n := range rows {
		if n > 1 {
			t.Errorf("row %q committed %d times", l, n)
		}
		if end, _ := strconv.ParseInt(strings.Split(l, "\t")[2], 10, 64); end <= lastStart {
			complete = append(complete, l)
		}
	}
	slices.Sort(want)
	slices.Sort(complete)
	t.Logf("%d rows of %d windows committed (%d rows before the stop), %d restarts; %d rows of complete windows compared", len(got), len(starts), len(before), restarts, len(want))
	if len(before) == 0 || len(before) == len(got) {
		t.Errorf("%d rows before the stop, %d in all: want output from both jobs", len(before), len(got))
	}
	if n := len(windowStarts(t, want)); n < 6 {
		t.Errorf("only %d complete windows compared: the run was too short to prove much", n)
	}
	if d := localtest.Diff(want, complete); d != "" {
		t.Fatalf("the committed rows of complete windows are not the reference's:\n%s", d)
	}
}

// windowStarts are the distinct window starts of q5's rows
// "auction<TAB>start<TAB>end<TAB>count".
func windowStarts(t *testing.T, rows []string) []int64 {
	t.Helper()
	var out []int64
	for _, l := range rows {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			t.Fatalf("committed row %q is not auction<TAB>start<TAB>end<TAB>count", l)
		}
		start, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("committed row %q: start: %v", l, err)
		}
		out = append(out, start)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// generated is the nexmark source's stream at p=2 (two timelines, seed 0,
// base time 0, in order) at rate, up to event time until.
func generated(t *testing.T, rate, until int64) []nexmark.Event {
	t.Helper()
	rs, err := nexmark.Split(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var out []nexmark.Event
	for _, r := range rs {
		g, err := nexmark.NewGenerator(nexmark.Config{Rate: rate}, r, 2, r.Start)
		if err != nil {
			t.Fatal(err)
		}
		var e nexmark.Event
		for g.Next(&e) && e.Time() < until {
			if e.Type == nexmark.BidEvent {
				out = append(out, nexmark.Event{Type: nexmark.BidEvent, Bid: reference.CloneBid(e.Bid)})
			}
		}
	}
	return out
}
