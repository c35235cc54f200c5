package rest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/jm"
)

// startJM starts an open JobManager (no TaskManagers) with the REST API
// and a module size limit of limit bytes.
func startJM(t *testing.T, limit int64) string {
	t.Helper()
	store, err := blob.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := jm.New(context.Background(), jm.Config{Blob: store, RESTListenAddr: "127.0.0.1:0", ModuleSizeLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return "http://" + s.RESTAddr()
}

const someDigest = "sha256-0000000000000000000000000000000000000000000000000000000000000000"

// TestBadInput sends what a confused client or an attacker might: every
// answer is a JSON error with the right status and a message that says
// what was wrong.
func TestBadInput(t *testing.T) {
	base := startJM(t, 1024)
	api := caller{t, base, ""}
	for _, tc := range []struct {
		method, path string
		body         string
		status       int
		msg          string // a part of the message
	}{
		// GET / redirects to the dashboard, which jm.Server mounts
		// (jm/rest/web's TestDashboardOnACluster follows it).
		{"GET", "/nope", "", 404, "no route /nope"},
		{"GET", "/jobs/x/y/z/w/v", "", 404, "no route"},
		{"GET", "/jobs//plan", "", 404, "no route"},
		{"DELETE", "/jobs/x", "", 405, "method DELETE not allowed on /jobs/x: use GET or PATCH"},
		{"POST", "/overview", "", 405, "use GET"},
		{"GET", "/jobs/deadbeef", "", 404, `job "deadbeef" not found`},
		{"GET", "/v1/jobs/deadbeef", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/plan", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/exceptions", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/accumulators", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/checkpoints", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/checkpoints/config", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/checkpoints/details/x", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/vertices/1", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/vertices/1/backpressure", "", 404, `job "deadbeef" not found`},
		{"GET", "/jobs/deadbeef/savepoints/r1", "", 404, `savepoint request "r1" of job "deadbeef" not found`},
		{"PATCH", "/jobs/deadbeef", "", 404, `job "deadbeef" not found`},
		{"PATCH", "/jobs/deadbeef?mode=bogus", "", 400, `mode "bogus": want cancel`},
		{"POST", "/jobs/deadbeef/savepoints", "{}", 404, `job "deadbeef" not found`},
		{"POST", "/jobs/deadbeef/stop", "{}", 404, `job "deadbeef" not found`},
		{"PATCH", "/jobs/deadbeef/rescaling?parallelism=2", "", 404, `job "deadbeef" not found`},
		{"GET", "/taskmanagers/tm-x", "", 404, `task manager "tm-x" not found`},
		{"POST", "/modules/" + someDigest + "/run", `{"args": [1]}`, 400, `run: malformed JSON body: field "args" at byte 10: want a string, got a number`},
		{"POST", "/modules/" + someDigest + "/run", `{"parallelism": "2"}`, 400, `field "parallelism" at byte 16: want a whole number in range, got a string`},
		{"POST", "/modules/" + someDigest + "/run", `{"args": ["a"]`, 400, "run: malformed JSON body: syntax error at byte 14: the body ends too soon"},
		{"POST", "/modules/" + someDigest + "/run", `{"nope": 1}`, 400, `unknown field "nope"`},
		{"POST", "/modules/" + someDigest + "/run", `[]`, 400, "run: malformed JSON body: at byte 0: want an object, got an array"},
		{"POST", "/modules/" + someDigest + "/run", `{"args": ["x"], "programArgsList": ["y"]}`, 400, "both args and programArgsList"},
		{"POST", "/modules/" + someDigest + "/run", `{"args": ["` + strings.Repeat("a", 2<<20) + `"]}`, 413, "run: body over 1048576 bytes"},
		{"POST", "/modules/" + someDigest + "/run", `{"config": {"no.such.key": "1"}}`, 400, `unknown config key "no.such.key"`},
		{"POST", "/modules/" + someDigest + "/run", `{}`, 404, "module \"" + someDigest + "\" not found: upload it first"},
		{"POST", "/modules/bad-digest/run", `{}`, 400, `module digest "bad-digest"`},
		{"POST", "/modules/" + someDigest + "/run", `{"parallelism": -1}`, 400, "parallelism -1: must be in"},
		{"POST", "/modules", "not wasm at all", 400, "invalid module: not a WebAssembly binary"},
		{"POST", "/modules", "", 400, "invalid module"},
	} {
		r := api.do(tc.method, tc.path, []byte(tc.body))
		if r.status != tc.status || !strings.Contains(r.errMsg(), tc.msg) {
			t.Errorf("%s %s: %d %q, want %d with %q", tc.method, tc.path, r.status, r.errMsg(), tc.status, tc.msg)
		}
	}
	if r := api.do("DELETE", "/jobs/x", nil); r.header.Get("Allow") != "GET, PATCH" {
		t.Errorf("405 without Allow: %v", r.header)
	}

	// Uploads over the limit: refused from the Content-Length before the
	// body is read, and counted when the length is not given.
	big := bytes.Repeat([]byte{0}, 1025)
	if r := api.doType("POST", "/modules", big, "application/wasm"); r.status != 413 || r.errMsg() != "module is 1025 bytes, over the limit of 1024 bytes" {
		t.Errorf("oversized upload: %d %s", r.status, r.raw)
	}
	req, _ := http.NewRequest("POST", base+"/modules", io.MultiReader(bytes.NewReader(big))) // no length: chunked
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(raw), "module is over the limit of 1024 bytes") {
		t.Errorf("oversized chunked upload: %d %s", resp.StatusCode, raw)
	}
	if r := api.doType("POST", "/modules", []byte("x"), "multipart/form-data; boundary=x"); r.status != 415 {
		t.Errorf("form upload: %d %s", r.status, r.raw)
	}
	// An Authorization header that is not a bearer token.
	req, _ = http.NewRequest("GET", base+"/overview", nil)
	req.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("Basic auth: %d", resp.StatusCode)
	}
}
