package blob

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// S3 part sizes.
const (
	MinPartSize     = 5 << 20  // S3's smallest part (except the last)
	MaxPartSize     = 5 << 30  // S3's largest part
	DefaultPartSize = 16 << 20 // S3Options.PartSize default
)

// S3 defaults; see S3Options.
const (
	DefaultS3Endpoint  = "s3.amazonaws.com"
	DefaultDialTimeout = 5 * time.Second
	DefaultCallTimeout = 10 * time.Second
	DefaultIOTimeout   = 60 * time.Second
	DefaultMaxRetries  = 4
)

// probeSize is how much of a reader of unknown size Put reads before
// choosing between one PUT and a multipart upload.
const probeSize = 1 << 20

// S3Options configures the s3 backend. The zero value of every field but
// Bucket means its default. See OpenS3.
type S3Options struct {
	// Endpoint is host or host:port of the S3 API; default
	// DefaultS3Endpoint.
	Endpoint string
	// Region of the bucket; empty asks the server (one extra call per
	// bucket, cached).
	Region string
	// Insecure selects plain HTTP instead of HTTPS.
	Insecure bool
	// Bucket holds the objects. Required.
	Bucket string
	// Prefix, if set, is prepended to every key: key k is object
	// "<Prefix>/k". No leading or trailing '/'.
	Prefix string
	// CreateBucket creates the bucket at open when it does not exist.
	CreateBucket bool

	// AccessKey, SecretKey and SessionToken are the credentials. When
	// AccessKey and SecretKey are both empty they are read from the
	// environment through Getenv (see Open for the variables); when no
	// variable is set either, requests are anonymous.
	AccessKey, SecretKey, SessionToken string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string

	// PartSize is the multipart part size, MinPartSize to MaxPartSize;
	// default DefaultPartSize. Objects up to PartSize go up in one PUT; a
	// Put of unknown size buffers one part in memory.
	PartSize int64
	// DialTimeout bounds TCP connect and TLS handshake; default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// CallTimeout is the deadline of small calls (Stat, List, Delete, the
	// bucket check at open), retries included; default
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// IOTimeout bounds one write to the connection and the wait for
	// response headers, so a stalled server fails a transfer instead of
	// hanging it; default DefaultIOTimeout.
	IOTimeout time.Duration
	// MaxRetries is the number of attempts per request (1 disables
	// retries), with exponential backoff capped at 1s; default
	// DefaultMaxRetries. With a refused connection the whole call fails
	// within about MaxRetries seconds.
	MaxRetries int

	// Logger receives notable events (bucket created); nil discards.
	Logger *slog.Logger
}

// s3Store is the s3 backend.
type s3Store struct {
	client   *minio.Client
	core     minio.Core
	tr       *http.Transport
	bucket   string
	prefix   string // "" or "<Prefix>/"
	endpoint string
	url      string
	partSize int64
	callTO   time.Duration
	log      *slog.Logger
	closed   atomic.Bool
	probes   sync.Pool // *[]byte of probeSize
}

var _ Store = (*s3Store)(nil)

// OpenS3 connects to an S3 API and checks (or creates) the bucket.
//
// Puts are atomic: S3 makes an object visible only when its PUT or its
// multipart upload completes, and a failed multipart upload is aborted
// (minio-go does this; when the server is unreachable the parts stay
// invisible until the bucket's lifecycle rule or MinIO's stale-upload
// cleanup removes them).
//
// # Errors
//
//   - ErrInvalidURL: the options are invalid (bucket name, endpoint,
//     sizes, an access key without a secret).
//   - ErrNotFound: the bucket does not exist and CreateBucket is false.
//   - ErrAccessDenied: the credentials are refused.
//   - ErrUnavailable: the endpoint cannot be reached within CallTimeout.
func OpenS3(ctx context.Context, o S3Options) (Store, error) {
	s := &s3Store{
		bucket:   o.Bucket,
		endpoint: cmp.Or(o.Endpoint, DefaultS3Endpoint),
		url:      "s3://" + path.Join(o.Bucket, o.Prefix) + " at " + cmp.Or(o.Endpoint, DefaultS3Endpoint),
		partSize: cmp.Or(o.PartSize, DefaultPartSize),
		callTO:   cmp.Or(o.CallTimeout, DefaultCallTimeout),
		log:      o.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.Prefix != "" {
		s.prefix = o.Prefix + "/"
	}
	s.probes.New = func() any { b := make([]byte, probeSize); return &b }
	fail := func(kind error, msg string) (Store, error) {
		return nil, &Error{Op: "open", Store: s.url, Kind: kind, Msg: msg}
	}
	if err := s3utils.CheckValidBucketNameStrict(o.Bucket); err != nil {
		return fail(ErrInvalidURL, "bucket "+strconv.Quote(o.Bucket)+": "+err.Error())
	}
	if o.Prefix != "" {
		if rule := keyRule(o.Prefix); rule != "" {
			return fail(ErrInvalidURL, "prefix: "+rule)
		}
	}
	if o.Endpoint != "" {
		if err := checkEndpoint(o.Endpoint); err != nil {
			return fail(ErrInvalidURL, err.Error())
		}
	}
	switch {
	case s.partSize < MinPartSize || s.partSize > MaxPartSize:
		return fail(ErrInvalidURL, "part size "+itoa(s.partSize)+" is outside 5 MiB..5 GiB")
	case o.DialTimeout < 0 || o.CallTimeout < 0 || o.IOTimeout < 0:
		return fail(ErrInvalidURL, "timeouts must not be negative")
	case o.MaxRetries < 0 || o.MaxRetries > 20:
		return fail(ErrInvalidURL, "max retries must be 1 to 20")
	case (o.AccessKey == "") != (o.SecretKey == ""):
		return fail(ErrInvalidURL, "an access key needs a secret key and the other way round")
	}

	creds := credentialsFor(o)
	s.tr = newTransport(!o.Insecure, cmp.Or(o.DialTimeout, DefaultDialTimeout), cmp.Or(o.IOTimeout, DefaultIOTimeout))
	client, err := minio.New(s.endpoint, &minio.Options{
		Creds:      creds,
		Secure:     !o.Insecure,
		Transport:  s.tr,
		Region:     o.Region,
		MaxRetries: cmp.Or(o.MaxRetries, DefaultMaxRetries),
	})
	if err != nil {
		return fail(ErrInvalidURL, err.Error())
	}
	s.client, s.core = client, minio.Core{Client: client}

	if err := s.checkBucket(ctx, o.CreateBucket, o.Region); err != nil {
		s.tr.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

// credentialsFor picks explicit credentials, else the environment's.
func credentialsFor(o S3Options) *credentials.Credentials {
	if o.AccessKey != "" {
		return credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, vars := range [][3]string{
		{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"},
		{"AWS_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN"},
		{"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", ""},
		{"MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", ""},
	} {
		id, secret := getenv(vars[0]), getenv(vars[1])
		if id != "" && secret != "" {
			token := ""
			if vars[2] != "" {
				token = getenv(vars[2])
			}
			return credentials.NewStaticV4(id, secret, token)
		}
	}
	return credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
}

// newTransport is minio-go's transport with bounded waits: connect and TLS
// within dial, response headers within io, and every write to the socket
// within io (a write deadline per Write). Read deadlines per Read would
// break net/http, whose background reader waits on idle connections.
func newTransport(secure bool, dial, io time.Duration) *http.Transport {
	tr, _ := minio.DefaultTransport(secure) // never fails
	d := &net.Dialer{
		Timeout: dial,
		// Notice a dead peer on an idle or reading connection in ~30s.
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3},
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &writeDeadlineConn{Conn: c, timeout: io}, nil
	}
	tr.TLSHandshakeTimeout = dial
	tr.ResponseHeaderTimeout = io
	tr.IdleConnTimeout = 30 * time.Second
	tr.ExpectContinueTimeout = time.Second
	return tr
}

// writeDeadlineConn fails a Write that makes no progress within timeout.
type writeDeadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *writeDeadlineConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (s *s3Store) checkBucket(ctx context.Context, create bool, region string) error {
	cctx, cancel := context.WithTimeout(ctx, s.callTO)
	defer cancel()
	ok, err := s.client.BucketExists(cctx, s.bucket)
	if err != nil {
		return s.s3Error(ctx, "open", "", err)
	}
	if ok {
		return nil
	}
	if !create {
		return &Error{Op: "open", Store: s.url, Kind: ErrNotFound,
			Msg: "bucket " + strconv.Quote(s.bucket) + " does not exist at " + s.endpoint + "; create it, or add create_bucket=true to the store URL"}
	}
	err = s.client.MakeBucket(cctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil {
		if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" {
			if code == "BucketAlreadyExists" {
				return &Error{Op: "open", Store: s.url, Kind: ErrAccessDenied,
					Msg: "bucket " + strconv.Quote(s.bucket) + " exists and belongs to someone else; choose another bucket name"}
			}
			return s.s3Error(ctx, "create bucket", "", err)
		}
	}
	s.log.Info("blob: created bucket", "bucket", s.bucket, "endpoint", s.endpoint)
	return nil
}

func (s *s3Store) fail(op, key string, kind error, msg string, err error) error {
	return &Error{Op: op, Key: key, Store: s.url, Kind: kind, Msg: msg, Err: err}
}

func (s *s3Store) check(ctx context.Context, op, key string) error {
	if kind, msg, err := precheck(ctx, s.closed.Load(), key); kind != nil || err != nil {
		return s.fail(op, key, kind, msg, err)
	}
	return nil
}

// sourceReader wraps the caller's reader to tell its errors from the
// network's, and to read no more than the declared size.
type sourceReader struct {
	r     io.Reader
	left  int64 // bytes still expected; -1 when the size is unknown
	err   error // the reader's own error, if any
	short bool  // EOF before the declared size
}

func (c *sourceReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	if c.left > 0 && int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	if c.left > 0 {
		c.left -= int64(n)
	}
	switch {
	case err == io.EOF:
		if c.left > 0 {
			c.short = true
			return n, io.ErrUnexpectedEOF
		}
	case err != nil:
		c.err = err
	}
	return n, err
}

// Put implements Store.Put.
func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.check(ctx, "put", key); err != nil {
		return err
	}
	if size < -1 {
		return s.fail("put", key, ErrInvalidArgument, "size is below -1 (-1 means unknown)", nil)
	}
	var (
		body = r
		src  *sourceReader
	)
	// A reader with ReadAt and Seek (bytes.Reader, os.File) goes to
	// minio-go as is: it can then retry and upload parts in parallel. Its
	// length is known up front.
	_, isRA := r.(io.ReaderAt)
	sk, isSK := r.(io.Seeker)
	remain := int64(-1)
	if isRA && isSK {
		if cur, err := sk.Seek(0, io.SeekCurrent); err == nil {
			if end, err := sk.Seek(0, io.SeekEnd); err == nil {
				if _, err := sk.Seek(cur, io.SeekStart); err == nil {
					remain = end - cur
				}
			}
		}
	}
	switch {
	case remain >= 0:
		if size > remain {
			return s.fail("put", key, ErrSizeMismatch, "the reader holds "+itoa(remain)+" of the "+itoa(size)+" bytes declared; nothing was stored", nil)
		}
		if size < 0 {
			size = remain
		}
	case size >= 0:
		src = &sourceReader{r: r, left: size}
		body = src
	default:
		// Unknown size: read a little first, so small objects go up in
		// one PUT rather than a three-call multipart upload.
		bp := s.probes.Get().(*[]byte)
		defer s.probes.Put(bp)
		src = &sourceReader{r: r, left: -1}
		n, err := io.ReadFull(src, *bp)
		switch err {
		case io.EOF, io.ErrUnexpectedEOF:
			body, size = bytes.NewReader((*bp)[:n]), int64(n)
		case nil:
			body = io.MultiReader(bytes.NewReader(*bp), src)
		default:
			return s.fail("put", key, nil, "reading the source failed; nothing was stored", err)
		}
	}
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, body, size, minio.PutObjectOptions{
		PartSize:    uint64(s.partSize),
		ContentType: "application/octet-stream",
	})
	if err != nil {
		switch {
		case src != nil && src.err != nil:
			return s.fail("put", key, nil, "reading the source failed; nothing was stored", src.err)
		case src != nil && src.short:
			return s.fail("put", key, ErrSizeMismatch, "the reader ended before the "+itoa(size)+" bytes declared; nothing was stored", nil)
		}
		return s.s3Error(ctx, "put", key, err)
	}
	return nil
}

// s3Reader maps errors met while reading a body to *Error.
type s3Reader struct {
	rc  io.ReadCloser
	s   *s3Store
	ctx context.Context
	key string
}

func (r *s3Reader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF {
		err = r.s.s3Error(r.ctx, "read", r.key, err)
	}
	return n, err
}

func (r *s3Reader) Close() error { return r.rc.Close() }

// Get implements Store.Get.
func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, err
	}
	return s.get(ctx, key, minio.GetObjectOptions{})
}

func (s *s3Store) get(ctx context.Context, key string, opts minio.GetObjectOptions) (io.ReadCloser, error) {
	rc, _, _, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		return nil, s.s3Error(ctx, "get", key, err)
	}
	return &s3Reader{rc: rc, s: s, ctx: ctx, key: key}, nil
}

// GetRange implements Store.GetRange.
func (s *s3Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, err
	}
	if rule := checkRange(offset, length); rule != "" {
		return nil, s.fail("get", key, ErrInvalidArgument, rule, nil)
	}
	if length == 0 {
		return s.emptyRange(ctx, key, offset)
	}
	var opts minio.GetObjectOptions
	switch {
	case offset == 0 && length < 0:
	case length < 0:
		opts.SetRange(offset, 0) // bytes=offset-
	default:
		opts.SetRange(offset, offset+length-1)
	}
	rc, err := s.get(ctx, key, opts)
	if errors.Is(err, ErrInvalidRange) {
		// S3 answers 416 for a range starting at the end, where we
		// promise an empty reader; find out which case this is.
		return s.emptyRange(ctx, key, offset)
	}
	return rc, err
}

// emptyRange returns an empty reader when offset is at most the size.
func (s *s3Store) emptyRange(ctx context.Context, key string, offset int64) (io.ReadCloser, error) {
	info, err := s.stat(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	if offset > info.Size {
		return nil, s.fail("get", key, ErrInvalidRange, "offset "+itoa(offset)+" is past the end of the object ("+itoa(info.Size)+" bytes)", nil)
	}
	return emptyReader{}, nil
}

// Stat implements Store.Stat.
func (s *s3Store) Stat(ctx context.Context, key string) (Info, error) {
	if err := s.check(ctx, "stat", key); err != nil {
		return Info{}, err
	}
	return s.stat(ctx, "stat", key)
}

func (s *s3Store) stat(ctx context.Context, op, key string) (Info, error) {
	cctx, cancel := context.WithTimeout(ctx, s.callTO)
	defer cancel()
	oi, err := s.client.StatObject(cctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.s3Error(ctx, op, key, err)
	}
	return Info{Key: key, Size: oi.Size, ModTime: oi.LastModified, ETag: oi.ETag}, nil
}

// List implements Store.List.
func (s *s3Store) List(ctx context.Context, prefix, startAfter string, limit int) (Page, error) {
	if s.closed.Load() {
		return Page{}, s.fail("list", prefix, ErrClosed, "the store was closed", nil)
	}
	if rule := prefixRule(prefix); rule != "" {
		return Page{}, s.fail("list", prefix, ErrInvalidKey, "prefix: "+rule, nil)
	}
	if rule := startAfterRule(startAfter); rule != "" {
		return Page{}, s.fail("list", startAfter, ErrInvalidKey, rule, nil)
	}
	limit = clampLimit(limit)
	cctx, cancel := context.WithTimeout(ctx, s.callTO)
	defer cancel()
	noOwner := false
	opts := minio.ListObjectsOptions{
		Prefix:     s.prefix + prefix,
		Recursive:  true,
		MaxKeys:    min(limit+1, MaxListLimit),
		FetchOwner: &noOwner,
	}
	if startAfter != "" {
		opts.StartAfter = s.prefix + startAfter
	}
	items := make([]Info, 0, min(limit+1, 64))
	for oi := range s.client.ListObjectsIter(cctx, s.bucket, opts) {
		if oi.Err != nil {
			return Page{}, s.s3Error(ctx, "list", prefix, oi.Err)
		}
		key, ok := strings.CutPrefix(oi.Key, s.prefix)
		if !ok || keyRule(key) != "" {
			continue // not ours, or not a valid key (another tool wrote it)
		}
		items = append(items, Info{Key: key, Size: oi.Size, ModTime: oi.LastModified, ETag: oi.ETag})
		if len(items) > limit {
			break
		}
	}
	if err := cctx.Err(); err != nil {
		// The iterator stops quietly when its context ends.
		return Page{}, s.s3Error(ctx, "list", prefix, err)
	}
	return finishPage(items, limit), nil
}

// Delete implements Store.Delete.
func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.callTO)
	defer cancel()
	if err := s.client.RemoveObject(cctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return s.s3Error(ctx, "delete", key, err)
	}
	return nil
}

// Close implements Store.Close.
func (s *s3Store) Close() error {
	if !s.closed.Swap(true) {
		s.tr.CloseIdleConnections()
	}
	return nil
}
