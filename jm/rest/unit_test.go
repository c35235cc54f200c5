package rest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

func TestBackpressureLevelIsFlinks(t *testing.T) {
	for ratio, want := range map[float64]string{0: "ok", 0.10: "ok", 0.11: "low", 0.5: "low", 0.51: "high", 1: "high"} {
		if got := backpressureLevel(ratio); got != want {
			t.Errorf("ratio %v: %s, want %s", ratio, got, want)
		}
	}
}

func TestVertexStatusAggregatesSubtasks(t *testing.T) {
	subs := func(states ...string) []jobmaster.SubtaskStatus {
		var out []jobmaster.SubtaskStatus
		for _, s := range states {
			out = append(out, jobmaster.SubtaskStatus{State: s})
		}
		return out
	}
	for _, tc := range []struct {
		states []string
		want   string
	}{
		{nil, "CREATED"},
		{[]string{"CREATED", "DEPLOYING"}, "DEPLOYING"},
		{[]string{"DEPLOYING", "RUNNING"}, "RUNNING"},
		{[]string{"RUNNING", "FINISHED"}, "RUNNING"},
		{[]string{"FINISHED", "FINISHED"}, "FINISHED"},
		{[]string{"RUNNING", "CANCELING"}, "CANCELING"},
		{[]string{"CANCELED", "FINISHED"}, "CANCELED"},
		{[]string{"RUNNING", "FAILED", "CANCELING"}, "FAILED"},
	} {
		if got := vertexStatus(subs(tc.states...)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.states, got, tc.want)
		}
	}
}

func TestSumMetricsAddsCountersAndTakesTheSlowest(t *testing.T) {
	at := time.UnixMilli(5000)
	got := sumMetrics([]jobmaster.SubtaskStatus{
		{Metrics: control.TaskMetrics{RecordsIn: 3, RecordsOut: 4, BytesIn: 30, BytesOut: 40, BusyMsPerSecond: 100, BackPressuredMsPerSecond: 700, OutputBufferUsage: 0.9, Fuel: 1, MemoryPages: 2, Reported: at}},
		{Metrics: control.TaskMetrics{RecordsIn: 5, RecordsOut: 6, BytesIn: 50, BytesOut: 60, BusyMsPerSecond: 800, BackPressuredMsPerSecond: 100, OutputBufferUsage: 0.1, Fuel: 2, MemoryPages: 3}},
	})
	want := metricsBody{ReadRecords: 8, WriteRecords: 10, ReadBytes: 80, WriteBytes: 100, BusyMsPerSecond: 800, BackpressuredMsPerSecond: 700, OutputBufferUsage: 0.9, Fuel: 3, MemoryPages: 5, Reported: 5000}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestJSONProblemNamesTheField(t *testing.T) {
	var v runRequest
	for body, want := range map[string]string{
		`{"args": [1]}`:               `field "args" at byte 10: want a string, got a number`,
		`{"args": ["a", true]}`:       `field "args" at byte 15: want a string, got a boolean`,
		`{"parallelism":{}}`:          `field "parallelism" at byte 15: want a whole number in range, got an object`,
		`{"config": {"k": 1}}`:        `field "k" at byte 17: want a string, got a number`,
		`{"args": `:                   `syntax error at byte 9: the body ends too soon`,
		`{"name": "x", "nope": null}`: `json: unknown field "nope"`,
	} {
		err := jsonIn.Unmarshal([]byte(body), &v)
		if err == nil {
			t.Fatalf("%s decoded", body)
		}
		if got := jsonProblem([]byte(body), err); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

func TestLogCursorRoundTrips(t *testing.T) {
	q := cursorQuery(t, "a.t0.s0:4,b:9")
	if q.After["a.t0.s0"] != 4 || q.After["b"] != 9 {
		t.Fatalf("after: %v", q.After)
	}
	out := logsOf([]control.LogLine{{Source: "a.t0.s0", Seq: 5}, {Source: "c", Seq: 1}}, q)
	if out.Next != "a.t0.s0:5,b:9,c:1" {
		t.Errorf("next %q", out.Next)
	}
	if out2 := logsOf(nil, cursorQuery(t, ":7")); out2.Next != ":7" {
		t.Errorf("a TaskManager's own cursor: %q", out2.Next)
	}
}

func cursorQuery(t *testing.T, after string) control.LogQuery {
	t.Helper()
	r := &request{params: map[string]string{}}
	r.Request = mustRequest(t, "/jobs/x/logs?after="+after)
	q, err := logQuery(r)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestOperationsForgetTheOldestEnded(t *testing.T) {
	ops := newOperations(2)
	for i := range 2 {
		if err := ops.add(&operation{id: fmt.Sprint(i), tenant: "a", job: "j", kind: opSavepoint}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ops.add(&operation{id: "2"}); err == nil {
		t.Fatal("a third operation while two are in progress")
	}
	ops.finish("0", func(*operation) {})
	if err := ops.add(&operation{id: "2", tenant: "a", job: "j", kind: opSavepoint}); err != nil {
		t.Fatal(err)
	}
	if _, ok := ops.get("a", "j", "0", opSavepoint); ok {
		t.Error("the ended operation 0 is still kept")
	}
	if _, ok := ops.get("a", "j", "1", opSavepoint); !ok {
		t.Error("operation 1, in progress, was forgotten")
	}
	if _, ok := ops.get("b", "j", "1", opSavepoint); ok {
		t.Error("tenant b reads a's operation")
	}
	if _, ok := ops.get("a", "j", "1", opRescale); ok {
		t.Error("a savepoint read as a rescale")
	}
}

func mustRequest(t *testing.T, target string) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", "http://jm"+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
