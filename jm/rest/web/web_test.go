package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/jm/rest/web"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestHandlerServesTheEmbeddedPage(t *testing.T) {
	h := web.Handler()
	for _, c := range []struct {
		path, ctype, contains string
	}{
		{"/web/", "text/html", `<script src="app.js"`},
		{"/web/index.html", "text/html", `id="token"`},
		{"/web/app.js", "javascript", "sessionStorage"},
		{"/web/style.css", "text/css", ".dag"},
		{"/web/favicon.svg", "image/svg+xml", "<svg"},
	} {
		resp := get(t, h, http.MethodGet, c.path, nil)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(body), c.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contains, strings.Contains(string(body), c.contains))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: security headers %v", c.path, resp.Header)
		}
		// Unchanged: a 304 for the ETag, so a refresh costs nothing.
		if again := get(t, h, http.MethodGet, c.path, map[string]string{"If-None-Match": resp.Header.Get("ETag")}); again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", c.path, again.StatusCode)
		}
	}
	if resp := get(t, h, http.MethodHead, "/web/app.js", nil); resp.StatusCode != http.StatusOK || resp.ContentLength <= 0 {
		t.Errorf("HEAD app.js: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

func TestHandlerRefusesWhatIsNotAFile(t *testing.T) {
	h := web.Handler()
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/web/nope.js", http.StatusNotFound},
		{http.MethodGet, "/web/assets/app.js", http.StatusNotFound},
		{http.MethodGet, "/web/../go.mod", http.StatusNotFound},
		{http.MethodGet, "/jobs", http.StatusNotFound},
		{http.MethodPost, "/web/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/web/app.js", http.StatusMethodNotAllowed},
		{http.MethodGet, "/web", http.StatusMovedPermanently},
	} {
		resp := get(t, h, c.method, c.path, nil)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
	}
	if loc := get(t, h, http.MethodGet, "/web", nil).Header.Get("Location"); loc != web.Prefix {
		t.Errorf("/web redirects to %q, want %s", loc, web.Prefix)
	}
}

// TestScriptNeverParsesServerDataAsHTML keeps the rule of the package doc
// a rule: the script has no way to turn a string into markup.
func TestScriptNeverParsesServerDataAsHTML(t *testing.T) {
	src, err := os.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment|\beval\(|new Function|setAttribute\(\s*['"]on`)
	for i, line := range strings.Split(string(src), "\n") {
		if m := bad.FindString(line); m != "" {
			t.Errorf("app.js:%d uses %s: build elements with h() and text nodes instead", i+1, m)
		}
	}
	html, err := os.ReadFile("assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	// The policy forbids inline script; the page must not need any.
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]|\son[a-z]+=`).Match(html) {
		t.Errorf("index.html has inline script or an inline handler")
	}
}
