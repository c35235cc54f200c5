package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sdk/client"
)

// TestStatusShowsAccumulatorsAndHistory: a FINISHED job that recovered
// shows its accumulators and its restarts' causes as history, never as a
// failure; a FAILED job shows its failure.
func TestStatusShowsAccumulatorsAndHistory(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.Local)
	d := client.JobDetails{
		JobSummary:   client.JobSummary{ID: "j1", State: client.StateFinished, Start: at, End: at.Add(time.Minute)},
		Restarts:     2,
		Accumulators: map[string]int64{"violations": 0, "records": 40000, "\x1b[2J": 1},
		History: []client.FailureRecord{
			{Time: at.Add(10 * time.Second), Cause: "task manager tm1 lost\x1b[2J"},
			{Time: at.Add(20 * time.Second), Cause: "guest trap\nwasm stack:\n  main.go:3"},
		},
		Failure: "stale: a server that still sends it",
		Fuel:    1234,
		Vertices: []client.VertexStatus{{ID: 1, Name: "map", Parallelism: 2, Subtasks: []client.SubtaskStatus{
			{Index: 0, State: "FINISHED", Metrics: &client.SubtaskMetrics{Fuel: 1200}},
			{Index: 1, State: "FINISHED", Metrics: &client.SubtaskMetrics{Fuel: 34}},
		}}},
	}
	var b bytes.Buffer
	printDetails(&b, d)
	out := b.String()
	for _, want := range []string{
		"restarts  2\nfuel      1234\n",
		"FUEL\n",
		"accumulators:\n  \"\\x1b[2J\" 1\n  records 40000\n  violations 0\n", // guest text is escaped
		"history:\n  2024-05-06 07:08:19  task manager tm1 lost\\x1b[2J\n  2024-05-06 07:08:29  guest trap\n                       wasm stack:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nfailure:\n") {
		t.Errorf("a FINISHED job shows a failure:\n%s", out)
	}

	d.State, d.Failure = client.StateFailed, "boom"
	b.Reset()
	printDetails(&b, d)
	if !strings.Contains(b.String(), "\nfailure:\n  boom\n") {
		t.Errorf("a FAILED job does not show its failure:\n%s", b.String())
	}

	var stderr bytes.Buffer
	r := client.JobResult{JobDetails: d, Duration: time.Second}
	r.State = client.StateFinished
	if err := finish(&stderr, r, &recordPrinter{}); err != nil {
		t.Fatal(err)
	}
	if s := stderr.String(); !strings.Contains(s, "FINISHED in 1s: 0 records after 2 restarts\n") || !strings.Contains(s, "  violations 0\n") || !strings.Contains(s, "history:\n") {
		t.Errorf("run summary:\n%s", s)
	}
}
