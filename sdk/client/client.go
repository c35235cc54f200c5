package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	kclient "github.com/cloudwego/kitex/client"
	"github.com/cloudwego/kitex/client/callopt"
	"github.com/cloudwego/kitex/pkg/endpoint"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	dispclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher/dispatcher"
	"github.com/sluicehq/sluice/internal/rpcserver"
)

// Defaults for the options.
const (
	// DefaultTimeout bounds every call but UploadModule and the long polls.
	DefaultTimeout = 15 * time.Second
	// DefaultUploadTimeout bounds UploadModule (modules are megabytes).
	DefaultUploadTimeout = 2 * time.Minute
	// DefaultPollInterval is how long one WaitJob long poll waits on the
	// server before the client asks again.
	DefaultPollInterval = 10 * time.Second
)

// Client talks to one JobManager's Dispatcher (or follows the leader of
// several, WithLeaderLookup). It is safe for concurrent use.
type Client struct {
	mu            sync.Mutex
	addr          string // under mu
	lookup        func(context.Context) (string, error)
	following     sync.Mutex // held while lookup runs
	c             dispclient.Client
	timeout       time.Duration
	uploadTimeout time.Duration
	pollInterval  time.Duration
	token         string
	tls           func(serverName string) *tls.Config // nil: plaintext
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets the timeout of each call (not of WaitJob as a whole,
// which runs until the job ends or its context does).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithUploadTimeout sets the timeout of UploadModule.
func WithUploadTimeout(d time.Duration) Option { return func(c *Client) { c.uploadTimeout = d } }

// WithPollInterval sets how long each server-side wait of WaitJob lasts.
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.pollInterval = d } }

// WithLeaderLookup makes the client follow the leader of a JobManager
// cluster with high availability: when a call finds the JobManager it
// called unavailable (killed, or no longer leading) or times out, lookup is asked where
// the leader is now (it may wait for an election), and the calls after it
// go there. The failed call still returns its error — a caller
// that retries on it (as WaitJob does) reaches the new leader; nothing is
// sent twice behind the caller's back.
func WithLeaderLookup(lookup func(ctx context.Context) (string, error)) Option {
	return func(c *Client) { c.lookup = lookup }
}

// WithToken sets the bearer token every call carries (a tenant's token,
// "slc_…"). A JobManager with a tenants file refuses calls without a valid
// one (ErrUnauthenticated); an open one ignores it.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTLS makes every connection TLS with cfg: the JobManager must present
// a certificate that cfg.RootCAs (the system's, if nil) trusts, for
// cfg.ServerName or, when that is empty, the host of the address dialled.
// Put a certificate in cfg (Certificates or GetClientCertificate) for a
// JobManager that asks for one. Without this option the client speaks
// plaintext, which a JobManager with TLS refuses.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		if cfg == nil {
			c.tls = nil
			return
		}
		cfg := cfg.Clone()
		c.tls = func(serverName string) *tls.Config {
			out := cfg.Clone()
			if out.ServerName == "" {
				out.ServerName = serverName
			}
			return out
		}
	}
}

// New returns a client for the JobManager at addr (host:port). It does not
// connect until the first call.
func New(addr string, opts ...Option) (*Client, error) {
	if addr == "" {
		return nil, fmt.Errorf("no job manager address: pass --jm or set SLUICE_JM: %w", ErrInvalidArgument)
	}
	c := &Client{
		addr:          addr,
		timeout:       DefaultTimeout,
		uploadTimeout: DefaultUploadTimeout,
		pollInterval:  DefaultPollInterval,
	}
	for _, o := range opts {
		o(c)
	}
	cc := rpcserver.ClientConfig{RPCTimeout: c.timeout, TLS: c.tls}
	if c.token != "" {
		cc.Metadata = map[string]string{rpcserver.MetaToken: c.token}
	}
	kopts := rpcserver.ClientOptions(addr, cc)
	if c.lookup != nil {
		kopts = append(kopts, kclient.WithMiddleware(c.followMiddleware))
	}
	kc, err := dispclient.NewClient("dispatcher", kopts...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher client for %s: %w", addr, err)
	}
	c.c = kc
	return c, nil
}

// Addr is the JobManager address the client calls.
func (c *Client) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// call bounds ctx and the Kitex call by d; a client following the leader
// sends the call to where it last found it.
func (c *Client) call(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc, []callopt.Option) {
	ctx, cancel := context.WithTimeout(ctx, d)
	opts := []callopt.Option{callopt.WithRPCTimeout(d)}
	if c.lookup != nil {
		opts = append(opts, callopt.WithHostPort(c.Addr()))
	}
	return ctx, cancel, opts
}

// follow asks the lookup where the leader is now, after a call found this
// one unavailable; the next calls go there. One lookup runs at a time: a
// call that fails meanwhile waits for it.
func (c *Client) follow() {
	c.following.Lock()
	defer c.following.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), leaderLookupTimeout)
	defer cancel()
	addr, err := c.lookup(ctx)
	if err != nil || addr == "" {
		return // the next failing call asks again
	}
	c.mu.Lock()
	c.addr = addr
	c.mu.Unlock()
}

// leaderLookupTimeout bounds one lookup of the leader (an election takes
// about a lease TTL).
const leaderLookupTimeout = 30 * time.Second

// followMiddleware has the client follow the leader when a call finds the
// JobManager it called unavailable (gone, or no longer leading) or gets no
// answer in time (frozen, its lease lost meanwhile).
func (c *Client) followMiddleware(next endpoint.Endpoint) endpoint.Endpoint {
	return func(ctx context.Context, req, resp any) error {
		err := next(ctx, req, resp)
		if err != nil && retryable(rpcserver.FromCall(err)) {
			c.follow()
		}
		return err
	}
}

// wrap maps a Kitex error to the project's errors (errors.Is works against
// the Err* values of this package) and adds the operation.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, rpcserver.FromCall(err))
}

// UploadModule stores a Wasm module in the cluster and returns its digest
// ("sha256-<hex>"). Uploading the same bytes again is cheap and returns the
// same digest.
//
// # Errors
//
// ErrInvalidModule for bytes that are not a Sluice module, ErrModuleTooLarge.
func (c *Client) UploadModule(ctx context.Context, wasm []byte) (string, error) {
	ctx, cancel, opts := c.call(ctx, c.uploadTimeout)
	defer cancel()
	resp, err := c.c.UploadModule(ctx, &dispatcher.UploadModuleRequest{Module: wasm}, opts...)
	if err != nil {
		return "", wrap("upload module", err)
	}
	return resp.GetDigest(), nil
}

// SubmitJob starts a job and returns its id. The JobManager plans the job
// (runs the module's plan export) and validates the graph before answering.
//
// # Errors
//
// ErrModuleNotFound, ErrInvalidArgument (wrapping the graph's problems),
// ErrNotEnoughSlots when no cluster could hold the job's parallelism.
func (c *Client) SubmitJob(ctx context.Context, spec JobSpec) (string, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	req := &dispatcher.SubmitJobRequest{
		ModuleDigest: spec.ModuleDigest,
		Args_:        spec.Args,
		Parallelism:  int32(spec.Parallelism),
		Config:       spec.Config,
	}
	if spec.Name != "" {
		req.Name = &spec.Name
	}
	if spec.FromSavepoint != "" {
		req.FromSavepoint = &spec.FromSavepoint
	}
	if spec.FromCheckpoint != "" {
		req.FromCheckpoint = &spec.FromCheckpoint
	}
	resp, err := c.c.SubmitJob(ctx, req, opts...)
	if err != nil {
		return "", wrap("submit job", err)
	}
	return resp.GetJobId(), nil
}

// ListJobs returns every job the JobManager knows, running or retained.
func (c *Client) ListJobs(ctx context.Context) ([]JobSummary, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.ListJobs(ctx, opts...)
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	out := make([]JobSummary, 0, len(resp.GetJobs()))
	for _, j := range resp.GetJobs() {
		out = append(out, summaryFromWire(j))
	}
	return out, nil
}

// GetJob returns a job's details.
//
// # Errors
//
// ErrJobNotFound.
func (c *Client) GetJob(ctx context.Context, jobID string) (JobDetails, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.GetJob(ctx, jobID, opts...)
	if err != nil {
		return JobDetails{}, wrap("get job "+jobID, err)
	}
	return detailsFromWire(resp), nil
}

// CancelJob asks the JobManager to cancel a job; it returns once the
// request is accepted. Use WaitJob to wait for CANCELED.
//
// # Errors
//
// ErrJobNotFound.
func (c *Client) CancelJob(ctx context.Context, jobID string) error {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	return wrap("cancel job "+jobID, c.c.CancelJob(ctx, jobID, opts...))
}

// PollJob waits up to wait on the server for the job to end and returns its
// state then (wait 0 returns at once). The result carries records and
// accumulators once the job FINISHED.
//
// # Errors
//
// ErrJobNotFound.
func (c *Client) PollJob(ctx context.Context, jobID string, wait time.Duration) (JobResult, error) {
	ctx, cancel, opts := c.call(ctx, wait+c.timeout)
	defer cancel()
	resp, err := c.c.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: jobID, TimeoutMs: wait.Milliseconds()}, opts...)
	if err != nil {
		return JobResult{}, wrap("wait for job "+jobID, err)
	}
	return resultFromWire(resp), nil
}

// PollRecords waits up to wait on the server until the job has released
// collect-sink records from index from on (or has ended), and returns its
// state then with those records: Records[0] is record RecordsOffset, which
// is more than from when the JobManager had to drop older ones (it keeps
// the newest 256 MiB). A record is released once a completed checkpoint
// covers it, and every record once the job FINISHED, so a restore never
// takes back what a reader got: a job without checkpoints releases its
// records when it finishes. An answer carries a few MiB at most; ask again
// from RecordsOffset+len(Records) until that reaches RecordsTotal.
//
// # Errors
//
// ErrJobNotFound; ErrInvalidArgument for a negative from.
func (c *Client) PollRecords(ctx context.Context, jobID string, from int64, wait time.Duration) (JobResult, error) {
	ctx, cancel, opts := c.call(ctx, wait+c.timeout)
	defer cancel()
	resp, err := c.c.WaitJob(ctx, &dispatcher.WaitJobRequest{JobId: jobID, TimeoutMs: wait.Milliseconds(), RecordsFrom: &from}, opts...)
	if err != nil {
		return JobResult{}, wrap("wait for records of job "+jobID, err)
	}
	return resultFromWire(resp), nil
}

// WaitJob long-polls until the job reaches a terminal state (FINISHED,
// FAILED, CANCELED) or ctx ends, and returns its result. A call that fails
// on the way (a timeout, the JobManager briefly unreachable) is retried
// until ctx ends; an answer such as ErrJobNotFound is returned at once.
func (c *Client) WaitJob(ctx context.Context, jobID string) (JobResult, error) {
	backoff := 100 * time.Millisecond
	for {
		r, err := c.PollJob(ctx, jobID, c.pollInterval)
		switch {
		case err == nil && Terminal(r.State):
			return r, nil
		case err == nil:
			backoff = 100 * time.Millisecond
			continue
		case ctx.Err() != nil:
			return JobResult{}, fmt.Errorf("wait for job %s: %w", jobID, ctx.Err())
		case !retryable(err):
			return JobResult{}, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return JobResult{}, fmt.Errorf("wait for job %s: %w (last error: %v)", jobID, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDeadlineExceeded)
}

// Overview returns the cluster's TaskManagers, slots and jobs by state.
func (c *Client) Overview(ctx context.Context) (Overview, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.Overview(ctx, opts...)
	if err != nil {
		return Overview{}, wrap("overview", err)
	}
	return overviewFromWire(resp), nil
}

// TriggerSavepoint takes a savepoint of a running job and returns it once
// it completed (at most timeout; 0 means the server's default). With stop,
// the job stops after the savepoint and ends FINISHED.
//
// # Errors
//
// ErrJobNotFound; ErrFailedPrecondition when the job is not running; the
// reason the savepoint was aborted.
func (c *Client) TriggerSavepoint(ctx context.Context, jobID string, stop bool, timeout time.Duration) (Checkpoint, error) {
	ctx, cancel, opts := c.call(ctx, max(timeout, 5*time.Minute)+c.timeout)
	defer cancel()
	resp, err := c.c.TriggerSavepoint(ctx, &dispatcher.SavepointRequest{JobId: jobID, Stop: stop, TimeoutMs: timeout.Milliseconds()}, opts...)
	if err != nil {
		return Checkpoint{}, wrap("savepoint of job "+jobID, err)
	}
	return checkpointFromWire(resp), nil
}

// StopWithDrain stops a job as TriggerSavepoint with stop does, after its
// sources sent the maximum watermark: every event-time timer fires (and
// what it emits reaches the sinks) before the savepoint, as Flink's
// stop --drain. Use it to end an unbounded job for good; a job resumed
// from a drained savepoint starts at the end of event time.
//
// # Errors
//
// As TriggerSavepoint.
func (c *Client) StopWithDrain(ctx context.Context, jobID string, timeout time.Duration) (Checkpoint, error) {
	ctx, cancel, opts := c.call(ctx, max(timeout, 5*time.Minute)+c.timeout)
	defer cancel()
	drain := true
	resp, err := c.c.TriggerSavepoint(ctx, &dispatcher.SavepointRequest{JobId: jobID, Stop: true, Drain: &drain, TimeoutMs: timeout.Milliseconds()}, opts...)
	if err != nil {
		return Checkpoint{}, wrap("stop with drain of job "+jobID, err)
	}
	return checkpointFromWire(resp), nil
}

// ListCheckpoints returns a job's checkpoints and savepoints, newest first.
// A job the JobManager no longer knows (it expired, or ran on a JobManager
// that is gone) is listed from the blob store: its retained checkpoints.
//
// # Errors
//
// ErrJobNotFound when the JobManager knows no such job and the store
// holds no checkpoint of it.
func (c *Client) ListCheckpoints(ctx context.Context, jobID string) ([]Checkpoint, error) {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.ListCheckpoints(ctx, jobID, opts...)
	if err != nil {
		return nil, wrap("checkpoints of job "+jobID, err)
	}
	out := make([]Checkpoint, 0, len(resp.GetCheckpoints()))
	for _, w := range resp.GetCheckpoints() {
		out = append(out, checkpointFromWire(w))
	}
	return out, nil
}

// DisposeSavepoint deletes a savepoint.
//
// # Errors
//
// ErrNotFound for an unknown savepoint (or another tenant's).
func (c *Client) DisposeSavepoint(ctx context.Context, id string) error {
	ctx, cancel, opts := c.call(ctx, c.timeout)
	defer cancel()
	return wrap("dispose savepoint "+id, c.c.DisposeSavepoint(ctx, id, opts...))
}
