package rest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// Defaults for Config fields left zero.
const (
	DefaultRefreshInterval = 2 * time.Second
	// DefaultMaxBody bounds every request body but a module upload's.
	DefaultMaxBody = 1 << 20
	// MaxOperations bounds the savepoint, stop and rescale requests whose
	// status is kept; the oldest ended ones are forgotten first.
	MaxOperations = 1024
)

// Dispatcher is what the API asks of the JobManager's Dispatcher
// (*dispatcher.Dispatcher).
type Dispatcher interface {
	UploadModule(ctx context.Context, tenant string, wasm []byte) (string, int64, error)
	ListModules(ctx context.Context, tenant string) ([]dispatcher.Module, error)
	SubmitJob(ctx context.Context, tenant string, s dispatcher.Submission) (string, error)
	ListJobs(ctx context.Context, tenant string) []jobmaster.Details
	GetJob(ctx context.Context, tenant, id string) (jobmaster.Details, error)
	JobSpec(ctx context.Context, tenant, id string) (dispatcher.JobSpec, error)
	CancelJob(ctx context.Context, tenant, id string) error
	Overview(ctx context.Context, tenant string) dispatcher.Overview
	ListCheckpoints(ctx context.Context, tenant, job string) ([]checkpoint.Stats, error)
	TriggerSavepoint(ctx context.Context, tenant, job string, stop bool, timeout time.Duration) (checkpoint.Stats, error)
	CheckRescale(ctx context.Context, tenant, id string, parallelism int) error
	Rescale(ctx context.Context, tenant, id string, parallelism int, timeout time.Duration) (dispatcher.Rescaled, error)
	Logs(ctx context.Context, tenant, job string, q dispatcher.LogQuery) ([]dispatcher.LogLine, error)
	TaskManagerLogs(ctx context.Context, tenant, tmID string, q dispatcher.LogQuery) ([]dispatcher.LogLine, error)
	Stacks(ctx context.Context, tenant, job string, q dispatcher.StackQuery) ([]dispatcher.TaskStack, error)
}

var _ Dispatcher = (*dispatcher.Dispatcher)(nil)

// Config configures the API. Dispatcher and Authenticate are required.
type Config struct {
	// Addr is where Start listens, host:port; port 0 picks one.
	Addr       string
	Dispatcher Dispatcher
	// Authenticate returns the tenant a bearer token names ("" when the
	// request has none): the Kitex API's client check (jm/rpc
	// Auth.ClientToken), so both front doors agree.
	Authenticate func(ctx context.Context, token string) (tenant string, err error)
	// ModuleSizeLimit bounds an uploaded module, as on Kitex (default
	// dispatcher.DefaultModuleSizeLimit).
	ModuleSizeLimit int64
	// MaxBody bounds every other request body (default DefaultMaxBody).
	MaxBody int64
	// RefreshInterval is what /config tells the dashboard to poll at.
	RefreshInterval time.Duration
	// SavepointTimeout bounds each savepoint, stop and rescale (default
	// dispatcher.DefaultSavepointTimeout).
	SavepointTimeout time.Duration
	// Version is shown by /config and /overview; empty means the build's
	// module version.
	Version string
	// Web, when set, serves the dashboard under /web/ (package jm/rest/web),
	// and GET / redirects there.
	Web http.Handler
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of "now" fields; nil means time.Now.
	Now func() time.Time
}

// Server is the REST API: an http.Handler, and once Start has run, a
// listener serving it.
type Server struct {
	cfg    Config
	log    *slog.Logger
	routes []route
	ops    *operations

	hs *http.Server
	ln net.Listener

	// bgCtx ends the savepoint, stop and rescale operations at Close,
	// which waits for them (bg).
	bgMu     sync.Mutex
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	closed   sync.Once
}

// New returns the API as a handler, not listening (see Start).
//
// # Errors
//
// A missing Dispatcher or Authenticate.
func New(cfg Config) (*Server, error) {
	if cfg.Dispatcher == nil || cfg.Authenticate == nil {
		return nil, errors.New("rest: Dispatcher and Authenticate are required")
	}
	if cfg.ModuleSizeLimit <= 0 {
		cfg.ModuleSizeLimit = dispatcher.DefaultModuleSizeLimit
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.SavepointTimeout <= 0 {
		cfg.SavepointTimeout = dispatcher.DefaultSavepointTimeout
	}
	if cfg.Version == "" {
		cfg.Version = buildVersion()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ops: newOperations(MaxOperations)}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.routes = s.table()
	return s, nil
}

// Start returns the API serving on cfg.Addr.
//
// # Errors
//
// As New, and a listen error.
func Start(cfg Config) (*Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rest: listen: %w", err)
	}
	s.ln = ln
	s.hs = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// A 64 MiB upload on a slow link, not a connection held forever.
		ReadTimeout:    5 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := s.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("rest server stopped", "err", err)
		}
	}()
	s.log.Info("rest api serving", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the address Start bound, host:port; "" for a Server from New.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops serving (requests in flight get a few seconds to finish),
// then ends the savepoint, stop and rescale operations in flight and waits
// for them. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		if s.hs != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err = s.hs.Shutdown(ctx); err != nil {
				err = s.hs.Close()
			}
			cancel()
		}
		s.bgMu.Lock()
		s.bgCancel()
		s.bgMu.Unlock()
		s.bg.Wait()
	})
	return err
}

// goOp runs f in the background, bounded by Close; false when closed.
func (s *Server) goOp(f func(ctx context.Context)) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgCtx.Err() != nil {
		return false
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f(s.bgCtx)
	}()
	return true
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bearer returns the token of an Authorization header ("" for none).
func bearer(h string) (string, bool) {
	if h == "" {
		return "", true
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// tmLookup finds a TaskManager of the overview by resource id.
func tmLookup(o resourcemanager.Overview, id string) (resourcemanager.TaskManagerInfo, bool) {
	for _, t := range o.TaskManagers {
		if t.ResourceID == id {
			return t, true
		}
	}
	return resourcemanager.TaskManagerInfo{}, false
}
