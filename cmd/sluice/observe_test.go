package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

func TestTopRatesFromTwoReports(t *testing.T) {
	at := time.Unix(1000, 0)
	job := func(reported time.Time, in, out int64, busy int64) client.JobDetails {
		sub := func(i int, in, out int64) client.SubtaskStatus {
			return client.SubtaskStatus{Index: i, State: client.StateRunning, Metrics: &client.SubtaskMetrics{
				RecordsIn: in, RecordsOut: out, BytesIn: 10 * in, BytesOut: 10 * out,
				BusyMsPerSecond: busy + int64(i), BackPressuredMsPerSecond: 7, Reported: reported}}
		}
		return client.JobDetails{
			JobSummary: client.JobSummary{ID: "0123456789abcdef", Name: "wc\x1b[2J", State: client.StateRunning, Start: at},
			Vertices: []client.VertexStatus{
				{ID: 1, Name: "lines", Parallelism: 2, Subtasks: []client.SubtaskStatus{sub(0, 0, out/2), sub(1, 0, out/2)}},
				{ID: 2, Name: "count", Parallelism: 1, Subtasks: []client.SubtaskStatus{sub(0, in, 0), {Index: 1, State: "DEPLOYING"}}},
			},
		}
	}
	prev := map[string]client.JobDetails{"j": job(at, 1000, 2000, 100)}
	cur := map[string]client.JobDetails{"j": job(at.Add(2*time.Second), 5000, 12000, 300)}

	first := topRows(nil, prev)
	if len(first) != 2 || first[0].InRate != -1 || first[0].OutRate != -1 {
		t.Fatalf("rates from one report: %+v", first)
	}
	rows := topRows(prev, cur)
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	src, count := rows[0], rows[1]
	if src.OutRate != 5000 || src.InRate != 0 || src.OutBytes != 50000 || src.Running != 2 || src.BusyMs != 301 || src.BackPressuredMs != 7 {
		t.Errorf("source row %+v", src)
	}
	if count.InRate != 2000 || count.Running != 1 || count.Parallelism != 1 {
		t.Errorf("count row %+v", count)
	}

	var b bytes.Buffer
	printTop(&b, rows, at)
	out := b.String()
	for _, want := range []string{"01234567", `"wc\x1b[2J"`, "5000", "2000", "50.0k", "2/2"} {
		if !strings.Contains(out, want) {
			t.Errorf("top lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[2J") {
		t.Errorf("top prints a guest's escape sequence raw:\n%s", out)
	}
	b.Reset()
	printTop(&b, nil, at)
	if !strings.Contains(b.String(), "no running jobs") {
		t.Errorf("empty top: %q", b.String())
	}
}

func TestLogAndStackOutputEscapesGuestText(t *testing.T) {
	var b bytes.Buffer
	printLogLine(&b, client.LogLine{Time: time.Unix(0, 0), Level: "INFO", Task: "map\x1b[31m", Message: "hi\x1b[2J\nthere", Attrs: "stream=stdout", Dropped: 4})
	out := b.String()
	if strings.Contains(out, "\x1b") || strings.Count(out, "\n") != 2 {
		t.Fatalf("log output not escaped to two lines:\n%q", out)
	}
	for _, want := range []string{"... 4 lines of \"map\\x1b[31m\"[0] dropped", `"hi\x1b[2J\nthere"  stream=stdout`} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printStacks(&b, []client.TaskStack{{Task: "t", Samples: []client.StackCount{{Frames: []string{"outer", "in\x1bner"}, Count: 3}}, Total: 4}, {Task: "idle"}}, true)
	out = b.String()
	if strings.Contains(out, "\x1b") || !strings.Contains(out, "3 of 4 samples (75.0%):\n    \"in\\x1bner\"\n    outer\n") || !strings.Contains(out, "no guest code running") {
		t.Errorf("stack output:\n%s", out)
	}
}

// run runs the sluice command line in process.
func run(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	cmd.SetArgs(args)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		t.Logf("sluice %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), err
}

func TestLogsFollowAndStackFoldedCommands(t *testing.T) {
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 2})
	chatty := localtest.Guest(t, "local/testdata/chatty")
	addr := c.Addr()
	ctx := context.Background()

	const n = 200
	id := localtest.SubmitJob(t, c, chatty, []string{"trickle", strconv.Itoa(n)}, 1)
	// --follow returns once the job ended and its last lines are printed.
	out, err := run(t, ctx, "logs", id, "--jm", addr, "--follow", "--interval", "100ms")
	if err != nil {
		t.Fatal(err)
	}
	var ticks []string
	for line := range strings.SplitSeq(out, "\n") {
		if i := strings.Index(line, "tick "); i >= 0 {
			ticks = append(ticks, line[i:])
		}
	}
	if len(ticks) != n {
		t.Fatalf("--follow printed %d ticks, want %d:\n%.3000s", len(ticks), n, out)
	}
	for i, tk := range ticks {
		if !strings.HasPrefix(tk, "tick "+strconv.Itoa(i)+"  ") {
			t.Fatalf("tick %d printed as %q", i, tk)
		}
	}
	if !strings.Contains(out, "task finished") {
		t.Errorf("--follow missed the task's last event:\n%.3000s", out)
	}

	hot := localtest.SubmitJob(t, c, chatty, []string{"hot"}, 1)
	localtest.WaitAllRunning(t, c, hot, time.Minute)
	defer c.Client().CancelJob(ctx, hot)
	out, err = run(t, ctx, "stack", hot, "--jm", addr, "--sample", "500ms", "--interval", "2ms", "--folded")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, ";main.hotLoop ") {
		t.Errorf("folded stacks lack main.hotLoop:\n%s", out)
	}
	if _, err := run(t, ctx, "stack", hot, "--jm", addr, "--folded"); err == nil {
		t.Error("--folded without --sample was accepted")
	}
	if _, err := run(t, ctx, "logs", "--jm", addr); err == nil {
		t.Error("logs without a job or --tm was accepted")
	}
}
