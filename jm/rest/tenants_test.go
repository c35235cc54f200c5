package rest_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/jm/rest"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
)

const (
	tokenA = "slc_tenant-a-token-for-rest-tests"
	tokenB = "slc_tenant-b-token-for-rest-tests"
)

// The messages of the Kitex API (jm/rpc TokenAuth), which the REST API
// must repeat word for word.
const (
	noTokenMsg  = "no token: pass --token or set SLUICE_TOKEN"
	badTokenMsg = "invalid token: ask the cluster operator for one (sluice tenant add)"
)

func testTenants(t *testing.T) *auth.Tenants {
	t.Helper()
	ts, err := auth.ParseTenants([]byte(`{"tenants":[
		{"name":"a","token_sha256":["` + auth.HashToken(tokenA) + `"]},
		{"name":"b","token_sha256":["` + auth.HashToken(tokenB) + `"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// startCluster starts an embedded cluster with the REST API, with tenants
// a and b when tenants is set, and returns it and the API's base URL.
func startCluster(t *testing.T, tenants bool, slots int) (*localtest.InProcess, string) {
	t.Helper()
	var ts *auth.Tenants
	if tenants {
		ts = testTenants(t)
	}
	c := localtest.Start(t, local.Config{Slots: slots, RESTListenAddr: "127.0.0.1:0", JobManager: func(c *jm.Config) {
		c.Tenants = ts
		c.CancelTimeout = 10 * time.Second
	}})
	if c.RESTAddr() == "" {
		t.Fatal("the cluster serves no REST API")
	}
	return c, "http://" + c.RESTAddr()
}

// matrixCase is one route called with no token, a wrong token, tenant b's
// token and tenant a's.
type matrixCase struct {
	route string // "METHOD /pattern", as rest.Routes lists it
	path  string
	body  []byte
	ct    string
	// other is the status tenant b gets (404 when zero: a's objects do not
	// exist for b); otherCheck, when set, checks b's answer.
	other      int
	otherCheck func(reply)
}

// TestTenantMatrixOverREST calls every route of the API with no token, a
// wrong token, another tenant's token and the right token: the first two
// are 401 with the Kitex API's messages, the other tenant gets 404 on a's
// objects (and sees none of them in listings), and nothing changes for a
// until a itself calls the mutating routes, which then do what they say.
func TestTenantMatrixOverREST(t *testing.T) {
	_, base := startCluster(t, true, 8)
	spin := localtest.Guest(t, "local/testdata/spin")
	a := caller{t, base, tokenA}
	b := caller{t, base, tokenB}

	up := a.doType("POST", "/modules", spin, "application/wasm")
	if up.status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.status, up.raw)
	}
	digest := up.obj()["digest"].(string)
	job := a.must(200, "POST", "/modules/"+digest+"/run", []byte(`{"parallelism":1}`)).obj()["jobid"].(string)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error { return a.allRunning(job) })
	vertex := path(t, a.must(200, "GET", "/jobs/"+job, nil).body, "vertices", 0, "id").(string)
	op := a.must(202, "POST", "/jobs/"+job+"/savepoints", []byte(`{}`)).obj()["request-id"].(string)
	if fc := a.waitOperation("/jobs/" + job + "/savepoints/" + op)["failure-cause"]; fc != nil {
		t.Fatalf("a's first savepoint failed: %v", fc)
	}
	cps := a.must(200, "GET", "/jobs/"+job+"/checkpoints", nil)
	cp := fmt.Sprint(path(t, cps.body, "history", 0, "id"))
	cpTotal := path(t, cps.body, "counts", "total")
	tmID := path(t, a.must(200, "GET", "/taskmanagers", nil).body, "taskmanagers", 0, "id").(string)

	hidesA := func(r reply) {
		t.Helper()
		if s := string(r.raw); strings.Contains(s, job) || strings.Contains(s, digest) {
			t.Errorf("tenant b sees tenant a's job or module: %s", s)
		}
	}
	j := "/jobs/" + job
	cases := []matrixCase{
		{route: "GET /config", path: "/config", other: 200},
		{route: "GET /overview", path: "/overview", other: 200, otherCheck: func(r reply) {
			hidesA(r)
			if n := r.obj()["jobs-running"]; n != float64(0) {
				t.Errorf("tenant b's overview counts %v running jobs, want 0 (a's are not b's)", n)
			}
		}},
		{route: "GET /taskmanagers", path: "/taskmanagers", other: 200, otherCheck: hidesA},
		{route: "GET /taskmanagers/:tm", path: "/taskmanagers/" + tmID, other: 200, otherCheck: hidesA},
		{route: "GET /taskmanagers/:tm/metrics", path: "/taskmanagers/" + tmID + "/metrics", other: 200, otherCheck: hidesA},
		{route: "GET /taskmanagers/:tm/logs", path: "/taskmanagers/" + tmID + "/logs", other: 200, otherCheck: hidesA},
		{route: "GET /modules", path: "/modules", other: 200, otherCheck: hidesA},
		{route: "GET /jobs", path: "/jobs", other: 200, otherCheck: hidesA},
		{route: "GET /jobs/overview", path: "/jobs/overview", other: 200, otherCheck: hidesA},
		{route: "GET /jobs/:job", path: j},
		{route: "GET /jobs/:job/plan", path: j + "/plan"},
		{route: "GET /jobs/:job/exceptions", path: j + "/exceptions"},
		{route: "GET /jobs/:job/accumulators", path: j + "/accumulators"},
		{route: "GET /jobs/:job/checkpoints", path: j + "/checkpoints"},
		{route: "GET /jobs/:job/checkpoints/config", path: j + "/checkpoints/config"},
		{route: "GET /jobs/:job/checkpoints/details/:cp", path: j + "/checkpoints/details/" + cp},
		{route: "GET /jobs/:job/savepoints/:op", path: j + "/savepoints/" + op},
		{route: "GET /jobs/:job/vertices/:vertex", path: j + "/vertices/" + vertex},
		{route: "GET /jobs/:job/vertices/:vertex/subtasks", path: j + "/vertices/" + vertex + "/subtasks"},
		{route: "GET /jobs/:job/vertices/:vertex/backpressure", path: j + "/vertices/" + vertex + "/backpressure"},
		{route: "GET /jobs/:job/vertices/:vertex/watermarks", path: j + "/vertices/" + vertex + "/watermarks"},
		{route: "GET /jobs/:job/vertices/:vertex/flamegraph", path: j + "/vertices/" + vertex + "/flamegraph?duration=20"},
		{route: "GET /jobs/:job/logs", path: j + "/logs"},
		{route: "GET /jobs/:job/stacks", path: j + "/stacks"},
		// Mutating routes: for all but a, nothing may change.
		{route: "PATCH /jobs/:job", path: j},
		{route: "POST /jobs/:job/savepoints", path: j + "/savepoints", body: []byte(`{"cancel-job":true}`)},
		{route: "POST /jobs/:job/stop", path: j + "/stop", body: []byte(`{"drain":false}`)},
		{route: "PATCH /jobs/:job/rescaling", path: j + "/rescaling?parallelism=2"},
		{route: "POST /modules/:digest/run", path: "/modules/" + digest + "/run", body: []byte(`{"parallelism":1}`)},
		// Last: b's upload stores b's own copy of the module.
		{route: "POST /modules", path: "/modules", body: spin, ct: "application/wasm", other: 200, otherCheck: func(r reply) {
			if r.obj()["digest"] != digest {
				t.Errorf("b's upload of the same bytes: %s", r.raw)
			}
		}},
	}
	// Crafted ids: another tenant's objects by path tricks are not found.
	for _, p := range []string{
		"/jobs/" + url.PathEscape("tenants/a/jobs/"+job), "/jobs/" + url.PathEscape("../a/"+job), "/jobs/" + job + "%2F..",
		"/modules/" + url.PathEscape("../a/modules/"+digest) + "/run",
	} {
		if r := b.do("GET", p, nil); r.status != http.StatusNotFound {
			t.Errorf("b GET %s: %d, want 404: %s", p, r.status, r.raw)
		}
	}

	unchanged := func(who, route string) {
		t.Helper()
		if err := a.allRunning(job); err != nil {
			t.Fatalf("after %s %s: %v", who, route, err)
		}
		if ids := jobIDs(t, a); !slices.Equal(ids, []string{job}) {
			t.Fatalf("after %s %s: a's jobs are %v, want [%s]", who, route, ids, job)
		}
		if ids := jobIDs(t, b); len(ids) != 0 {
			t.Fatalf("after %s %s: b has jobs %v", who, route, ids)
		}
		if mods := a.must(200, "GET", "/modules", nil); len(path(t, mods.body, "modules").([]any)) != 1 {
			t.Fatalf("after %s %s: a's modules are %s", who, route, mods.raw)
		}
		if n := path(t, a.must(200, "GET", j+"/checkpoints", nil).body, "counts", "total"); n != cpTotal {
			t.Fatalf("after %s %s: a's job has %v checkpoints, had %v", who, route, n, cpTotal)
		}
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.route] = true
		method := strings.Fields(tc.route)[0]
		ct := tc.ct
		if ct == "" {
			ct = "application/json"
		}
		other := tc.other
		if other == 0 {
			other = http.StatusNotFound
		}
		for _, who := range []struct {
			name   string
			c      caller
			status int
			msg    string
		}{
			{"no token", caller{t, base, ""}, 401, noTokenMsg},
			{"wrong token", caller{t, base, "slc_wrong"}, 401, badTokenMsg},
			{"a's token hash", caller{t, base, auth.HashToken(tokenA)}, 401, badTokenMsg},
			{"tenant b", b, other, ""},
		} {
			r := who.c.doType(method, tc.path, tc.body, ct)
			if r.status != who.status {
				t.Fatalf("%s %s %s: %d, want %d: %s", who.name, method, tc.path, r.status, who.status, r.raw)
			}
			if who.msg != "" && r.errMsg() != who.msg {
				t.Errorf("%s %s: message %q, want the Kitex API's %q", who.name, tc.route, r.errMsg(), who.msg)
			}
			if who.name == "tenant b" && tc.otherCheck != nil {
				tc.otherCheck(r)
			}
			unchanged(who.name, tc.route)
		}
		if method == "GET" {
			a.must(200, "GET", tc.path, nil)
		}
	}
	if r := (caller{t, base, ""}).doType("GET", "/overview", nil, ""); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}

	// Now a itself: each mutating route does what it says.
	if r := a.doType("POST", "/modules", spin, "application/wasm"); r.status != 200 || r.obj()["digest"] != digest {
		t.Fatalf("a uploads again: %d %s", r.status, r.raw)
	}
	job2 := a.must(200, "POST", "/modules/"+digest+"/run", []byte(`{"parallelism":1,"args":[]}`)).obj()["jobid"].(string)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error { return a.allRunning(job2) })

	op = a.must(202, "POST", j+"/savepoints", []byte(`{"cancel-job":false}`)).obj()["request-id"].(string)
	res := a.waitOperation(j + "/savepoints/" + op)
	if res["failure-cause"] != nil || res["location"] == "" || res["savepoint-id"] == "" {
		t.Fatalf("a's savepoint: %v", res)
	}
	if err := a.allRunning(job); err != nil {
		t.Fatalf("a savepoint without cancel-job stopped the job: %v", err)
	}

	rop := a.must(202, "PATCH", "/jobs/"+job2+"/rescaling?parallelism=2", nil).obj()["request-id"].(string)
	covered["GET /jobs/:job/rescaling/:op"] = true
	rpath := "/jobs/" + job2 + "/rescaling/" + rop
	for _, c := range []caller{{t, base, ""}, {t, base, "slc_wrong"}} {
		if r := c.do("GET", rpath, nil); r.status != 401 {
			t.Fatalf("GET %s with token %q: %d %s", rpath, c.token, r.status, r.raw)
		}
	}
	if r := b.do("GET", rpath, nil); r.status != 404 {
		t.Fatalf("b GET %s: %d %s", rpath, r.status, r.raw)
	}
	res = a.waitOperation(rpath)
	job3, _ := res["jobid"].(string)
	if res["failure-cause"] != nil || job3 == "" || res["savepoint-id"] == "" {
		t.Fatalf("rescale: %v", res)
	}
	a.waitState(job2, "FINISHED", time.Minute)
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error { return a.allRunning(job3) })
	for _, v := range path(t, a.must(200, "GET", "/jobs/"+job3, nil).body, "vertices").([]any) {
		if p := v.(map[string]any)["parallelism"]; p != float64(2) {
			t.Errorf("rescaled job %s: vertex %v at parallelism %v, want 2", job3, v.(map[string]any)["name"], p)
		}
	}

	sop := a.must(202, "POST", "/jobs/"+job3+"/stop", []byte(`{"drain":false}`)).obj()["request-id"].(string)
	if res := a.waitOperation("/jobs/" + job3 + "/savepoints/" + sop); res["failure-cause"] != nil {
		t.Fatalf("stop: %v", res)
	}
	a.waitState(job3, "FINISHED", time.Minute)

	if r := a.must(202, "PATCH", j, nil); len(r.obj()) != 0 {
		t.Errorf("cancel answered %s, want {}", r.raw)
	}
	a.waitState(job, "CANCELED", time.Minute)

	for _, rt := range rest.Routes() {
		if !covered[rt] {
			t.Errorf("route %s is not in the tenant matrix", rt)
		}
	}
}

func jobIDs(t *testing.T, c caller) []string {
	t.Helper()
	var out []string
	for _, j := range path(t, c.must(200, "GET", "/jobs", nil).body, "jobs").([]any) {
		out = append(out, j.(map[string]any)["id"].(string))
	}
	return out
}
