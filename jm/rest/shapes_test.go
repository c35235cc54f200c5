package rest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// upload stores wasm through the API and returns its digest.
func (c caller) upload(wasm []byte) string {
	c.t.Helper()
	r := c.doType("POST", "/modules", wasm, "application/wasm")
	if r.status != 200 {
		c.t.Fatalf("upload: %d %s", r.status, r.raw)
	}
	return r.obj()["digest"].(string)
}

// run submits a job through the API and returns its id.
func (c caller) run(digest string, req map[string]any) string {
	c.t.Helper()
	return c.must(200, "POST", "/modules/"+digest+"/run", jsonBody(c.t, req)).obj()["jobid"].(string)
}

// TestShapesOfAWordCount runs the word count on an open cluster (no token
// needed) through the API and checks the shapes of the job's routes
// against what the job is: two tasks joined by a hash exchange, every
// subtask finished.
func TestShapesOfAWordCount(t *testing.T) {
	c, base := startCluster(t, false, 8)
	api := caller{t, base, ""}
	in := filepath.Join(localtest.ModuleRoot(t), "examples/wordcount/testdata/hamlet.txt")
	args := []string{"--input", in}
	inputs, err := client.StageInputs(context.Background(), c.Blob(), client.DefaultTenant, args)
	if err != nil {
		t.Fatal(err)
	}
	digest := api.upload(localtest.Guest(t, "examples/wordcount"))
	if mods := api.must(200, "GET", "/modules", nil); path(t, mods.body, "modules", 0, "digest") != digest {
		t.Fatalf("modules: %s", mods.raw)
	}
	id := api.run(digest, map[string]any{"args": args, "parallelism": 2, "config": client.InputsConfig(nil, inputs)})
	api.waitState(id, "FINISHED", 2*time.Minute)

	job := api.must(200, "GET", "/jobs/"+id, nil).obj()
	for _, k := range []string{"jid", "name", "state", "start-time", "end-time", "duration", "now", "timestamps", "vertices", "plan"} {
		if _, ok := job[k]; !ok {
			t.Errorf("GET /jobs/:id has no %q: %v", k, keysOf(job))
		}
	}
	if job["name"] != "wordcount" || job["jid"] != id || job["end-time"].(float64) < job["start-time"].(float64) {
		t.Errorf("job: %v", job)
	}
	vs := job["vertices"].([]any)
	wantNames := []string{"lines -> tokenize -> word", "count -> format -> out"}
	if len(vs) != len(wantNames) {
		t.Fatalf("vertices: %v", vs)
	}
	for i, v := range vs {
		v := v.(map[string]any)
		if v["name"] != wantNames[i] || v["parallelism"] != float64(2) || v["status"] != "FINISHED" {
			t.Errorf("vertex %d: %v", i, v)
		}
		if n := path(t, v, "tasks", "FINISHED"); n != float64(2) {
			t.Errorf("vertex %d: %v finished subtasks, want 2", i, n)
		}
		for _, k := range []string{"read-records", "write-records", "read-bytes", "write-bytes", "busy-ms-per-second", "backpressured-ms-per-second"} {
			if _, ok := path(t, v, "metrics").(map[string]any)[k]; !ok {
				t.Errorf("vertex %d metrics lack %q", i, k)
			}
		}
	}
	src, sink := vs[0].(map[string]any)["id"].(string), vs[1].(map[string]any)["id"].(string)

	plan := path(t, api.must(200, "GET", "/jobs/"+id+"/plan", nil).body, "plan")
	if path(t, plan, "jid") != id || path(t, plan, "type") != "STREAMING" {
		t.Errorf("plan: %v", plan)
	}
	nodes := path(t, plan, "nodes").([]any)
	if len(nodes) != 2 || path(t, nodes[0], "id") != src || path(t, nodes[1], "description") != wantNames[1] {
		t.Fatalf("plan nodes: %v", nodes)
	}
	if in := path(t, nodes[1], "inputs", 0).(map[string]any); in["id"] != src || in["ship_strategy"] != "HASH" || in["num"] != float64(0) {
		t.Errorf("the count's input: %v", in)
	}
	if _, ok := nodes[0].(map[string]any)["inputs"]; ok {
		t.Errorf("the source has inputs: %v", nodes[0])
	}
	if got := path(t, job, "plan", "nodes"); fmt.Sprint(got) != fmt.Sprint(nodes) {
		t.Errorf("GET /jobs/:id's plan differs from /plan's: %v", got)
	}

	ov := path(t, api.must(200, "GET", "/jobs/overview", nil).body, "jobs", 0).(map[string]any)
	if ov["jid"] != id || ov["state"] != "FINISHED" || path(t, ov, "tasks", "total") != float64(4) || path(t, ov, "tasks", "finished") != float64(4) {
		t.Errorf("jobs overview: %v", ov)
	}
	if o := api.must(200, "GET", "/overview", nil).obj(); o["jobs-finished"] != float64(1) || o["taskmanagers"] != float64(1) || o["slots-total"] != float64(8) {
		t.Errorf("overview: %v", o)
	}

	for _, vid := range []string{src, sink} {
		v := api.must(200, "GET", "/jobs/"+id+"/vertices/"+vid, nil).obj()
		subs := v["subtasks"].([]any)
		if v["id"] != vid || len(subs) != 2 {
			t.Fatalf("vertex %s: %v", vid, v)
		}
		for i, s := range subs {
			s := s.(map[string]any)
			if s["subtask"] != float64(i) || s["status"] != "FINISHED" || s["taskmanager-id"] == "" || s["host"] == "" {
				t.Errorf("vertex %s subtask %d: %v", vid, i, s)
			}
		}
		if st := api.must(200, "GET", "/jobs/"+id+"/vertices/"+vid+"/subtasks", nil).obj()["subtasks"]; fmt.Sprint(st) != fmt.Sprint(subs) {
			t.Errorf("/subtasks differs from the vertex's: %v", st)
		}
		bp := api.must(200, "GET", "/jobs/"+id+"/vertices/"+vid+"/backpressure", nil).obj()
		if bp["status"] != "ok" || len(bp["subtasks"].([]any)) != 2 || !strings.Contains("ok low high", bp["backpressureLevel"].(string)) {
			t.Errorf("backpressure: %v", bp)
		}
		if w := api.must(200, "GET", "/jobs/"+id+"/vertices/"+vid+"/watermarks", nil); string(w.raw) != "[]\n" {
			t.Errorf("watermarks: %s", w.raw)
		}
	}
	ex := api.must(200, "GET", "/jobs/"+id+"/exceptions", nil).obj()
	if ex["root-exception"] != nil || len(path(t, ex, "exceptionHistory", "entries").([]any)) != 0 || ex["module-digest"] != digest {
		t.Errorf("exceptions of a job that never failed: %v", ex)
	}
}

// TestShapesOfCheckpointsAndFailures checks the checkpoint routes on a job
// that checkpoints and is stopped with a savepoint, and
// the exceptions of a job that fails with a guest panic.
func TestShapesOfCheckpointsAndFailures(t *testing.T) {
	_, base := startCluster(t, false, 8)
	api := caller{t, base, ""}
	spin := api.upload(localtest.Guest(t, "local/testdata/spin"))
	id := api.run(spin, map[string]any{"parallelism": 1, "config": map[string]string{"execution.checkpointing.interval": "50ms"}})
	var latest map[string]any
	testutil.CheckFor(t, 2*time.Minute, 20*time.Millisecond, func() error {
		cps := api.must(200, "GET", "/jobs/"+id+"/checkpoints", nil).obj()
		latest, _ = path(t, cps, "latest", "completed").(map[string]any)
		if latest == nil {
			return fmt.Errorf("no completed checkpoint yet: %v", cps["counts"])
		}
		return nil
	})
	for k, want := range map[string]any{"status": "COMPLETED", "is_savepoint": false, "checkpoint_type": "CHECKPOINT"} {
		if latest[k] != want {
			t.Errorf("latest completed checkpoint: %s = %v, want %v", k, latest[k], want)
		}
	}
	if n := latest["num_subtasks"].(float64); n < 1 || latest["num_acknowledged_subtasks"] != n || latest["external_path"] == "" ||
		latest["latest_ack_timestamp"].(float64) < latest["trigger_timestamp"].(float64) {
		t.Errorf("latest completed checkpoint: %v", latest)
	}
	if a, ok := latest["alignment_duration"].(float64); !ok || a < 0 {
		t.Errorf("latest completed checkpoint: %v", latest)
	}
	cid := fmt.Sprint(latest["id"])
	if d := api.must(200, "GET", "/jobs/"+id+"/checkpoints/details/"+cid, nil).obj(); fmt.Sprint(d["id"]) != cid || d["status"] != "COMPLETED" {
		t.Errorf("details of checkpoint %s: %v", cid, d)
	}
	if cfg := api.must(200, "GET", "/jobs/"+id+"/checkpoints/config", nil).obj(); cfg["enabled"] != true || cfg["interval"] != float64(50) || cfg["mode"] != "exactly_once" {
		t.Errorf("checkpoint config: %v", cfg)
	}
	checkLogsAndStacks(t, api, id)

	op := api.must(202, "POST", "/jobs/"+id+"/stop", []byte(`{}`)).obj()["request-id"].(string)
	res := api.waitOperation("/jobs/" + id + "/savepoints/" + op)
	if res["failure-cause"] != nil || !strings.Contains(res["location"].(string), "/savepoints/") {
		t.Fatalf("stop: %v", res)
	}
	api.waitState(id, "FINISHED", time.Minute)
	sp := path(t, api.must(200, "GET", "/jobs/"+id+"/checkpoints", nil).body, "latest", "savepoint").(map[string]any)
	if sp["is_savepoint"] != true || sp["savepoint_id"] != res["savepoint-id"] || sp["checkpoint_type"] != "SAVEPOINT" {
		t.Errorf("latest savepoint: %v, stop answered %v", sp, res)
	}
	// A stop cancels the tasks after the savepoint; they report what they
	// counted up to it, in Flink's shape.
	acc := api.must(200, "GET", "/jobs/"+id+"/accumulators", nil)
	if raw := string(acc.raw); !strings.HasPrefix(raw, `{"job-accumulators":[],"user-task-accumulators":[{"name":"emitted","type":"Long","value":"`) ||
		strings.Contains(raw, `"value":"0"`) {
		t.Errorf("accumulators: %s", acc.raw)
	}

	trap := localtest.Guest(t, "local/testdata/trap")
	tdigest := api.upload(trap)
	tid := api.run(tdigest, map[string]any{"parallelism": 1})
	api.waitState(tid, "FAILED", 2*time.Minute)
	ex := api.must(200, "GET", "/jobs/"+tid+"/exceptions", nil).obj()
	root, _ := ex["root-exception"].(string)
	entry := path(t, ex, "exceptionHistory", "entries", 0).(map[string]any)
	if !strings.Contains(root, "explodeOnRecord") || entry["stacktrace"] != root || ex["module-digest"] != tdigest || ex["timestamp"] != entry["timestamp"] {
		t.Errorf("exceptions: %v", ex)
	}
	if name, _ := entry["taskName"].(string); !strings.Contains(name, "explode") || entry["taskManagerId"] == nil {
		t.Errorf("exception entry names no task or TaskManager: %v", entry)
	}
	if os.Getenv("SLUICE_REST_DUMP") != "" {
		t.Logf("exceptions: %s", api.must(200, "GET", "/jobs/"+tid+"/exceptions", nil).raw)
	}
}

// checkLogsAndStacks checks the log, stack and flame graph routes on a
// running job: its tasks' host events are logged, the cursor moves past
// them, and its guests' stacks have named frames.
func checkLogsAndStacks(t *testing.T, api caller, id string) {
	t.Helper()
	var logs map[string]any
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		logs = api.must(200, "GET", "/jobs/"+id+"/logs", nil).obj()
		if len(logs["lines"].([]any)) == 0 {
			return fmt.Errorf("no log lines of job %s yet", id)
		}
		return nil
	})
	for _, l := range logs["lines"].([]any) {
		l := l.(map[string]any)
		if l["task"] == "" || l["source"] == "" || l["seq"].(float64) < 1 || l["time"].(float64) <= 0 || l["taskmanager-id"] == "" {
			t.Errorf("log line: %v", l)
		}
	}
	next := logs["next"].(string)
	last := map[string]float64{}
	for _, part := range strings.Split(next, ",") {
		i := strings.LastIndexByte(part, ':')
		var n float64
		fmt.Sscan(part[i+1:], &n)
		last[part[:i]] = n
	}
	for _, l := range api.must(200, "GET", "/jobs/"+id+"/logs?after="+next, nil).obj()["lines"].([]any) {
		l := l.(map[string]any)
		if l["seq"].(float64) <= last[l["source"].(string)] {
			t.Errorf("after %s: an old line again: %v", next, l)
		}
	}
	if r := api.do("GET", "/jobs/"+id+"/logs?after=nonsense", nil); r.status != 400 {
		t.Errorf("a bad cursor: %d %s", r.status, r.raw)
	}

	var stacks []any
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		stacks = api.must(200, "GET", "/jobs/"+id+"/stacks", nil).obj()["stacks"].([]any)
		for _, s := range stacks {
			if s.(map[string]any)["total"].(float64) > 0 {
				return nil
			}
		}
		return fmt.Errorf("no stack sampled yet: %v", stacks)
	})
	for _, s := range stacks {
		s := s.(map[string]any)
		if s["task"] == "" || s["taskmanager-id"] == "" || s["execution-id"] == "" {
			t.Errorf("stack: %v", s)
		}
	}
	vid := path(t, api.must(200, "GET", "/jobs/"+id, nil).body, "vertices", 0, "id").(string)
	fg := api.must(200, "GET", "/jobs/"+id+"/vertices/"+vid+"/flamegraph?duration=300", nil).obj()
	root := fg["data"].(map[string]any)
	if root["name"] != "root" || fg["endTimestamp"].(float64) <= 0 {
		t.Fatalf("flame graph: %v", fg)
	}
	var sum float64
	for _, c := range root["children"].([]any) {
		c := c.(map[string]any)
		if c["name"] == "" {
			t.Errorf("a frame without a name: %v", c)
		}
		sum += c["value"].(float64)
	}
	if sum != root["value"].(float64) {
		t.Errorf("flame graph: the root's %v samples are not its children's %v", root["value"], sum)
	}
	if r := api.do("GET", "/jobs/"+id+"/vertices/"+vid+"/flamegraph?duration=999999", nil); r.status != 400 {
		t.Errorf("a flame graph too long: %d %s", r.status, r.raw)
	}
}
