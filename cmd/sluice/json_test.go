package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/sdk/client"
)

// TestJSONOutputMatchesEncodingJSON: --json output goes through sonic, and
// scripts read it, so it must stay byte for byte what encoding/json
// printed: sorted map keys, HTML escaping, omitzero times, base64 records,
// indentation and the trailing newline.
func TestJSONOutputMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CEST", 2*3600))
	details := client.JobDetails{
		JobSummary: client.JobSummary{ID: "j1", Name: "word<count>", State: client.StateFailed, Start: at},
		Vertices: []client.VertexStatus{{ID: 1, Name: "lines & more", Parallelism: 2, Subtasks: []client.SubtaskStatus{
			{Index: 0, State: "RUNNING", TaskManager: "tm-1", Attempt: 1},
			{Index: 1, State: "FAILED", Failure: "panic: \"x\" \u2028 <b>\n\tat main.go:3"},
		}}},
		Failure:      "boom",
		Restarts:     2,
		History:      []client.FailureRecord{{Time: at, Cause: "tm <lost>"}, {Time: at.Add(time.Minute), Cause: "boom"}},
		StateTimes:   map[string]time.Time{"RUNNING": at, "CREATED": at.Add(-time.Second), "FAILED": at.Add(time.Hour)},
		Accumulators: map[string]int64{"z": 1, "a": -2, "m": 1 << 40},
	}
	for name, v := range map[string]any{
		"jobs":    []client.JobSummary{{ID: "a", Name: "n", State: client.StateRunning, Start: at}, {ID: "b"}},
		"details": details,
		"result": client.JobResult{
			JobDetails: details,
			Records:    [][]byte{[]byte("a\t1"), {0xff, 0}, {}},
			Duration:   1500 * time.Millisecond,
		},
		"checkpoints": []client.Checkpoint{{ID: 3, Savepoint: true, SavepointID: "sp-1", Status: "COMPLETED", Triggered: at, Duration: time.Second, Size: 10, Retained: true}},
		"overview": client.Overview{
			TaskManagers: []client.TaskManagerInfo{{ResourceID: "tm-1", Address: "127.0.0.1:1", SlotsTotal: 4, SlotsFree: 1}},
			SlotsTotal:   4, SlotsFree: 1, JobsByState: map[string]int{"RUNNING": 1, "FINISHED": 3}, Tenant: "default",
		},
		"no overview": client.Overview{},
		"plan": planOutput{
			Module: "sha256:00",
			Graph: &jobgraph.Graph{Name: "wc", Vertices: []jobgraph.Vertex{
				{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": `["a>b.txt"]`, "b": "&"}},
				{ID: 2, Name: "out", Kind: jobgraph.KindSink, Parallelism: 1},
			}, Edges: []jobgraph.Edge{{Source: 1, Target: 2, Partitioner: jobgraph.Rebalance}}},
			Tasks:  []jobgraph.Chain{{Vertices: []int{1}, Parallelism: 2}, {Vertices: []int{2}, Parallelism: 1}},
			Errors: "vertex 2: <bad>",
		},
		"empty plan": planOutput{},
	} {
		t.Run(name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := writeJSON(&got, v); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("writeJSON differs from encoding/json:\ngot:\n%s\nwant:\n%s", got.String(), want.String())
			}
		})
	}
}
