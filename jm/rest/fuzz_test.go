package rest_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/jm/rest"
	"github.com/sluicehq/sluice/jm/rpc"
	"github.com/sluicehq/sluice/local/localtest"
)

// FuzzRequest sends the API arbitrary methods, paths, tokens and bodies,
// with {job}, {digest} and {vertex} in the path standing for a real job,
// module and vertex of tenant a. Whatever comes in, the answer is JSON
// with a status of the table below, errors in Flink's shape, and never a
// 500 (which is what a panic becomes).
//
//	go test -run '^$' -fuzz FuzzRequest -fuzztime 1m ./jm/rest
func FuzzRequest(f *testing.F) {
	logs := &testutil.SyncBuffer{}
	store, err := blob.Open(context.Background(), "file://"+f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	ts, err := auth.ParseTenants([]byte(`{"tenants":[
		{"name":"a","token_sha256":["` + auth.HashToken(tokenA) + `"],"quotas":{"running_jobs":3}},
		{"name":"b","token_sha256":["` + auth.HashToken(tokenB) + `"]}]}`))
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, nil))
	s, err := jm.New(context.Background(), jm.Config{Blob: store, Tenants: ts, ModuleSizeLimit: 8 << 20, SlotRequestTimeout: time.Second, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	api, err := rest.New(rest.Config{
		Dispatcher:      s.Dispatcher(),
		Authenticate:    rpc.TokenAuth{Tenants: ts}.ClientToken,
		ModuleSizeLimit: 8 << 20,
		MaxBody:         64 << 10,
		Logger:          log,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { api.Close() })

	// A real module and job of a (waiting for slots it never gets: no
	// TaskManager), so job routes reach past the lookup.
	ctx := context.Background()
	digest, _, err := s.Dispatcher().UploadModule(ctx, "a", localtest.Guest(f, "local/testdata/spin"))
	if err != nil {
		f.Fatal(err)
	}
	job := submitSpin(f, s, digest)
	vertex := "1"

	for _, rt := range rest.Routes() {
		method, pattern, _ := strings.Cut(rt, " ")
		p := strings.NewReplacer(":job", "{job}", ":vertex", "{vertex}", ":digest", "{digest}", ":cp", "1", ":op", "r1", ":tm", "tm-1").Replace(pattern)
		f.Add(method, p, tokenA, []byte(`{}`))
		f.Add(method, p, "", []byte(nil))
	}
	f.Add("POST", "/modules/{digest}/run", tokenA, []byte(`{"args":["x"],"parallelism":2,"config":{"execution.checkpointing.interval":"1s"},"savepoint-path":"sp-1"}`))
	f.Add("POST", "/modules/{digest}/run", tokenA, []byte(`{"programArgsList":["x"],"savepointPath":"../b","checkpoint-path":"tenants/b/jobs/x/checkpoints/1/"}`))
	f.Add("POST", "/jobs/{job}/savepoints", tokenA, []byte(`{"cancel-job":true,"target-directory":""}`))
	f.Add("POST", "/jobs/{job}/stop", tokenB, []byte(`{"drain":true}`))
	f.Add("PATCH", "/jobs/{job}/rescaling?parallelism=99999999999", tokenA, []byte(nil))
	f.Add("PATCH", "/jobs/{job}?mode=stop", tokenA, []byte(nil))
	f.Add("POST", "/modules", tokenA, []byte("\x00asm\x01\x00\x00\x00"))
	f.Add("GET", "/v1/jobs/{job}/vertices/{vertex}/backpressure", "Basic x", []byte(nil))
	f.Add("GET", "/jobs/{job}/checkpoints/details/-1", tokenA, []byte(nil))
	f.Add("GET", "/taskmanagers/x/metrics?get=a,,b", tokenA, []byte(nil))

	allowed := []int{200, 202, 400, 401, 404, 405, 409, 413, 415, 429, 503, 504}
	f.Fuzz(func(t *testing.T, method, path, token string, body []byte) {
		path = strings.NewReplacer("{job}", job, "{digest}", digest, "{vertex}", vertex).Replace(path)
		req, err := http.NewRequest(method, "http://jm"+path, bytes.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/") {
			return // not a request a client could send
		}
		switch {
		case strings.HasPrefix(token, "Basic ") || token == "":
			if token != "" {
				req.Header.Set("Authorization", token)
			}
		default:
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if strings.ContainsAny(token, "\r\n\x00") {
			return // no header carries these
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		if !slices.Contains(allowed, w.Code) {
			t.Fatalf("%s %q: status %d: %s\nlogs:\n%s", method, path, w.Code, w.Body, logs)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %q: Content-Type %q", method, path, ct)
		}
		var v any
		if err := sonic.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %q: body is not JSON: %v: %s", method, path, err, w.Body)
		}
		if w.Code >= 400 {
			m, _ := v.(map[string]any)
			es, _ := m["errors"].([]any)
			if len(es) != 1 || es[0] == "" {
				t.Fatalf("%s %q: %d without Flink's error shape: %s", method, path, w.Code, w.Body)
			}
		}
	})
}

// submitSpin starts a job of tenant a's spin module.
func submitSpin(tb testing.TB, s *jm.Server, digest string) string {
	tb.Helper()
	id, err := s.Dispatcher().SubmitJob(context.Background(), "a", dispatcherSubmission(digest))
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func dispatcherSubmission(digest string) dispatcher.Submission {
	return dispatcher.Submission{ModuleDigest: digest, Parallelism: 1}
}
