package rest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/internal/testutil"
)

// caller calls the REST API at base with a token ("" for none).
type caller struct {
	t     testing.TB
	base  string
	token string
}

// reply is one answer: its status, raw body and the body decoded.
type reply struct {
	status int
	raw    []byte
	body   any
	header http.Header
}

// obj is the body as a JSON object (nil when it is not one).
func (r reply) obj() map[string]any { m, _ := r.body.(map[string]any); return m }

// errMsg is the first message of Flink's {"errors": [...]}, or "".
func (r reply) errMsg() string {
	if es, ok := r.obj()["errors"].([]any); ok && len(es) > 0 {
		s, _ := es[0].(string)
		return s
	}
	return ""
}

func (c caller) do(method, path string, body []byte) reply {
	c.t.Helper()
	return c.doType(method, path, body, "application/json")
}

func (c caller) doType(method, path string, body []byte, contentType string) reply {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, raw: raw, header: resp.Header}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		c.t.Fatalf("%s %s: Content-Type %q, want application/json; body %s", method, path, ct, raw)
	}
	if err := sonic.Unmarshal(raw, &r.body); err != nil {
		c.t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, raw)
	}
	return r
}

// must calls and fails the test unless the status is want.
func (c caller) must(want int, method, path string, body []byte) reply {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

func jsonBody(t testing.TB, v any) []byte {
	t.Helper()
	b, err := sonic.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jobState is the job's state by GET /jobs/:id.
func (c caller) jobState(id string) (string, error) {
	r := c.do("GET", "/jobs/"+id, nil)
	if r.status != http.StatusOK {
		return "", fmt.Errorf("GET /jobs/%s: %d %s", id, r.status, r.raw)
	}
	s, _ := r.obj()["state"].(string)
	return s, nil
}

// allRunning says why the job or one of its subtasks is not RUNNING.
func (c caller) allRunning(id string) error {
	r := c.do("GET", "/jobs/"+id, nil)
	if r.status != http.StatusOK {
		return fmt.Errorf("GET /jobs/%s: %d %s", id, r.status, r.raw)
	}
	if s := r.obj()["state"]; s != "RUNNING" {
		return fmt.Errorf("job %s is %v, want RUNNING", id, s)
	}
	vs, _ := r.obj()["vertices"].([]any)
	if len(vs) == 0 {
		return fmt.Errorf("job %s lists no vertices", id)
	}
	for _, v := range vs {
		v := v.(map[string]any)
		tasks, _ := v["tasks"].(map[string]any)
		if v["status"] != "RUNNING" || tasks["RUNNING"] != v["parallelism"] {
			return fmt.Errorf("job %s: vertex %v is %v with subtasks %v, want all %v RUNNING", id, v["name"], v["status"], tasks, v["parallelism"])
		}
	}
	return nil
}

func (c caller) waitState(id, want string, total time.Duration) {
	c.t.Helper()
	testutil.CheckFor(c.t, total, 20*time.Millisecond, func() error {
		s, err := c.jobState(id)
		if err != nil {
			return err
		}
		if s != want {
			return fmt.Errorf("job %s is %s, want %s", id, s, want)
		}
		return nil
	})
}

// waitOperation polls a savepoint or rescaling request until it completes
// and returns its "operation".
func (c caller) waitOperation(path string) map[string]any {
	c.t.Helper()
	var op map[string]any
	testutil.CheckFor(c.t, 2*time.Minute, 20*time.Millisecond, func() error {
		r := c.do("GET", path, nil)
		if r.status != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", path, r.status, r.raw)
		}
		st, _ := r.obj()["status"].(map[string]any)
		if st["id"] != "COMPLETED" {
			return fmt.Errorf("GET %s: status %v, want COMPLETED", path, st["id"])
		}
		op, _ = r.obj()["operation"].(map[string]any)
		return nil
	})
	return op
}

// path walks a decoded body by object keys and array indexes.
func path(t testing.TB, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: not an object: %v", k, v)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("no key %q in %v", k, keysOf(m))
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: not an array that long: %v", k, v)
			}
			v = a[k]
		}
	}
	return v
}

func keysOf(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(ks, ",")
}
