package local_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	want "github.com/sluicehq/sluice/internal/uniontest"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
)

// The union guest (sdk/guest/internal/unionjob): two Go sources united, or
// joined, in tumbling windows.
const unionGuest = "sdk/guest/internal/unionjob"

// Two sources -> Union -> keyed windows -> collect, as Wasm at p=2: the
// union's task reads one input gate per source, and its watermark is the
// smaller of the two. With source b silent for its first 50 polls (about half a second) while a
// runs to its end, a window could fire before b's events only if a's
// watermark (or a's end) counted alone: b's events would then be late and
// reach the late output. They never do, and every window's sum holds both
// sources' events.
func TestUnionWindowsWaitForBothInputs(t *testing.T) {
	const events, keys, size = 20_000, 3, 1000
	wasm := localtest.Guest(t, unionGuest)
	c := localtest.Start(t, local.Config{Slots: 6})
	for name, extra := range map[string][]string{"together": nil, "b late": {"--b-wait", "50"}} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--events", fmt.Sprint(events), "--keys", fmt.Sprint(keys), "--size", fmt.Sprint(size)}, extra...)
			id := localtest.SubmitJob(t, c, wasm, args, 2)
			r := localtest.WaitFinished(t, c, id)
			got := sortedLines(r.Records)
			if late := slices.IndexFunc(got, func(l string) bool { return strings.HasPrefix(l, "late ") }); late >= 0 {
				t.Errorf("late records: a window fired before both inputs passed its end: %q", got[late])
			}
			if diff := localtest.Diff(want.Union(events, keys, size), got); diff != "" {
				t.Fatalf("union windows:\n%s", diff)
			}
		})
	}
}

// A union under checkpoints every 50 ms with the TaskManager running the
// window killed: the union's task aligns the barriers of its two gates, so
// the restored attempt holds each source's position and the windows of the
// same cut, and every window is emitted once with both sources' events.
func TestUnionSurvivesATaskManagerKill(t *testing.T) {
	const events, keys, size = 200_000, 3, 1000
	args := []string{"--events", fmt.Sprint(events), "--keys", fmt.Sprint(keys), "--size", fmt.Sprint(size), "--per-poll", "20"}
	r := runKillingVertexTM(t, 4, unionGuest, args, "win")
	if diff := localtest.Diff(want.Union(events, keys, size), sortedLines(r.Records)); diff != "" {
		t.Fatalf("union windows after the kill:\n%s", diff)
	}
}

// Joins of the two sources on a cluster at p=2, source b held back a
// little: a tumbling window join pairs each a and b event of one key and
// window once, a sliding cogroup lists them per window, an interval join
// pairs those within the interval (the watermarks drop the records no
// later one can join; none is late).
func TestJoinsOnACluster(t *testing.T) {
	const events, keys, size = 20_000, 20, 1000
	c := localtest.Start(t, local.Config{Slots: 6})
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"window join", []string{"--mode", "join"}, want.Join(events, keys, size, size)},
		{"sliding cogroup", []string{"--mode", "cogroup", "--slide", "500"}, want.CoGroup(events, keys, size, 500)},
		{"interval join", []string{"--mode", "interval", "--lower", "-200", "--upper", "300"}, want.Interval(events, keys, -200, 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := localtest.SubmitJob(t, c, localtest.Guest(t, unionGuest), append([]string{
				"--events", fmt.Sprint(events), "--keys", fmt.Sprint(keys), "--size", fmt.Sprint(size), "--b-wait", "20"}, tc.args...), 2)
			if diff := localtest.Diff(tc.want, sortedLines(localtest.WaitFinished(t, c, id).Records)); diff != "" {
				t.Fatalf("%s:\n%s", tc.name, diff)
			}
		})
	}
}

// A window join under checkpoints every 50 ms with the TaskManager running
// the join killed: the join's task aligns the barriers of its two inputs,
// and after the restore every key and window is emitted once with both
// sides' records.
func TestWindowJoinSurvivesATaskManagerKill(t *testing.T) {
	const events, keys, size = 200_000, 20, 1000
	args := []string{"--mode", "cogroup", "--events", fmt.Sprint(events), "--keys", fmt.Sprint(keys), "--size", fmt.Sprint(size), "--per-poll", "20"}
	r := runKillingVertexTM(t, 4, unionGuest, args, "win")
	if diff := localtest.Diff(want.CoGroup(events, keys, size, size), sortedLines(r.Records)); diff != "" {
		t.Fatalf("cogroup after the kill:\n%s", diff)
	}
}

// Stop-with-savepoint while joins have records waiting, resume at p=3:
// the joins' keyed state and timers move with their key groups, and every
// pair (cogroup: every key and window) comes out once over the two runs.
func TestJoinsResumeFromASavepointAtAnotherParallelism(t *testing.T) {
	const events, keys, size = 20_000, 20, 1000
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"cogroup", []string{"--mode", "cogroup"}, want.CoGroup(events, keys, size, size)},
		{"interval join", []string{"--mode", "interval", "--lower", "-200", "--upper", "300"}, want.Interval(events, keys, -200, 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := stopAndResume(t, 8, unionGuest, append([]string{"--events", fmt.Sprint(events), "--keys", fmt.Sprint(keys),
				"--size", fmt.Sprint(size), "--per-poll", "20"}, tc.args...))
			if diff := localtest.Diff(tc.want, sortedLines(recs)); diff != "" {
				t.Fatalf("%s after the resume at p=3:\n%s", tc.name, diff)
			}
		})
	}
}
