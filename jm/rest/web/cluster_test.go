package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// screenshotsEnv names the directory the cluster test saves its
// screenshots to (docs/ for the committed ones); unset, a temporary one.
const screenshotsEnv = "SLUICE_DASHBOARD_SCREENSHOTS"

const aliceToken = "slc_dashboard_test_alice"

// TestDashboardOnACluster is what a person does with the dashboard: on an
// embedded cluster with tenants and the REST API, it runs the word count
// to the end and a slow job that keeps running, opens every page in
// headless Chromium, checks what they show against the REST API and the
// word count's known figures, watches the running job's rates, takes a
// savepoint from the page and stops the job with another, and saves a
// screenshot of each page.
func TestDashboardOnACluster(t *testing.T) {
	tb := openTab(t) // first: without a browser the test skips before building guests
	shots := os.Getenv(screenshotsEnv)
	if shots == "" {
		shots = t.TempDir()
	}
	wordcount := localtest.Guest(t, "examples/wordcount")
	slow := localtest.Guest(t, "examples/exactlyonce")

	ts, err := auth.ParseTenants([]byte(`{"tenants":[{"name":"alice","token_sha256":["` + auth.HashToken(aliceToken) + `"],"policy":{"config_keys":["*","sandbox.clock=wall"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 4, RESTListenAddr: "127.0.0.1:0",
		JobManager: func(j *jm.Config) { j.Tenants = ts }})
	base := "http://" + c.RESTAddr()
	cl, err := c.Cluster.Client(client.WithToken(aliceToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The word count, to the end.
	input := localtest.ModuleRoot(t) + "/examples/wordcount/testdata/hamlet.txt"
	known := countWords(t, input)
	args := []string{"--input", input}
	inputs, err := client.StageInputs(ctx, c.Blob(), "alice", args)
	if err != nil {
		t.Fatal(err)
	}
	wcDigest, err := cl.UploadModule(ctx, wordcount)
	if err != nil {
		t.Fatal(err)
	}
	wcID, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: wcDigest, Args: args, Parallelism: 2, Config: client.InputsConfig(restarts(), inputs)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.WaitJob(ctx, wcID)
	if err != nil || res.State != client.StateFinished {
		t.Fatalf("word count: %v %s %s", err, res.State, res.Failure)
	}
	if len(res.Records) != known.distinct {
		t.Fatalf("word count collected %d records, want %d distinct words", len(res.Records), known.distinct)
	}

	// The slow job: paced by the wall clock, it runs for hours unless stopped.
	digest, err := cl.UploadModule(ctx, slow)
	if err != nil {
		t.Fatal(err)
	}
	slowID, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Parallelism: 2,
		Args:   []string{"--keys", "4", "--per-key", "100000000", "--rate", "400"},
		Config: withRestarts(map[string]string{jobconfig.KeyClock: string(jobconfig.ClockWall), jobconfig.KeyCheckpointInterval: "3s"})})
	if err != nil {
		t.Fatal(err)
	}
	localtest.WaitAllRunning(t, asAlice{c, cl}, slowID, time.Minute)

	// GET / leads to the dashboard, which asks for a token first.
	tb.open(base + "/")
	var path string
	tb.eval(`location.pathname`, &path)
	if path != "/web/" {
		t.Errorf("GET / ended at %s, want /web/", path)
	}
	tb.waitJS(30*time.Second, `(() => { const a = document.getElementById('auth'); return !a.hidden && a.textContent.includes('Token required') ? '' : 'no token banner: ' + a.textContent; })()`)
	tb.setToken(aliceToken)

	// Overview.
	tb.waitJS(30*time.Second, `(() => {
		const v = (id) => (document.querySelector('#' + id + ' .value') || {dataset: {}}).dataset.value;
		const want = {'ov-taskmanagers': '2', 'ov-slots-total': '8', 'ov-jobs-running': '1', 'ov-jobs-finished': '1', 'ov-jobs-failed': '0'};
		for (const [id, w] of Object.entries(want)) if (v(id) !== w) return id + ' = ' + v(id) + ', want ' + w;
		return document.querySelectorAll('#job-table tr.job-row').length === 1 ? '' : 'the running job is not listed';
	})()`)
	tb.screenshot(shots, "dashboard-overview")

	// Job list: both jobs, by name and state.
	tb.goTo("#/jobs")
	var jobs map[string]string
	tb.eval(`Object.fromEntries([...document.querySelectorAll('#job-table tr.job-row')].map((tr) => [tr.dataset.jid, tr.querySelector('td').textContent + ' ' + tr.dataset.state]))`, &jobs)
	if jobs[wcID] != "wordcount FINISHED" || jobs[slowID] != "exactlyonce RUNNING" {
		t.Errorf("job list %v, want %s wordcount FINISHED and %s exactlyonce RUNNING", jobs, wcID, slowID)
	}
	tb.screenshot(shots, "dashboard-jobs")

	// The word count's page: its graph as the REST plan has it, and its
	// records per operator.
	tb.goTo("#/jobs/" + wcID)
	var job restJob
	getJSON(t, base+"/jobs/"+wcID, &job)
	checkGraph(t, tb, job)
	checkRecords(t, tb, job, known)
	tb.screenshot(shots, "dashboard-job-wordcount")

	// The running job: its records grow and its rates are measured
	// between refreshes.
	tb.goTo("#/jobs/" + slowID)
	getJSON(t, base+"/jobs/"+slowID, &job)
	checkGraph(t, tb, job)
	if metricsReported(job) {
		src := job.Vertices[0].ID
		var first float64
		testutil.CheckFor(t, time.Minute, 100*time.Millisecond, func() error {
			r, ok := cellValue(tb, src, "write-records")
			rate, rok := cellValue(tb, src, "rate-records-out")
			if !ok || !rok || r <= 0 || rate <= 0 {
				return fmt.Errorf("source %s: records out %v (%v), rate %v (%v); want both > 0", src, r, ok, rate, rok)
			}
			first = r
			return nil
		})
		testutil.CheckFor(t, time.Minute, 100*time.Millisecond, func() error {
			if r, _ := cellValue(tb, src, "write-records"); r <= first {
				return fmt.Errorf("source records out stays at %v", r)
			}
			return nil
		})
	} else {
		t.Logf("the TaskManagers report no task metrics yet (reported = 0): the rates cannot move; checked that the page shows none")
	}

	// A savepoint from the page: the trigger completes and the savepoint
	// is in the checkpoint history.
	tb.click("#action-savepoint")
	tb.waitJS(2*time.Minute, `(() => { const s = document.getElementById('trigger-status'); return s && s.dataset.status === 'COMPLETED' ? '' : 'savepoint: ' + (s ? s.textContent : 'not triggered'); })()`)
	tb.waitJS(30*time.Second, `document.querySelector('#checkpoint-history tr[data-savepoint="true"][data-status="COMPLETED"]') ? '' : 'no completed savepoint in the history'`)
	tb.waitJS(30*time.Second, `document.querySelector('#checkpoint-history tr[data-savepoint="false"][data-status="COMPLETED"]') ? '' : 'no completed checkpoint in the history'`)
	cps, err := cl.ListCheckpoints(ctx, slowID)
	if err != nil {
		t.Fatal(err)
	}
	var savepoints int
	for _, cp := range cps {
		if cp.Savepoint {
			savepoints++
		}
	}
	if savepoints != 1 {
		t.Errorf("the job has %d savepoints after one click, want 1: %+v", savepoints, cps)
	}
	// Its log: the TaskManagers' events of its tasks, each deployment first.
	tb.waitJS(30*time.Second, `(document.getElementById('job-log') || {}).textContent.includes('task deployed') ? '' : 'job log: ' + (document.getElementById('job-log') || {}).textContent`)
	tb.screenshot(shots, "dashboard-job-running")

	// TaskManagers, and one TaskManager's page.
	tb.goTo("#/taskmanagers")
	var tms []string
	tb.eval(`[...document.querySelectorAll('#tm-table tr.tm-row')].map((tr) => tr.dataset.tmid)`, &tms)
	if len(tms) != 2 {
		t.Fatalf("TaskManagers listed: %v, want 2", tms)
	}
	tb.screenshot(shots, "dashboard-taskmanagers")
	// Each TaskManager's page lists the running job's subtasks it holds:
	// the three of them between the two; a TaskManager holding any has a
	// slot in use (subtasks of different tasks share a slot, as in Flink).
	tasksOn := map[string]int{}
	for _, tm := range tms {
		tb.goTo("#/taskmanagers/" + tm)
		if got := tb.text("#tm-slots-total .value"); got != "4" {
			t.Errorf("TaskManager %s: %q slots, want 4", tm, got)
		}
		if got := tb.text("#tm-memory"); !strings.Contains(got, "Physical memory") {
			t.Errorf("TaskManager %s memory %q", tm, got)
		}
		tb.waitJS(10*time.Second, `document.getElementById('tm-log') || document.getElementById('tm-logs-missing') ? '' : 'no log section'`)
		var n int
		tb.eval(`document.querySelectorAll('#tm-tasks tr.task-row[data-jid="`+slowID+`"]').length`, &n)
		tasksOn[tm] = n
		if used := tb.text("#tm-slots-used .value"); (n > 0) != (used != "0") {
			t.Errorf("TaskManager %s: %s slots in use, %d subtasks listed", tm, used, n)
		}
	}
	if tasksOn[tms[0]]+tasksOn[tms[1]] != 3 {
		t.Errorf("subtasks listed per TaskManager %v, want 3 in all", tasksOn)
	}
	busiest := tms[0]
	if tasksOn[tms[1]] > tasksOn[busiest] {
		busiest = tms[1]
	}
	tb.goTo("#/taskmanagers/" + busiest)
	tb.screenshot(shots, "dashboard-taskmanager")

	// Stop with a savepoint: two clicks, and the job ends FINISHED.
	tb.goTo("#/jobs/" + slowID)
	tb.click("#action-stop")
	tb.waitJS(10*time.Second, `document.getElementById('action-stop').textContent === 'Confirm stop' ? '' : 'no confirm step'`)
	tb.click("#action-stop")
	localtest.WaitJobState(t, asAlice{c, cl}, slowID, client.StateFinished, 2*time.Minute)
	tb.waitJS(time.Minute, `(() => { const s = document.getElementById('trigger-status'); return s && s.dataset.status === 'COMPLETED' && s.textContent.startsWith('Stop') ? '' : 'stop: ' + (s ? s.textContent : 'not triggered'); })()`)
}

// restarts is the job config of a few quick restarts. This test is about
// the page, not the sandbox: on a heavily loaded machine (a -race run beside
// other helpers' builds) the word count once failed in its Go runtime's
// start-up (its Wasm stack ended in _rt0_wasm_wasip1_lib), and a restart is
// what a user would configure too. The figures the test checks are the
// last attempt's, complete either way.
func restarts() map[string]string {
	return map[string]string{jobconfig.KeyRestartStrategy: "fixed-delay", jobconfig.KeyFixedDelayAttempts: "3", jobconfig.KeyFixedDelayDelay: "100ms"}
}

func withRestarts(cfg map[string]string) map[string]string {
	for k, v := range restarts() {
		cfg[k] = v
	}
	return cfg
}

// asAlice is the cluster seen by tenant alice, for the wait helpers.
type asAlice struct {
	*localtest.InProcess
	cl *client.Client
}

func (a asAlice) Client() *client.Client { return a.cl }

// words are the word count's known figures for an input.
type words struct{ lines, words, distinct int }

func countWords(t *testing.T, path string) words {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w words
	text := strings.TrimSuffix(string(b), "\n")
	w.lines = strings.Count(text, "\n") + 1
	seen := map[string]bool{}
	for _, f := range strings.FieldsFunc(string(b), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) {
		w.words++
		seen[strings.ToLower(f)] = true
	}
	w.distinct = len(seen)
	return w
}

// restJob is what the test reads of GET /jobs/:id.
type restJob struct {
	Vertices []struct {
		ID          string
		Name        string
		Parallelism int
		Metrics     map[string]float64
	}
	Plan struct {
		Nodes []struct {
			ID     string
			Inputs []struct {
				ID           string
				ShipStrategy string `json:"ship_strategy"`
			}
		}
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// metricsReported says whether any vertex of the job has a TaskManager's
// report of its figures.
func metricsReported(j restJob) bool {
	for _, v := range j.Vertices {
		if v.Metrics["reported"] > 0 {
			return true
		}
	}
	return false
}

// checkGraph checks that the page draws the job's plan: a node per vertex
// with its name and parallelism, an edge per input with its ship strategy.
func checkGraph(t *testing.T, tb *tab, j restJob) {
	t.Helper()
	var nodes []struct{ ID, Text string }
	tb.eval(`[...document.querySelectorAll('#dag-svg g.node')].map((g) => ({ID: g.dataset.vertexId, Text: g.querySelector('title').textContent + ' | ' + g.textContent}))`, &nodes)
	if len(nodes) != len(j.Vertices) || len(nodes) < 2 {
		t.Fatalf("graph has %d nodes, the job %d vertices: %+v", len(nodes), len(j.Vertices), nodes)
	}
	for i, v := range j.Vertices {
		if nodes[i].ID != v.ID || !strings.Contains(nodes[i].Text, v.Name) || !strings.Contains(nodes[i].Text, fmt.Sprintf("Parallelism: %d", v.Parallelism)) {
			t.Errorf("graph node %d %+v, want vertex %s %q parallelism %d", i, nodes[i], v.ID, v.Name, v.Parallelism)
		}
	}
	var want []string
	for _, n := range j.Plan.Nodes {
		for _, in := range n.Inputs {
			want = append(want, in.ID+">"+n.ID+" "+in.ShipStrategy)
		}
	}
	var edges []string
	tb.eval(`[...document.querySelectorAll('#dag-svg g.edge')].map((g) => g.dataset.from + '>' + g.dataset.to + ' ' + g.dataset.ship)`, &edges)
	if strings.Join(edges, ",") != strings.Join(want, ",") || len(edges) == 0 {
		t.Errorf("graph edges %q, want %q", edges, want)
	}
}

// cellValue reads a figure of a vertex's row in the operator table; false
// when the page shows none.
func cellValue(tb *tab, vertex, class string) (float64, bool) {
	tb.t.Helper()
	var s string
	tb.eval(fmt.Sprintf(`(document.querySelector('#vertex-table tr[data-vertex-id=%q] td.%s') || {dataset: {}}).dataset.value || ''`, vertex, class), &s)
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		return 0, false
	}
	return v, true
}

// checkRecords checks the operator table against the REST figures and,
// once TaskManagers report them, against the word count's known counts:
// the source chain reads every line and emits every word; the counting
// chain reads every word and emits one count per distinct word.
func checkRecords(t *testing.T, tb *tab, j restJob, known words) {
	t.Helper()
	if !metricsReported(j) {
		t.Logf("the TaskManagers report no task metrics yet (reported = 0): checking that the page shows none")
		for _, v := range j.Vertices {
			if _, ok := cellValue(tb, v.ID, "read-records"); ok {
				t.Errorf("vertex %s: the page shows records before any report", v.Name)
			}
		}
		return
	}
	for _, v := range j.Vertices {
		for _, k := range []string{"read-records", "write-records", "read-bytes", "write-bytes"} {
			if got, ok := cellValue(tb, v.ID, k); !ok || got != v.Metrics[k] {
				t.Errorf("vertex %s %s: the page shows %v (%v), the REST API %v", v.Name, k, got, ok, v.Metrics[k])
			}
		}
	}
	src, count := j.Vertices[0], j.Vertices[len(j.Vertices)-1]
	if src.Metrics["read-records"] != float64(known.lines) || src.Metrics["write-records"] != float64(known.words) {
		t.Errorf("source chain %s: %v records in, %v out; want %d lines in, %d words out", src.Name, src.Metrics["read-records"], src.Metrics["write-records"], known.lines, known.words)
	}
	if count.Metrics["read-records"] != float64(known.words) || count.Metrics["write-records"] != float64(known.distinct) {
		t.Errorf("counting chain %s: %v records in, %v out; want %d words in, %d counts out", count.Name, count.Metrics["read-records"], count.Metrics["write-records"], known.words, known.distinct)
	}
}
