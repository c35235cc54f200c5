package blob

import (
	"context"
	"errors"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
)

// Sentinel errors. Every error a Store returns is an *Error whose Kind is one
// of these (or nil when the cause is the caller's own: a failing source
// reader or a cancelled context); check them with errors.Is.
var (
	// ErrNotFound: the object, or the S3 bucket, does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied: the credentials are missing, wrong, expired, or lack
	// permission, or the fs directory is not accessible.
	ErrAccessDenied = errors.New("access denied")
	// ErrInvalidKey: a key, prefix, tenant, job id or digest breaks the key
	// rules (see ValidateKey). Nothing was read or changed.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidURL: a store URL or options could not be used (see Open).
	ErrInvalidURL = errors.New("invalid store URL")
	// ErrInvalidArgument: a size, offset, length or limit is out of range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidRange: a ranged read starts past the end of the object.
	ErrInvalidRange = errors.New("invalid range")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time (connection refused, DNS, timeouts, 5xx, throttling). Retrying
	// later may succeed.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSizeMismatch: Put was told a size and the reader ended before it.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrDigestMismatch: a module's bytes do not hash to its digest.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrConflict: the fs backend cannot hold both a key and another key
	// below it ("a" and "a/b"); S3 can. The key scheme never needs both.
	ErrConflict = errors.New("key conflict")
	// ErrClosed: the Store was used after Close.
	ErrClosed = errors.New("store closed")
)

// Error is the error type every Store operation returns.
//
// errors.Is matches both Kind and Err, so callers can test for ErrNotFound
// and for the underlying cause (say context.DeadlineExceeded) alike;
// errors.As gives the key and the store for messages and logs.
type Error struct {
	Op    string // the operation: "put", "get", "stat", "list", "delete", "open", ...
	Key   string // the key or prefix involved; may be empty
	Store string // the store's URL, without credentials
	Kind  error  // one of the sentinel errors, or nil
	Msg   string // what was wrong and what to do
	Err   error  // the underlying cause; may be nil
}

// Error implements error: `blob: get "k" in s3://b/p: not found: <msg>: <cause>`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("blob: ")
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Key))
	}
	if e.Store != "" {
		b.WriteString(" in ")
		b.WriteString(e.Store)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Kind and Err, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// s3Kind is one row of the S3 error table: the sentinel an S3 error code
// maps to, and the hint that tells the user what to do about it.
type s3Kind struct {
	kind error
	hint string
}

const (
	hintCreds   = "check the access key and secret (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or MINIO_ROOT_USER/MINIO_ROOT_PASSWORD) and the bucket policy"
	hintRetry   = "the server is overloaded or failing; retry later"
	hintNoKey   = "the object does not exist"
	hintBucket  = "the bucket does not exist; create it, or open the store with create_bucket=true"
	hintBadSize = "the request body was shorter than its declared size; check the size passed to Put"
)

// s3Errors is the one table that maps S3 error codes to this package's
// errors. Codes not listed fall back to s3StatusKind by HTTP status.
var s3Errors = map[string]s3Kind{
	"NoSuchKey":                    {ErrNotFound, hintNoKey},
	"NoSuchVersion":                {ErrNotFound, hintNoKey},
	"NoSuchUpload":                 {ErrNotFound, "the multipart upload was aborted or completed concurrently"},
	"NoSuchBucket":                 {ErrNotFound, hintBucket},
	"AccessDenied":                 {ErrAccessDenied, hintCreds},
	"AllAccessDisabled":            {ErrAccessDenied, hintCreds},
	"AccountProblem":               {ErrAccessDenied, hintCreds},
	"InvalidAccessKeyId":           {ErrAccessDenied, hintCreds},
	"SignatureDoesNotMatch":        {ErrAccessDenied, hintCreds},
	"InvalidToken":                 {ErrAccessDenied, "the session token is invalid; refresh AWS_SESSION_TOKEN"},
	"ExpiredToken":                 {ErrAccessDenied, "the session token has expired; refresh AWS_SESSION_TOKEN"},
	"RequestTimeTooSkewed":         {ErrAccessDenied, "the client clock differs from the server's by too much; fix the clock (NTP)"},
	"AuthorizationHeaderMalformed": {ErrAccessDenied, "the request was signed for the wrong region; set region= in the store URL"},
	"InvalidRange":                 {ErrInvalidRange, "the range starts past the end of the object"},
	"InvalidObjectName":            {ErrInvalidKey, "the server refused the object name"},
	"XMinioInvalidObjectName":      {ErrInvalidKey, "the server refused the object name"},
	"KeyTooLongError":              {ErrInvalidKey, "the object name is too long for the server"},
	"InvalidBucketName":            {ErrInvalidURL, "bucket names are 3-63 lowercase letters, digits, '-' and '.'"},
	"IncompleteBody":               {ErrSizeMismatch, hintBadSize},
	"EntityTooLarge":               {ErrInvalidArgument, "the object is larger than the server accepts"},
	"InternalError":                {ErrUnavailable, hintRetry},
	"ServiceUnavailable":           {ErrUnavailable, hintRetry},
	"SlowDown":                     {ErrUnavailable, hintRetry},
	"SlowDownRead":                 {ErrUnavailable, hintRetry},
	"SlowDownWrite":                {ErrUnavailable, hintRetry},
	"RequestTimeout":               {ErrUnavailable, hintRetry},
	"XMinioServerNotInitialized":   {ErrUnavailable, "the MinIO server is still starting; retry shortly"},
	"XMinioStorageFull":            {ErrUnavailable, "the server's disks are full; free space or add capacity"},
}

// s3StatusKind is the fallback for codes s3Errors does not list (HEAD
// responses have no body, so minio-go synthesises codes from the status).
func s3StatusKind(status int) (s3Kind, bool) {
	switch {
	case status == http.StatusNotFound:
		return s3Kind{ErrNotFound, hintNoKey}, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return s3Kind{ErrAccessDenied, hintCreds}, true
	case status == http.StatusRequestedRangeNotSatisfiable:
		return s3Kind{ErrInvalidRange, "the range starts past the end of the object"}, true
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return s3Kind{ErrUnavailable, hintRetry}, true
	}
	return s3Kind{}, false
}

// s3Error turns an error from minio-go into an *Error. callerCtx is the
// context the caller passed (not the per-call one), so a deadline of our own
// reads as ErrUnavailable while the caller's cancellation reads as itself.
func (s *s3Store) s3Error(callerCtx context.Context, op, key string, err error) error {
	e := &Error{Op: op, Key: key, Store: s.url, Err: err}
	var resp minio.ErrorResponse
	switch {
	case errors.As(err, &resp):
		row, ok := s3Errors[resp.Code]
		if !ok {
			row, ok = s3StatusKind(resp.StatusCode)
		}
		if ok {
			e.Kind, e.Msg = row.kind, row.hint
		}
		if resp.Code == "NoSuchBucket" {
			e.Msg = "bucket " + strconv.Quote(s.bucket) + " does not exist at " + s.endpoint + "; create it, or open the store with create_bucket=true"
		}
		// minio-go puts the whole response in the message; keep the cause
		// short and readable.
		e.Err = errors.New(resp.Code + ": " + resp.Message)
		if resp.Code == "" {
			e.Err = errors.New(strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode))
		}
		e.Err = &causeError{msg: e.Err.Error(), cause: err}
	case callerCtx.Err() != nil:
		// The caller gave up: report that, not an outage.
		e.Msg = "the caller's context ended"
		e.Err = &causeError{msg: err.Error(), cause: callerCtx.Err()}
	default:
		// Transport-level: refused, reset, DNS, TLS, our own timeouts.
		e.Kind = ErrUnavailable
		e.Msg = "could not reach " + s.endpoint + "; check the endpoint and that the server is running"
		// *url.Error repeats the whole request URL (upload ids and all);
		// show what went wrong, keep the rest for errors.As.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			e.Err = &causeError{msg: ue.Err.Error(), cause: err}
		}
	}
	return e
}

// causeError shows a short message while keeping the full cause for errors.Is/As.
type causeError struct {
	msg   string
	cause error
}

func (c *causeError) Error() string { return c.msg }
func (c *causeError) Unwrap() error { return c.cause }
