package blob

import (
	"context"
	"fmt"
	"net"
	neturl "net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Target is what a store URL describes: exactly one of FS and S3 is set.
// Zero-valued option fields mean "the default", so a Target round-trips
// through String and ParseURL unchanged.
type Target struct {
	FS *FSOptions
	S3 *S3Options
}

// Open opens the store a URL names. See ParseURL for the URL forms.
//
// For s3 URLs the credentials come from the environment, in this order:
// AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), then
// MINIO_ROOT_USER + MINIO_ROOT_PASSWORD, then MINIO_ACCESS_KEY +
// MINIO_SECRET_KEY; with none set, requests are anonymous. Credentials in the
// URL itself are refused, so URLs can be logged.
//
// # Errors
//
//   - ErrInvalidURL: the URL is malformed (see ParseURL).
//   - As OpenFS and OpenS3.
func Open(ctx context.Context, rawURL string) (Store, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if t.FS != nil {
		return OpenFS(ctx, *t.FS)
	}
	return OpenS3(ctx, *t.S3)
}

// s3Params are the query parameters an s3 URL accepts, in documentation order.
var s3Params = []string{"endpoint", "region", "secure", "create_bucket", "part_size", "dial_timeout", "call_timeout", "io_timeout", "max_retries"}

// ParseURL parses a store URL without touching the network or the disk.
//
//	file:///abs/dir
//	s3://bucket[/prefix][?param=value&...]
//
// A file URL names an absolute directory (three slashes: the host part is
// empty); it takes no parameters.
//
// An s3 URL names a bucket and an optional key prefix inside it (a prefix of
// "a/b" stores key k as object "a/b/k"). Parameters, all optional:
//
//   - endpoint=host[:port]: the S3 server, default s3.amazonaws.com.
//   - region=name: the bucket's region; default: asked of the server.
//   - secure=true|false: HTTPS (default) or plain HTTP.
//   - create_bucket=true|false: create the bucket at Open if missing.
//   - part_size=bytes: multipart part size, 5 MiB to 5 GiB, default 16 MiB.
//   - dial_timeout=duration: TCP connect timeout, default 5s.
//   - call_timeout=duration: deadline of small calls (stat, list, delete,
//     bucket check), default 10s.
//   - io_timeout=duration: longest a single write to the connection may
//     block, and longest wait for response headers, default 60s.
//   - max_retries=n: attempts per request, 1 to 20, default 4.
//
// Durations use Go syntax ("500ms", "30s").
//
// # Errors
//
// The error wraps ErrInvalidURL and says which part is wrong and what a
// valid URL looks like.
func ParseURL(rawURL string) (Target, error) {
	fail := func(format string, args ...any) (Target, error) {
		return Target{}, &Error{Op: "parse URL", Key: rawURL, Kind: ErrInvalidURL, Msg: fmt.Sprintf(format, args...)}
	}
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return fail("%v; use file:///abs/dir or s3://bucket/prefix?endpoint=host:port", unwrapURLError(err))
	}
	if u.User != nil {
		return fail("credentials in the URL are refused; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY instead")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return fail("a store URL has no #fragment")
	}
	switch u.Scheme {
	case "file":
		return parseFileURL(u, fail)
	case "s3":
		return parseS3URL(u, fail)
	case "":
		return fail("missing scheme; use file:///abs/dir or s3://bucket/prefix")
	default:
		return fail("unknown scheme %q; use file:///abs/dir or s3://bucket/prefix", u.Scheme)
	}
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*neturl.Error); ok {
		return ue.Err
	}
	return err
}

type failFunc func(format string, args ...any) (Target, error)

func parseFileURL(u *neturl.URL, fail failFunc) (Target, error) {
	if u.Opaque != "" {
		return fail("file URLs need an absolute path: file:///abs/dir (three slashes)")
	}
	if u.Host != "" && u.Host != "localhost" {
		return fail("the host part of a file URL must be empty: use file:///abs/dir (three slashes), not file://%s/...", u.Host)
	}
	if u.RawQuery != "" {
		return fail("file URLs take no parameters")
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return fail("file URLs need an absolute path: file:///abs/dir")
	}
	if strings.ContainsFunc(u.Path, unicode.IsControl) {
		return fail("the path contains a control character")
	}
	return Target{FS: &FSOptions{Dir: filepath.Clean(u.Path)}}, nil
}

func parseS3URL(u *neturl.URL, fail failFunc) (Target, error) {
	if u.Opaque != "" || u.Host == "" {
		return fail("missing bucket: use s3://bucket/prefix")
	}
	if err := s3utils.CheckValidBucketNameStrict(u.Host); err != nil {
		return fail("bucket %q: %v; bucket names are 3-63 lowercase letters, digits, '-' and '.'", u.Host, err)
	}
	o := &S3Options{Bucket: u.Host}
	if p := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"), "/"); p != "" {
		if rule := keyRule(p); rule != "" {
			return fail("prefix %q: %s", p, strings.Replace(rule, "key", "prefix", 1))
		}
		o.Prefix = p
	}
	q, err := neturl.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("bad query: %v", err)
	}
	for name, vals := range q {
		if !slices.Contains(s3Params, name) {
			return fail("unknown parameter %q; known: %s", name, strings.Join(s3Params, ", "))
		}
		if len(vals) != 1 || vals[0] == "" {
			return fail("parameter %q needs exactly one non-empty value", name)
		}
		v := vals[0]
		var perr error
		switch name {
		case "endpoint":
			perr = checkEndpoint(v)
			o.Endpoint = v
		case "region":
			if strings.ContainsFunc(v, func(r rune) bool {
				return !(r == '-' || r == '_' || r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)))
			}) {
				perr = fmt.Errorf("region %q: use letters, digits and '-' (us-east-1)", v)
			}
			o.Region = v
		case "secure":
			var b bool
			b, perr = strconv.ParseBool(v)
			o.Insecure = !b
		case "create_bucket":
			o.CreateBucket, perr = strconv.ParseBool(v)
		case "part_size":
			o.PartSize, perr = strconv.ParseInt(v, 10, 64)
			if perr == nil && (o.PartSize < MinPartSize || o.PartSize > MaxPartSize) {
				perr = fmt.Errorf("part_size %d: must be %d (5 MiB) to %d (5 GiB) bytes", o.PartSize, MinPartSize, MaxPartSize)
			}
		case "dial_timeout":
			o.DialTimeout, perr = parseTimeout(v)
		case "call_timeout":
			o.CallTimeout, perr = parseTimeout(v)
		case "io_timeout":
			o.IOTimeout, perr = parseTimeout(v)
		case "max_retries":
			o.MaxRetries, perr = strconv.Atoi(v)
			if perr == nil && (o.MaxRetries < 1 || o.MaxRetries > 20) {
				perr = fmt.Errorf("max_retries %d: must be 1 to 20", o.MaxRetries)
			}
		}
		if perr != nil {
			return fail("parameter %s: %v", name, unwrapNum(perr))
		}
	}
	return Target{S3: o}, nil
}

func unwrapNum(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return fmt.Errorf("%q is not valid: %w", ne.Num, ne.Err)
	}
	return err
}

func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d <= 0 || d > 24*time.Hour {
		return 0, fmt.Errorf("%s: must be above 0 and at most 24h", v)
	}
	return d, nil
}

// checkEndpoint accepts host or host:port (IPv6 in brackets), nothing else.
func checkEndpoint(ep string) error {
	bad := fmt.Errorf("endpoint %q: use host or host:port, without scheme or path (127.0.0.1:9000)", ep)
	host, port := ep, ""
	if h, p, err := net.SplitHostPort(ep); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return bad
		}
		if strings.Contains(host, ":") { // IPv6: must have been bracketed
			if net.ParseIP(host) == nil {
				return bad
			}
			return nil
		}
	} else if strings.ContainsAny(ep, ":[]") {
		return bad
	}
	if host == "" || len(host) > 253 {
		return bad
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return bad
		}
		for _, r := range label {
			if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return bad
			}
		}
	}
	return nil
}

// String returns the canonical URL of t: parameters at their default are
// left out, and credentials are never included.
func (t Target) String() string {
	switch {
	case t.FS != nil:
		return (&neturl.URL{Scheme: "file", Path: filepath.Clean(t.FS.Dir)}).String()
	case t.S3 != nil:
		o := t.S3
		// Parameters in documentation order; ':' left unescaped so that
		// endpoints stay readable in logs.
		var q []string
		set := func(name, v string, isSet bool) {
			if isSet {
				q = append(q, name+"="+strings.ReplaceAll(neturl.QueryEscape(v), "%3A", ":"))
			}
		}
		set("endpoint", o.Endpoint, o.Endpoint != "")
		set("region", o.Region, o.Region != "")
		set("secure", "false", o.Insecure)
		set("create_bucket", "true", o.CreateBucket)
		set("part_size", strconv.FormatInt(o.PartSize, 10), o.PartSize != 0)
		set("dial_timeout", o.DialTimeout.String(), o.DialTimeout != 0)
		set("call_timeout", o.CallTimeout.String(), o.CallTimeout != 0)
		set("io_timeout", o.IOTimeout.String(), o.IOTimeout != 0)
		set("max_retries", strconv.Itoa(o.MaxRetries), o.MaxRetries != 0)
		u := &neturl.URL{Scheme: "s3", Host: o.Bucket, RawQuery: strings.Join(q, "&")}
		if o.Prefix != "" {
			u.Path = "/" + o.Prefix
		}
		return u.String()
	}
	return ""
}
