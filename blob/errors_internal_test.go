package blob

import (
	"context"
	"errors"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestS3ErrorTable checks the mapping from S3 error codes and transport
// failures to the package's errors, without a server.
func TestS3ErrorTable(t *testing.T) {
	s := &s3Store{bucket: "bkt", endpoint: "127.0.0.1:9000", url: "s3://bkt at 127.0.0.1:9000"}
	ctx := context.Background()
	resp := func(code string, status int) error {
		return minio.ErrorResponse{Code: code, Message: "msg for " + code, StatusCode: status}
	}
	cases := []struct {
		err  error
		want error
		text string // must appear in the message
	}{
		{resp("NoSuchKey", 404), ErrNotFound, "does not exist"},
		{resp("NoSuchBucket", 404), ErrNotFound, `bucket "bkt" does not exist at 127.0.0.1:9000`},
		{resp("AccessDenied", 403), ErrAccessDenied, "AWS_ACCESS_KEY_ID"},
		{resp("InvalidAccessKeyId", 403), ErrAccessDenied, "InvalidAccessKeyId"},
		{resp("SignatureDoesNotMatch", 403), ErrAccessDenied, "SignatureDoesNotMatch"},
		{resp("ExpiredToken", 400), ErrAccessDenied, "AWS_SESSION_TOKEN"},
		{resp("RequestTimeTooSkewed", 403), ErrAccessDenied, "clock"},
		{resp("InvalidRange", 416), ErrInvalidRange, ""},
		{resp("SlowDown", 503), ErrUnavailable, "retry"},
		{resp("InternalError", 500), ErrUnavailable, ""},
		{resp("XMinioServerNotInitialized", 503), ErrUnavailable, "starting"},
		{resp("IncompleteBody", 400), ErrSizeMismatch, ""},
		// Unknown codes fall back on the status.
		{resp("SomethingNew", 404), ErrNotFound, ""},
		{resp("SomethingNew", 403), ErrAccessDenied, ""},
		{resp("SomethingNew", 502), ErrUnavailable, ""},
		{resp("", 503), ErrUnavailable, "503 Service Unavailable"},
		// Wrapped responses are found too.
		{&neturl.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNREFUSED}, ErrUnavailable, "connection refused"},
		{&net.OpError{Op: "dial", Err: errors.New("i/o timeout")}, ErrUnavailable, "127.0.0.1:9000"},
		{context.DeadlineExceeded, ErrUnavailable, ""}, // our own per-call deadline
	}
	for _, c := range cases {
		err := s.s3Error(ctx, "get", "k", c.err)
		if !errors.Is(err, c.want) {
			t.Errorf("%v: got %v, want %v", c.err, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), `get "k" in s3://bkt`) {
			t.Errorf("%v: message %q lacks %q or the op, key and store", c.err, err, c.text)
		}
		if !errors.Is(err, c.err) && !errors.As(err, new(minio.ErrorResponse)) {
			t.Errorf("%v: the cause is lost in %v", c.err, err)
		}
	}
	// Every row maps to one of the sentinels.
	for code, row := range s3Errors {
		if row.kind == nil || row.hint == "" {
			t.Errorf("s3Errors[%q] has no kind or hint", code)
		}
	}
	if _, ok := s3StatusKind(http.StatusOK); ok {
		t.Error("200 maps to an error kind")
	}

	// The caller's own cancellation is reported as such, not as an outage.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := s.s3Error(cctx, "put", "k", &neturl.Error{Op: "Put", URL: "http://x", Err: context.Canceled})
	if errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled by the caller: %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Op: "put", Key: "a\x00b", Store: "file:///d", Kind: ErrInvalidKey, Msg: "key contains a NUL byte at offset 1"}
	want := `blob: put "a\x00b" in file:///d: invalid key: key contains a NUL byte at offset 1`
	if e.Error() != want {
		t.Fatalf("got  %s\nwant %s", e, want)
	}
	cause := errors.New("boom")
	e = &Error{Op: "get", Kind: ErrUnavailable, Err: cause}
	if !errors.Is(e, ErrUnavailable) || !errors.Is(e, cause) || e.Error() != "blob: get: store unavailable: boom" {
		t.Fatalf("got %q", e)
	}
}
