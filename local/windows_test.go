package local_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// The window guest (sdk/guest/internal/windowjob): keyed windows of the
// SDK, whose results and late records end in collect sinks.
const windowGuest = "sdk/guest/internal/windowjob"

// windowSums is what the window guest's tumbling Aggregate must emit for
// events [0, n) of keys keys in windows of size ms, one line per key and
// window ("key start end sum"), and the late records, one injected after
// every lateEvery-th event ("late key late<i>"); sorted.
func windowSums(n int64, keys int, size, lateEvery int64) []string {
	const base = 1_700_000_000_000
	type win struct {
		key   string
		start int64
	}
	sums := map[win]int64{}
	var out []string
	for i := int64(0); i < n; i++ {
		t := base + 10*i
		key := fmt.Sprintf("k%d", i%int64(keys))
		sums[win{key, t - t%size}] += i
		if lateEvery > 0 && i%lateEvery == lateEvery-1 {
			out = append(out, fmt.Sprintf("late %s late%d", key, i))
		}
	}
	for w, s := range sums {
		out = append(out, fmt.Sprintf("%s %d %d %d", w.key, w.start, w.start+size, s))
	}
	sort.Strings(out)
	return out
}

func sortedLines(recs [][]byte) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r)
	}
	sort.Strings(out)
	return out
}

// A windowed job as Wasm on an embedded cluster, checkpointing every 50 ms,
// with the TaskManager running the window operator killed under it: the
// restarted attempt restores the windows and their timers from the last
// checkpoint, and the exactly-once collect sinks hold every window once
// (none lost, none fired twice) and every late record once, which went to
// the late output.
func TestWindowsSurviveATaskManagerKill(t *testing.T) {
	const events = 200_000
	args := []string{"--events", fmt.Sprint(events), "--keys", "3", "--size", "1000", "--lateness", "500",
		"--late-every", "97", "--late-lag", "10000", "--per-poll", "20"}
	r := runKillingVertexTM(t, 4, windowGuest, args, "win")
	if diff := localtest.Diff(windowSums(events, 3, 1000, 97), sortedLines(r.Records)); diff != "" {
		t.Fatalf("windows after the kill:\n%s", diff)
	}
}

// Stop-with-savepoint while windows are open, resume at another
// parallelism: the windows' state and timers move with their key groups,
// and every window fires once over the two runs.
func TestWindowsResumeFromASavepointAtAnotherParallelism(t *testing.T) {
	const events = 20_000
	recs := stopAndResume(t, 8, windowGuest, []string{"--events", fmt.Sprint(events), "--keys", "7", "--size", "1000", "--lateness", "200",
		"--late-every", "101", "--per-poll", "20"})
	got := sortedLines(recs)
	if diff := localtest.Diff(windowSums(events, 7, 1000, 101), got); diff != "" {
		t.Fatalf("windows after the resume at p=3:\n%s", diff)
	}
}

// Bad windows fail the submission, before anything is deployed, with the
// SDK's message.
func TestBadWindowsFailTheSubmission(t *testing.T) {
	c := localtest.Start(t, local.Config{Slots: 2})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, windowGuest))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size", "0"}, "Tumbling(0s): the size must be at least 1ms"},
		{[]string{"--kind", "sliding", "--size", "100", "--slide", "200"}, "Sliding(100ms, 200ms): the slide is larger than the size"},
		{[]string{"--kind", "sliding", "--size", "100", "--slide", "0"}, "the slide must be at least 1ms"},
		{[]string{"--kind", "session", "--size", "-5"}, "Session(-5ms): the gap must be at least 1ms"},
		{[]string{"--lateness", "-1"}, "WithAllowedLateness(-1ms): the allowed lateness must not be negative"},
	} {
		_, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: tc.args, Parallelism: 1})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("submit %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if jobs, err := cl.ListJobs(ctx); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after the refused submissions: %v (%v)", jobs, err)
	}
}
