package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"

	"github.com/sluicehq/sluice/internal/rpcerr"
)

// handler serves one route for an authenticated tenant; params are the
// route's :names by name. It returns the status and body of a success, or
// an error that writeError maps.
type handler func(ctx context.Context, r *request) (int, any, error)

// request is one call as a handler sees it.
type request struct {
	*http.Request
	tenant string
	params map[string]string
}

func (r *request) param(name string) string { return r.params[name] }

// route is one path pattern ("/jobs/:id/plan") and its handlers by method.
type route struct {
	segs    []string
	methods map[string]handler
}

// The codecs of every body: sorted map keys and valid UTF-8 out (HTML is
// not escaped: "a -> b" stays readable, and nosniff keeps browsers from
// reading a body as HTML); unknown fields and invalid UTF-8 refused in.
var (
	jsonOut = sonic.Config{SortMapKeys: true, ValidateString: true, NoNullSliceOrMap: true}.Froze()
	jsonIn  = sonic.Config{DisallowUnknownFields: true, ValidateString: true, CopyString: true}.Froze()
)

// ServeHTTP routes a request: unknown paths are 404, known paths with
// another method 405 (with Allow), then the tenant is authenticated and
// the handler runs. A panic in a handler is logged and answered 500.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("rest handler panicked", "method", hr.Method, "path", hr.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, "internal error: the JobManager logged it")
		}
	}()
	path := hr.URL.Path
	if s.cfg.Web != nil {
		if path == "/" && (hr.Method == http.MethodGet || hr.Method == http.MethodHead) {
			http.Redirect(w, hr, "/web/", http.StatusFound)
			return
		}
		if path == "/web" || strings.HasPrefix(path, "/web/") {
			s.cfg.Web.ServeHTTP(w, hr)
			return
		}
	}
	if p, ok := strings.CutPrefix(path, "/v1/"); ok {
		path = "/" + p
	}
	rt, params := s.match(path)
	if rt == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s: see docs/REST.md for the routes", path))
		return
	}
	h, ok := rt.methods[hr.Method]
	if !ok {
		allow := slices.Sorted(mapKeys(rt.methods))
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", hr.Method, path, strings.Join(allow, " or ")))
		return
	}
	tok, ok := bearer(hr.Header.Get("Authorization"))
	if !ok {
		writeError(w, http.StatusUnauthorized, `invalid Authorization header: want "Bearer <token>"`)
		return
	}
	ctx := hr.Context()
	tenant, err := s.cfg.Authenticate(ctx, tok)
	if err != nil {
		s.fail(w, hr, err)
		return
	}
	status, body, err := h(ctx, &request{Request: hr, tenant: tenant, params: params})
	if err != nil {
		s.fail(w, hr, err)
		return
	}
	writeJSON(w, status, body)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// match finds the route of path and its parameters.
func (s *Server) match(path string) (*route, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range s.routes {
		rt := &s.routes[i]
		if len(rt.segs) != len(segs) {
			continue
		}
		var params map[string]string
		ok := true
		for j, p := range rt.segs {
			if name, isParam := strings.CutPrefix(p, ":"); isParam {
				if segs[j] == "" {
					ok = false
					break
				}
				if params == nil {
					params = map[string]string{}
				}
				params[name] = segs[j]
			} else if p != segs[j] {
				ok = false
				break
			}
		}
		if ok {
			return rt, params
		}
	}
	return nil, nil
}

// fail answers err: its message with the status of its code.
func (s *Server) fail(w http.ResponseWriter, hr *http.Request, err error) {
	status := statusOf(err)
	if status >= 500 {
		s.log.Warn("rest request failed", "method", hr.Method, "path", hr.URL.Path, "status", status, "err", err)
	}
	writeError(w, status, err.Error())
}

// statusOf maps an error's code (internal/rpcerr) to an HTTP status.
func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	if errors.Is(err, rpcerr.ErrModuleTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	switch rpcerr.CodeOf(err) {
	case rpcerr.CodeInvalidArgument:
		return http.StatusBadRequest
	case rpcerr.CodeNotFound:
		return http.StatusNotFound
	case rpcerr.CodeAlreadyExists, rpcerr.CodeFailedPrecondition, rpcerr.CodeStaleFencingToken:
		return http.StatusConflict
	case rpcerr.CodePermissionDenied:
		return http.StatusForbidden
	case rpcerr.CodeUnauthenticated:
		return http.StatusUnauthorized
	case rpcerr.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case rpcerr.CodeUnavailable:
		return http.StatusServiceUnavailable
	case rpcerr.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// httpError is an error of the HTTP layer itself (a body too large, say),
// with its status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errStatus(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// errorBody is Flink's error shape.
type errorBody struct {
	Errors []string `json:"errors"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Errors: []string{msg}})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := jsonOut.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"errors":["internal error: encoding the response failed"]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decodeBody reads r's JSON body into v, bounded by limit bytes. An empty
// body leaves v as it is (every field optional).
func decodeBody(r *request, limit int64, what string, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return errStatus(http.StatusBadRequest, "%s: reading the body failed: %v", what, err)
	}
	if int64(len(b)) > limit {
		return errStatus(http.StatusRequestEntityTooLarge, "%s: body over %d bytes", what, limit)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := jsonIn.Unmarshal(b, v); err != nil {
		return errStatus(http.StatusBadRequest, "%s: malformed JSON body: %s", what, jsonProblem(b, err))
	}
	return nil
}

// jsonProblem says what is wrong with a body the decoder refused, and
// where: the byte, and the field when it is plain from the text before it.
func jsonProblem(body []byte, err error) string {
	var mt *decoder.MismatchTypeError
	var se decoder.SyntaxError
	var sep *decoder.SyntaxError
	switch {
	case errors.As(err, &mt):
		return fmt.Sprintf("%sat byte %d: want %s, got %s", fieldAt(body, mt.Pos), mt.Pos, wantOf(mt.Type), gotAt(body, mt.Pos))
	case errors.As(err, &sep):
		se = *sep
		fallthrough
	case errors.As(err, &se):
		msg := se.Message()
		if msg == "eof" {
			msg = "the body ends too soon"
		}
		return fmt.Sprintf("syntax error at byte %d: %s", se.Pos, msg)
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimSpace(msg)
}

// fieldAt names the object key whose value starts at pos (directly, or as
// an element of an array of scalars), or "".
func fieldAt(body []byte, pos int) string {
	if pos < 0 || pos > len(body) {
		return ""
	}
	before := strings.TrimRight(string(body[:pos]), " \t\r\n")
	if i := strings.LastIndexAny(before, "[,"); strings.HasSuffix(before, "[") || (i >= 0 && !strings.ContainsAny(before[i:], ":{}")) {
		if j := strings.LastIndex(before, "["); j >= 0 && !strings.ContainsAny(before[j:], "{}:") {
			before = strings.TrimRight(before[:j], " \t\r\n")
		}
	}
	before, ok := strings.CutSuffix(before, ":")
	if !ok {
		return ""
	}
	before = strings.TrimRight(before, " \t\r\n")
	if !strings.HasSuffix(before, `"`) {
		return ""
	}
	start := strings.LastIndex(before[:len(before)-1], `"`)
	if start < 0 {
		return ""
	}
	return fmt.Sprintf("field %s ", before[start:])
}

// wantOf names the JSON a Go type takes.
func wantOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// gotAt names the JSON value starting at pos.
func gotAt(body []byte, pos int) string {
	if pos < 0 || pos >= len(body) {
		return "the end"
	}
	switch c := body[pos]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return fmt.Sprintf("%q", body[pos])
}
