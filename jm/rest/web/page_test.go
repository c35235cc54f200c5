package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm/rest/web"
)

// The page tests run the dashboard against a scripted REST API (the
// contract's shapes, docs/REST.md), so they pin what the page does with
// every figure exactly: rates from known diffs, hostile names shown as
// text, a 401 and a 404 handled. The cluster test (cluster_test.go) runs
// it against a real JobManager.

const (
	goodToken = "tok-3f9c"
	jobID     = "0a1b2c3d"
	tmID      = "tm-<b>1</b>"
	// hostile is what a tenant could name a job or put in a guest
	// exception; the page must show it as text and run nothing.
	hostile = `<img src=x onerror="window.pwned=1">"'&amp;<script>window.pwned=2</script>`
)

// fakeAPI answers the routes the dashboard calls. Each GET of the job
// advances its clock by one second and the source's records by 500, so
// the page's rate is exactly 500 records/s.
type fakeAPI struct {
	mu        sync.Mutex
	polls     int64
	savepoint string // the trigger's status answer, once triggered
	posts     []string
	wms       bool // answer watermarks for the map vertex
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, web.Prefix) || r.URL.Path == "/web" {
		web.Handler().ServeHTTP(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+goodToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"errors": []string{"no valid token: pass a tenant token"}})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Method + " " + r.URL.Path
	switch key {
	case "GET /config":
		writeJSON(w, 200, map[string]any{"refresh-interval": 300, "sluice-version": "test"})
	case "GET /overview":
		writeJSON(w, 200, map[string]any{"taskmanagers": 2, "slots-total": 8, "slots-available": 5, "jobs-running": 1, "jobs-finished": 3, "jobs-cancelled": 0, "jobs-failed": 1})
	case "GET /jobs/overview":
		writeJSON(w, 200, map[string]any{"jobs": []any{
			map[string]any{"jid": jobID, "name": hostile, "state": "RUNNING", "start-time": 1700000000000, "end-time": -1, "duration": 65000,
				"tasks": map[string]any{"total": 3, "running": 3}},
			map[string]any{"jid": "ffff", "name": "old", "state": "FINISHED", "start-time": 1690000000000, "end-time": 1690000005000, "duration": 5000,
				"tasks": map[string]any{"total": 1, "finished": 1}},
		}})
	case "GET /taskmanagers":
		writeJSON(w, 200, map[string]any{"taskmanagers": []any{f.tm()}})
	case "GET /taskmanagers/" + tmID:
		writeJSON(w, 200, f.tm())
	case "GET /jobs/" + jobID:
		f.polls++
		writeJSON(w, 200, f.job())
	case "GET /jobs/" + jobID + "/checkpoints":
		hist := []any{map[string]any{"id": 1, "status": "COMPLETED", "is_savepoint": false, "trigger_timestamp": 1700000001000,
			"end_to_end_duration": 120, "checkpointed_size": 2048, "state_size": 4096, "alignment_duration": 7,
			"num_subtasks": 3, "num_acknowledged_subtasks": 3, "external_path": "s3://b/cp/1"}}
		if f.savepoint == "COMPLETED" {
			hist = append([]any{map[string]any{"id": 2, "status": "COMPLETED", "is_savepoint": true, "trigger_timestamp": 1700000002000,
				"end_to_end_duration": 90, "checkpointed_size": 2048, "state_size": 4096, "num_subtasks": 3, "num_acknowledged_subtasks": 3,
				"external_path": "s3://b/sp/2"}}, hist...)
		}
		writeJSON(w, 200, map[string]any{"counts": map[string]any{"completed": len(hist), "in_progress": 0, "failed": 0, "restored": 0}, "history": hist})
	case "GET /jobs/" + jobID + "/exceptions":
		writeJSON(w, 200, map[string]any{"root-exception": "guest trap: " + hostile, "timestamp": 1700000003000, "module-digest": "sha256:abc123",
			"exceptionHistory": map[string]any{"truncated": false, "entries": []any{map[string]any{
				"exceptionName": "wasm trap", "stacktrace": "wasm stack:\n  0: main.tokenize\n  1: " + hostile, "timestamp": 1700000003000,
				"taskName": "tokenize", "taskManagerId": tmID}}}})
	case "GET /jobs/" + jobID + "/vertices/1/backpressure", "GET /jobs/" + jobID + "/vertices/2/backpressure", "GET /jobs/" + jobID + "/vertices/3/backpressure":
		ratio := map[string]float64{"1": 0.3, "2": 0.8, "3": 0.9}[strings.Split(r.URL.Path, "/")[4]]
		writeJSON(w, 200, map[string]any{"status": "ok", "subtasks": []any{map[string]any{"subtask": 0, "ratio": ratio}}})
	case "GET /jobs/" + jobID + "/vertices/1/watermarks", "GET /jobs/" + jobID + "/vertices/3/watermarks":
		writeJSON(w, 200, []any{})
	case "GET /jobs/" + jobID + "/vertices/2/watermarks":
		if f.wms {
			writeJSON(w, 200, []any{map[string]any{"id": "0.currentInputWatermark", "value": "1700000000123"}})
		} else {
			writeJSON(w, 200, []any{})
		}
	case "GET /jobs/" + jobID + "/vertices/1", "GET /jobs/" + jobID + "/vertices/2", "GET /jobs/" + jobID + "/vertices/3":
		// Subtasks 1/0 and 2/1 run on tmID (32 and 16 pages); the rest elsewhere.
		vid := strings.Split(r.URL.Path, "/")[4]
		sub := func(i int, tm string, pages int) map[string]any {
			return map[string]any{"subtask": i, "status": "RUNNING", "attempt": 0, "taskmanager-id": tm,
				"metrics": map[string]any{"read-records": 7, "write-records": 9, "memory-pages": pages, "reported": 1}}
		}
		subs := map[string][]any{"1": {sub(0, tmID, 32)}, "2": {sub(0, "tm-2", 8), sub(1, tmID, 16)}, "3": {sub(0, "tm-2", 8)}}[vid]
		writeJSON(w, 200, map[string]any{"id": vid, "name": "task " + vid, "parallelism": len(subs), "subtasks": subs})
	case "GET /jobs/" + jobID + "/logs":
		if r.URL.Query().Get("limit") == "" {
			writeJSON(w, 400, map[string]any{"errors": []string{"the page must bound the lines it asks for"}})
			return
		}
		writeJSON(w, 200, map[string]any{"next": "tm:2", "lines": []any{
			map[string]any{"time": 1700000004000, "level": "INFO", "task": "tokenize", "subtask": 1, "message": "guest says " + hostile, "dropped": 3},
			map[string]any{"time": 1700000005000, "level": "WARN", "task": "tokenize", "subtask": 1, "message": "slow", "attrs": "ms=12"},
		}})
	case "POST /jobs/" + jobID + "/savepoints":
		f.posts = append(f.posts, key)
		f.savepoint = "IN_PROGRESS"
		writeJSON(w, 202, map[string]any{"request-id": "req-1"})
	case "GET /jobs/" + jobID + "/savepoints/req-1":
		st := f.savepoint
		f.savepoint = "COMPLETED" // the second poll finds it done
		if st == "COMPLETED" {
			writeJSON(w, 200, map[string]any{"status": map[string]any{"id": "COMPLETED"}, "operation": map[string]any{"location": "s3://b/sp/2"}})
		} else {
			writeJSON(w, 200, map[string]any{"status": map[string]any{"id": "IN_PROGRESS"}})
		}
	case "PATCH /jobs/" + jobID:
		f.posts = append(f.posts, key+"?"+r.URL.RawQuery)
		writeJSON(w, 202, map[string]any{})
	default:
		writeJSON(w, 404, map[string]any{"errors": []string{"no route " + key}})
	}
}

func (f *fakeAPI) tm() map[string]any {
	// Flink's timeSinceLastHeartbeat is the time of the last heartbeat.
	return map[string]any{"id": tmID, "path": "127.0.0.1:4100", "dataPort": 4101, "timeSinceLastHeartbeat": time.Now().UnixMilli() - 400,
		"slotsNumber": 4, "freeSlots": 1, "hardware": map[string]any{"cpuCores": 2, "physicalMemory": 8 << 30},
		"metrics": map[string]any{"slotsTotal": 4, "heapBytes": 5 << 20}}
}

func (f *fakeAPI) job() map[string]any {
	n := f.polls
	metrics := func(in, out int64) map[string]any {
		return map[string]any{"read-records": in, "write-records": out, "read-bytes": in * 10, "write-bytes": out * 10,
			"busy-ms-per-second": 300, "backpressured-ms-per-second": 0, "reported": 1700000000000 + n*1000}
	}
	return map[string]any{"jid": jobID, "name": hostile, "state": "RUNNING", "start-time": 1700000000000, "end-time": -1, "duration": 65000,
		"now": 1700000000000 + n*1000,
		"vertices": []any{
			map[string]any{"id": "1", "name": "Source: lines", "parallelism": 1, "status": "RUNNING", "metrics": metrics(0, 500*n)},
			map[string]any{"id": "2", "name": hostile, "parallelism": 2, "status": "RUNNING", "metrics": metrics(500*n, 1000*n)},
			// no report yet: zeros the page must show as "–", not 0
			map[string]any{"id": "3", "name": "Sink: out", "parallelism": 1, "status": "RUNNING",
				"metrics": map[string]any{"read-records": 0, "write-records": 0, "read-bytes": 0, "write-bytes": 0, "reported": 0}},
		},
		"plan": map[string]any{"jid": jobID, "name": hostile, "type": "STREAMING", "nodes": []any{
			map[string]any{"id": "1", "parallelism": 1, "operator": "Source", "description": "Source: lines"},
			map[string]any{"id": "2", "parallelism": 2, "operator": "FlatMap", "description": hostile,
				"inputs": []any{map[string]any{"num": 0, "id": "1", "ship_strategy": "REBALANCE"}}},
			map[string]any{"id": "3", "parallelism": 1, "operator": "Sink", "description": "Sink: out",
				"inputs": []any{map[string]any{"num": 0, "id": "2", "ship_strategy": "HASH"}}},
		}},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// setToken types tok into the token box and submits it.
func (tb *tab) setToken(tok string) {
	tb.t.Helper()
	js, _ := json.Marshal(tok)
	tb.eval(fmt.Sprintf(`document.getElementById('token').value = %s; document.getElementById('token-save').click(); ''`, js), nil)
}

func TestDashboardAgainstScriptedAPI(t *testing.T) {
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	tb := openTab(t)
	tb.open(srv.URL + "/web/")

	// No token, then a wrong one: the page says which.
	tb.waitJS(10*time.Second, `(() => { const a = document.getElementById('auth'); return !a.hidden && a.textContent.includes('Token required') ? '' : 'auth banner: ' + a.hidden + ' ' + a.textContent; })()`)
	tb.setToken("wrong")
	tb.waitJS(10*time.Second, `(() => { const a = document.getElementById('auth'); return !a.hidden && a.textContent.includes('Token invalid') ? '' : 'auth banner: ' + a.textContent; })()`)
	tb.setToken(goodToken)
	tb.waitJS(10*time.Second, `document.getElementById('auth').hidden && document.querySelector('#ov-slots-total .value') ? '' : 'no overview yet'`)
	var stored string
	tb.eval(`sessionStorage.getItem('sluice-token')`, &stored)
	if stored != goodToken {
		t.Errorf("sessionStorage holds %q, want the token", stored)
	}

	// Overview: every figure of /overview, the running job, the TaskManager.
	for id, want := range map[string]string{"ov-taskmanagers": "2", "ov-slots-total": "8", "ov-slots-available": "5", "ov-jobs-running": "1", "ov-jobs-finished": "3", "ov-jobs-failed": "1"} {
		if got := tb.text("#" + id + " .value"); got != want {
			t.Errorf("overview %s = %q, want %q", id, got, want)
		}
	}
	var runningRows int
	tb.eval(`document.querySelectorAll('#job-table tr.job-row').length`, &runningRows)
	if runningRows != 1 {
		t.Errorf("overview lists %d running jobs, want 1", runningRows)
	}

	// The job list: both jobs, the hostile name as text.
	tb.goTo("#/jobs")
	var names []string
	tb.eval(`[...document.querySelectorAll('#job-table tr.job-row td:first-child')].map((td) => td.textContent)`, &names)
	if len(names) != 2 || names[0] != hostile || names[1] != "old" {
		t.Errorf("job list names %q, want [%q old]", names, hostile)
	}

	// The job page.
	tb.goTo("#/jobs/" + jobID)
	if got := tb.text("main h1"); !strings.HasPrefix(got, hostile) {
		t.Errorf("job title %q, want the name as text", got)
	}
	// The graph: three vertices, two edges with their ship strategies,
	// coloured by backpressure (0.3 → low, 0.8 → high; the sink has no
	// report yet, so none, whatever the route says).
	var nodes []struct{ ID, BP, Text string }
	tb.eval(`[...document.querySelectorAll('#dag-svg g.node')].map((g) => ({ID: g.dataset.vertexId, BP: g.dataset.backpressure, Text: g.textContent}))`, &nodes)
	if len(nodes) != 3 {
		t.Fatalf("graph nodes %+v, want 3", nodes)
	}
	for i, want := range []string{"low", "high", "none"} {
		if nodes[i].BP != want || nodes[i].ID != fmt.Sprint(i+1) {
			t.Errorf("graph node %d: %+v, want id %d backpressure %s", i, nodes[i], i+1, want)
		}
	}
	if !strings.Contains(nodes[1].Text, "Parallelism: 2") {
		t.Errorf("graph node 2 text %q lacks its parallelism", nodes[1].Text)
	}
	var edges []string
	tb.eval(`[...document.querySelectorAll('#dag-svg g.edge')].map((g) => g.dataset.from + '>' + g.dataset.to + ' ' + g.textContent)`, &edges)
	if strings.Join(edges, ",") != "1>2 REBALANCE,2>3 HASH" {
		t.Errorf("graph edges %q, want 1>2 REBALANCE, 2>3 HASH", edges)
	}
	// The layout is by depth: each vertex one column right of its input.
	var xs []float64
	tb.eval(`[...document.querySelectorAll('#dag-svg g.node')].map((g) => g.getBBox().x + g.transform.baseVal[0].matrix.e)`, &xs)
	if len(xs) != 3 || !(xs[0] < xs[1] && xs[1] < xs[2]) {
		t.Errorf("graph columns at x %v, want left to right by depth", xs)
	}

	// Records, and rates from the diff of two refreshes: 500 records per
	// second of server time out of the source, 500 in and 1000 out of the
	// map; the sink has no report yet and shows none.
	tb.waitJS(10*time.Second, `(() => {
		const v = (id, cls) => document.querySelector('#vertex-table tr[data-vertex-id="' + id + '"] td.' + cls).dataset.value;
		const want = [['1', 'rate-records-out', '500'], ['2', 'rate-records-in', '500'], ['2', 'rate-records-out', '1000'], ['2', 'rate-bytes-in', '5000'], ['3', 'rate-records-in', '']];
		for (const [id, cls, w] of want) if (v(id, cls) !== w) return 'vertex ' + id + ' ' + cls + ' = ' + v(id, cls) + ', want ' + w;
		return '';
	})()`)
	var sinkRecords string
	tb.eval(`document.querySelector('#vertex-table tr[data-vertex-id="3"] td.read-records').textContent`, &sinkRecords)
	if sinkRecords != "–" {
		t.Errorf("sink without metrics shows records %q, want –", sinkRecords)
	}
	var bpCells []string
	tb.eval(`[...document.querySelectorAll('#vertex-table td.backpressure')].map((td) => td.dataset.level)`, &bpCells)
	if strings.Join(bpCells, ",") != "low,high,none" {
		t.Errorf("backpressure column %q, want low,high,none", bpCells)
	}

	// Watermarks: none yet, then one.
	if got := tb.text("#watermarks"); got != "No watermarks." {
		t.Errorf("watermarks %q, want No watermarks.", got)
	}
	api.mu.Lock()
	api.wms = true
	api.mu.Unlock()
	tb.waitJS(10*time.Second, `document.querySelectorAll('#watermarks tr.watermark-row').length === 1 ? '' : 'no watermark row'`)
	if got := tb.text("#watermarks tr.watermark-row"); !strings.Contains(got, "0.currentInputWatermark") || !strings.Contains(got, "1700000000123") {
		t.Errorf("watermark row %q", got)
	}

	// Checkpoints: the history with duration, size and alignment.
	if got := tb.text(`#checkpoint-history tr[data-cid="1"]`); !strings.Contains(got, "120 ms") || !strings.Contains(got, "2.0 KiB") || !strings.Contains(got, "7 ms") || !strings.Contains(got, "3 / 3") {
		t.Errorf("checkpoint 1 row %q lacks duration 120 ms, size 2.0 KiB, alignment 7 ms, 3 / 3 acks", got)
	}
	// Exceptions: the guest's Wasm stack and the module digest, as text.
	if got := tb.text("#exceptions pre.stacktrace"); !strings.Contains(got, "main.tokenize") || !strings.Contains(got, hostile) {
		t.Errorf("stack trace %q", got)
	}
	if got := tb.text("#module-digest"); got != "sha256:abc123" {
		t.Errorf("module digest %q", got)
	}

	// The job's log: oldest first, the guest's text as text.
	if got := tb.text("#job-log"); !strings.Contains(got, "tokenize#1  (3 older lines dropped) guest says "+hostile) || !strings.Contains(got, "WARN   tokenize#1  slow  ms=12") {
		t.Errorf("job log %q", got)
	}

	// Nothing the server sent became markup or ran.
	var injected struct {
		Imgs, Scripts int
		Pwned         any
	}
	tb.eval(`({Imgs: document.querySelectorAll('main img').length, Scripts: document.querySelectorAll('main script').length, Pwned: window.pwned ?? null})`, &injected)
	if injected.Imgs != 0 || injected.Scripts != 0 || injected.Pwned != nil {
		t.Errorf("server data became markup: %+v", injected)
	}

	// The savepoint button: a POST, the trigger's status polled to
	// COMPLETED, the savepoint in the history.
	tb.click("#action-savepoint")
	tb.waitJS(10*time.Second, `(() => { const s = document.getElementById('trigger-status'); return s && s.dataset.status === 'COMPLETED' && s.textContent.includes('s3://b/sp/2') ? '' : 'trigger: ' + (s ? s.textContent : 'none'); })()`)
	tb.waitJS(10*time.Second, `document.querySelector('#checkpoint-history tr[data-savepoint="true"]') ? '' : 'no savepoint in the history'`)

	// Cancel takes two clicks.
	tb.click("#action-cancel")
	tb.waitJS(10*time.Second, `document.getElementById('action-cancel').textContent === 'Confirm cancel' ? '' : 'no confirm step'`)
	api.mu.Lock()
	posts := strings.Join(api.posts, ",")
	api.mu.Unlock()
	if posts != "POST /jobs/"+jobID+"/savepoints" {
		t.Errorf("after one cancel click the API saw %q, want only the savepoint", posts)
	}
	tb.click("#action-cancel")
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		api.mu.Lock()
		defer api.mu.Unlock()
		if got, want := strings.Join(api.posts, ","), "POST /jobs/"+jobID+"/savepoints,PATCH /jobs/"+jobID+"?mode=cancel"; got != want {
			return fmt.Errorf("the API saw %q, want %q", got, want)
		}
		return nil
	})

	// The TaskManager page: details, slots, memory; the logs route is
	// missing here (404), which the page says, keeping the details.
	tb.goTo("#/taskmanagers/" + url.PathEscape(tmID)) // its "/" must not split the route
	if got := tb.text("#tm-slots-used .value"); got != "3" {
		t.Errorf("slots in use %q, want 3", got)
	}
	if got := tb.text("#tm-memory"); !strings.Contains(got, "8.0 GiB") || !strings.Contains(got, "5.0 MiB") || !strings.Contains(got, "3.0 MiB in 2 instances") || strings.Contains(got, "slotsTotal") {
		t.Errorf("memory %q: want 8.0 GiB physical, a 5.0 MiB heap, 3.0 MiB of guest memory in 2 instances, and no slot figures", got)
	}
	var here []string
	tb.eval(`[...document.querySelectorAll('#tm-tasks tr.task-row')].map((tr) => tr.dataset.vertexId + '/' + tr.dataset.subtask + ' ' + tr.lastChild.textContent)`, &here)
	if strings.Join(here, ",") != "1/0 2.0 MiB,2/1 1.0 MiB" {
		t.Errorf("tasks on the TaskManager %q, want 1/0 2.0 MiB, 2/1 1.0 MiB", here)
	}
	if got := tb.text("#tm-details"); !strings.Contains(got, "ago)") {
		t.Errorf("details %q: want the last heartbeat's time and age", got)
	}
	if got := tb.text("#tm-logs-missing"); !strings.Contains(got, "404") {
		t.Errorf("missing logs say %q", got)
	}
	if got := tb.text("main h1"); got != "TaskManager "+tmID {
		t.Errorf("TaskManager title %q", got)
	}

	// An unknown job: the API's 404 message.
	tb.goTo("#/jobs/nope")
	if got := tb.text("#not-found"); !strings.Contains(got, "no route GET /jobs/nope") {
		t.Errorf("unknown job shows %q", got)
	}
}
