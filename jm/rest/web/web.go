package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// Prefix is the path the dashboard is served under. The REST server mounts
// [Handler] there and redirects "/" to it.
const Prefix = "/web/"

// The assets are read-only data compiled into the binary: embed needs a
// package-level variable, and nothing writes to it.
//
//go:embed assets
var assets embed.FS

// securityHeaders go with every answer. The policy allows scripts, styles
// and images from the JobManager itself only and no inline script, so even
// a bug that put server data into HTML could not run it; fetch may reach
// the same origin only (the REST API).
var securityHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "no-referrer"},
	{"X-Frame-Options", "DENY"},
}

// file is one asset, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// handler serves the embedded files by name.
type handler struct {
	files map[string]file
}

// Handler returns the handler that serves the dashboard. Mount it at
// [Prefix]; it expects request paths that start with it ("/web" alone is
// redirected to "/web/"). "/web/" is the page itself; every view of the
// dashboard is a fragment of it ("/web/#/jobs/ID"), so no other path needs
// to exist. Answers carry an ETag, so a browser revalidates the page cheaply
// after a JobManager upgrade, and the security headers above.
//
// # Errors
//
// A method other than GET or HEAD is answered 405; an unknown file 404.
func Handler() http.Handler {
	h := &handler{files: make(map[string]file)}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(b)
		h.files[strings.TrimPrefix(p, "assets/")] = file{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in: failing to read them is a broken build.
		panic(fmt.Sprintf("web: read embedded assets: %v", err))
	}
	return h
}

// ServeHTTP serves one asset; see [Handler].
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, kv := range securityHeaders {
		w.Header().Set(kv[0], kv[1])
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the dashboard is read-only: use GET", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if p == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(p, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.Error(w, fmt.Sprintf("no dashboard file %q: open %s", name, Prefix), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("ETag", f.etag)
	// no-cache: revalidate every time (a 304 when unchanged), so an
	// upgraded JobManager never serves an old script with a new page.
	w.Header().Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && match == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(f.body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(f.body)
}
