package jm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/admit"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/metricsrv"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/metrics"
	"github.com/sluicehq/sluice/jm/resourcemanager"
	"github.com/sluicehq/sluice/jm/rest"
	"github.com/sluicehq/sluice/jm/rest/web"
	"github.com/sluicehq/sluice/jm/rpc"
	"github.com/sluicehq/sluice/wasmhost"
)

// Config configures a JobManager. Blob is required; every other zero field
// takes its default.
type Config struct {
	// ListenAddr is the Kitex address, host:port; port 0 picks one. Empty
	// means "127.0.0.1:0".
	ListenAddr string
	// RESTListenAddr is the REST API's address (package jm/rest), host:port;
	// port 0 picks one (RESTAddr tells which). Empty means no REST API.
	RESTListenAddr string
	// AdvertiseAddr is the address tasks use to reach the JobManager. Empty
	// means the bound address, with the host name in place of an
	// unspecified host (0.0.0.0, ::).
	AdvertiseAddr string

	// Blob stores modules, inputs and results.
	Blob blob.Store
	// Runtime compiles modules and runs their plans. Nil means New creates
	// one (without an on-disk cache) and Close closes it.
	Runtime *wasmhost.Runtime
	// PlanLimits bound the sandbox a module's plan runs in; a tenant's
	// memory_bytes, call_timeout_ms and state_bytes quotas narrow them for
	// its plans.
	PlanLimits wasmhost.Limits
	// MaxPlans and MaxPlansPerTenant bound how many plans run at once, in
	// all and for one tenant (defaults DefaultMaxPlans,
	// DefaultMaxPlansPerTenant); more wait, and a tenant with too many
	// waiting is refused with ResourceExhausted.
	MaxPlans, MaxPlansPerTenant int
	// Planner replaces Runtime, for tests.
	Planner dispatcher.Planner

	// HeartbeatInterval and HeartbeatTimeout: how often TaskManagers
	// heartbeat, and how long one may stay silent before it is declared
	// dead (defaults 1s and 10s).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// SlotRequestTimeout is how long a job waits for enough free slots
	// before it fails with "not enough slots: need N, free M" (default 30s).
	SlotRequestTimeout time.Duration
	// Restart is the fixed-delay restart strategy of jobs that set none in
	// their config (default: no restarts).
	Restart jobmaster.RestartStrategy

	ModuleSizeLimit     int64         // default 64 MiB
	DefaultParallelism  int           // default 1
	MaxParallelismLimit int           // most key groups a job may declare; default 32768
	MaxJobSlots         int           // most slots one job may need; 0 means no limit
	Retention           time.Duration // how long ended jobs stay queryable; default 1h
	SplitSize           int64         // largest input split; default 4 MiB (smaller inputs get smaller splits)
	CancelTimeout       time.Duration // how long canceling waits for tasks; default 10s
	RPCTimeout          time.Duration // each call to a TaskManager; default 10s

	// MaxFrameSize bounds one RPC message; default the larger of
	// rpcserver.DefaultMaxFrameSize and ModuleSizeLimit + 1 MiB.
	MaxFrameSize int
	// Tenants holds the tenants, their token hashes, quotas and policies.
	// Nil means an open JobManager: every client is the default tenant.
	// ReloadTenants replaces its contents while the server runs.
	Tenants *auth.Tenants
	// Secret is the cluster secret TaskManagers must prove; its proof also
	// goes with every call to a TaskManager. Nil means any TaskManager may
	// join.
	Secret *auth.Secret
	// Auth authenticates calls; nil means rpc.TokenAuth with Tenants and
	// Secret.
	Auth rpc.Auth
	// TLS, when set, makes the Kitex port TLS only and every call to a
	// TaskManager TLS, with the CA and the certificate it holds (which
	// must name the advertised host). Clients may present a certificate;
	// one that the CA did not sign is refused. Nil means plaintext.
	TLS *tlsconf.Source
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// MetricsListenAddr, when set, is where the JobManager serves its
	// Prometheus metrics at /metrics (port 0 picks one; see MetricsAddr).
	// Empty means no metrics endpoint.
	MetricsListenAddr string
	// Leadership, when set, is this JobManager's term as the HA leader
	// (see RunHA): its session goes into every fencing token and to every
	// TaskManager that registers, jobs are recorded in its job store, and
	// New recovers the jobs the store holds once it serves.
	Leadership ha.Leadership
	// Driver, with the Active fields, puts the ResourceManager in active
	// mode: it starts TaskManagers when slots run short and releases idle
	// ones (package jm/resourcemanager). Nil means standalone.
	Driver resourcemanager.Driver
	Active ActiveConfig
}

// ActiveConfig configures active mode; zero fields take the
// resourcemanager defaults.
type ActiveConfig struct {
	// TaskManager is what each TaskManager the driver starts offers.
	TaskManager resourcemanager.ResourceSpec
	// MaxTaskManagers is the most the driver runs at once.
	MaxTaskManagers int
	// IdleTimeout is how long one may hold no slot before it is released.
	IdleTimeout time.Duration
	// StartTimeout is how long one may take to register.
	StartTimeout time.Duration
	// JobManagerAddress is what the TaskManagers started are given as
	// --jm: empty means this JobManager's advertised address; with HA, the
	// etcd:// URL, so they follow the leader.
	JobManagerAddress string
}

// Server is a running JobManager: the Dispatcher, ResourceManager and every
// JobMaster, served on one Kitex port.
type Server struct {
	cfg       Config
	log       *slog.Logger
	rm        *resourcemanager.ResourceManager
	d         *dispatcher.Dispatcher
	srv       *rpcserver.Server
	ownRT     *wasmhost.Runtime
	advertise atomic.Value // string; set once the server is bound
	closeOnce sync.Once
	closeErr  error
	gw        *rpc.TaskExecutors
	rest      *rest.Server      // nil without RESTListenAddr
	metrics   *metricsrv.Server // nil without MetricsListenAddr

	// Warm requests run in the background: bgCtx ends them at Close,
	// which waits for them (bg).
	bgMu     sync.Mutex // orders goWarm's Add before Close's Wait
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// New starts a JobManager and returns once it serves.
//
// # Errors
//
// A missing blob store, a listen error, or a wasm runtime that cannot start.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Blob == nil {
		return nil, errors.New("jobmanager: no blob store")
	}
	if cfg.TLS != nil && !cfg.TLS.HasCert() {
		return nil, errors.New("jobmanager: TLS without a certificate: pass --tls-cert and --tls-key with --tls-ca")
	}
	if cfg.ModuleSizeLimit <= 0 {
		cfg.ModuleSizeLimit = dispatcher.DefaultModuleSizeLimit
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = max(rpcserver.DefaultMaxFrameSize, int(cfg.ModuleSizeLimit)+1<<20)
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = jobmaster.DefaultRPCTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	planner := cfg.Planner
	if planner == nil {
		rt := cfg.Runtime
		if rt == nil {
			var err error
			rt, err = wasmhost.NewRuntime(ctx, wasmhost.NewRuntimeConfig().WithMaxModuleBytes(int(cfg.ModuleSizeLimit)).WithLogger(cfg.Logger))
			if err != nil {
				return nil, fmt.Errorf("jobmanager: wasm runtime: %w", err)
			}
			s.ownRT = rt
		}
		if cfg.MaxPlans <= 0 {
			cfg.MaxPlans = DefaultMaxPlans
		}
		if cfg.MaxPlansPerTenant <= 0 {
			cfg.MaxPlansPerTenant = DefaultMaxPlansPerTenant
		}
		planner = wasmPlanner{rt: rt, lim: cfg.PlanLimits, plans: admit.New(cfg.MaxPlans, cfg.MaxPlansPerTenant, planQueue)}
	}
	// Open: every client is the default tenant, who may then read all of
	// a TaskManager's log (Dispatcher.TaskManagerLogs).
	open := false
	switch a := cfg.Auth.(type) {
	case nil:
		open = cfg.Tenants == nil
	case rpc.OpenAuth:
		open = true
	case rpc.TokenAuth:
		open = a.Tenants == nil
	}
	if cfg.Auth == nil {
		cfg.Auth = rpc.TokenAuth{Tenants: cfg.Tenants, Secret: cfg.Secret}
	}
	gwcfg := rpcserver.ClientConfig{MaxFrameSize: cfg.MaxFrameSize, RPCTimeout: cfg.RPCTimeout}
	var serverTLS *tls.Config
	if cfg.TLS != nil {
		gwcfg.TLS = cfg.TLS.ClientConfig
		// Clients without a certificate call too (tenants prove
		// themselves by token); a certificate that is presented must be
		// the CA's.
		serverTLS = cfg.TLS.ServerConfig(tls.VerifyClientCertIfGiven)
	}
	if cfg.Secret != nil {
		gwcfg.Metadata = map[string]string{rpcserver.MetaPeer: cfg.Secret.RPCProof()}
	}
	gw := rpc.NewTaskExecutors(gwcfg)
	s.gw = gw
	var session string
	var store ha.JobStore
	if cfg.Leadership != nil {
		session, store = cfg.Leadership.Session(), cfg.Leadership
	}
	s.rm = resourcemanager.New(resourcemanager.Config{
		LeaderSession:      session,
		HeartbeatInterval:  cfg.HeartbeatInterval,
		HeartbeatTimeout:   cfg.HeartbeatTimeout,
		SlotRequestTimeout: cfg.SlotRequestTimeout,
		// Set below, before the server (and so any registration) starts.
		OnLost:        func(l resourcemanager.Lost) { s.d.TaskManagerLost(l) },
		OnRegistered:  func(tm resourcemanager.TaskManagerInfo) { s.goWarm([]string{tm.RPCAddress}, s.d.RunningModules) },
		OnTaskMetrics: func(_ string, ms []control.ExecutionMetrics) { s.d.ReportTaskMetrics(ms) },
		FreeStale:     gw.FreeStale,
		Logger:        cfg.Logger.With("component", "resourcemanager"),

		Driver:                  cfg.Driver,
		TaskManagerSpec:         cfg.Active.TaskManager,
		MaxTaskManagers:         cfg.Active.MaxTaskManagers,
		TaskManagerIdleTimeout:  cfg.Active.IdleTimeout,
		TaskManagerStartTimeout: cfg.Active.StartTimeout,
	})
	d, err := dispatcher.New(dispatcher.Config{
		Blob:                cfg.Blob,
		Planner:             planner,
		Resources:           s.rm,
		Gateway:             gw,
		Observer:            gw,
		OpenCluster:         open,
		Address:             func() string { a, _ := s.advertise.Load().(string); return a },
		ModuleSizeLimit:     cfg.ModuleSizeLimit,
		DefaultParallelism:  cfg.DefaultParallelism,
		MaxParallelismLimit: cfg.MaxParallelismLimit,
		MaxJobSlots:         cfg.MaxJobSlots,
		Restart:             cfg.Restart,
		Retention:           cfg.Retention,
		SplitSize:           cfg.SplitSize,
		CancelTimeout:       cfg.CancelTimeout,
		RPCTimeout:          cfg.RPCTimeout,
		Quotas:              quotasOf(cfg.Tenants),
		Policy:              policyOf(cfg.Tenants),
		LeaderSession:       session,
		Store:               store,
		JobStarted: func(m control.ModuleRef) {
			s.goWarm(nil, func() []control.ModuleRef { return []control.ModuleRef{m} })
		},
		Logger: cfg.Logger,
	})
	if err != nil {
		s.rm.Close()
		s.closeRuntime(ctx)
		return nil, fmt.Errorf("jobmanager: %w", err)
	}
	s.d = d
	srv, err := rpcserver.Start(ctx, rpcserver.Config{
		Addr:         cfg.ListenAddr,
		MaxFrameSize: cfg.MaxFrameSize,
		Logger:       cfg.Logger,
		TLS:          serverTLS,
	}, rpc.Services(d, s.rm, cfg.Auth)...)
	if err != nil {
		d.Close()
		s.rm.Close()
		s.closeRuntime(ctx)
		return nil, fmt.Errorf("jobmanager: %w", err)
	}
	s.srv = srv
	if cfg.RESTListenAddr != "" {
		if s.rest, err = rest.Start(rest.Config{
			Addr:            cfg.RESTListenAddr,
			Dispatcher:      d,
			Authenticate:    cfg.Auth.ClientToken, // the Kitex endpoints' check: one path
			ModuleSizeLimit: cfg.ModuleSizeLimit,
			// The dashboard (package jm/rest/web) under /web/; GET / redirects there.
			Web:    web.Handler(),
			Logger: cfg.Logger.With("component", "rest"),
		}); err != nil {
			srv.Close()
			d.Close()
			s.rm.Close()
			s.closeRuntime(ctx)
			return nil, fmt.Errorf("jobmanager: %w", err)
		}
	}
	if cfg.MetricsListenAddr != "" {
		reg := metricsrv.NewRegistry()
		reg.MustRegister(metrics.NewCollector(metrics.Source{
			Jobs: func() []metrics.Job {
				jms := d.JobMasters()
				out := make([]metrics.Job, len(jms))
				for i, j := range jms {
					out[i] = j
				}
				return out
			},
			Overview: s.rm.Overview,
		}))
		if s.metrics, err = metricsrv.Listen(cfg.MetricsListenAddr, reg, cfg.Logger); err != nil {
			if s.rest != nil {
				s.rest.Close()
			}
			srv.Close()
			d.Close()
			s.rm.Close()
			s.closeRuntime(ctx)
			return nil, fmt.Errorf("jobmanager: %w", err)
		}
		s.log.Info("serving metrics", "addr", s.metrics.Addr())
	}
	adv := advertised(cfg.AdvertiseAddr, srv.Addr())
	s.advertise.Store(adv)
	tmJM := cfg.Active.JobManagerAddress
	if tmJM == "" {
		tmJM = adv
	}
	if err := s.rm.StartDriver(ctx, tmJM); err != nil {
		s.Close()
		return nil, fmt.Errorf("jobmanager: %w", err)
	}
	s.log.Info("jobmanager serving", "addr", srv.Addr(), "advertise", adv)
	if l := cfg.Leadership; l != nil {
		// Published once it serves, so whoever finds it can reach it; the
		// jobs are recovered then, as TaskManagers register.
		err := l.Proclaim(ctx, adv)
		if err == nil {
			err = d.Recover(ctx)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("jobmanager: take over as leader: %w", err)
		}
	}
	return s, nil
}

// warm asks the TaskManagers at addrs to compile mods ahead of a
// deployment (see docs/RATIONALE.md, "How does a replacement TaskManager
// start without a cold compile?"). Best effort: a TaskManager that does
// not answer compiles at deployment, as it would anyway.
// addrs nil means every TaskManager with a free slot. mods is asked for in
// the background goroutine, as the callers hold locks.
func (s *Server) goWarm(addrs []string, mods func() []control.ModuleRef) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgCtx.Err() != nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if addrs == nil {
			addrs = s.freeTaskManagers()
		}
		s.warm(addrs, mods())
	}()
}

func (s *Server) warm(addrs []string, mods []control.ModuleRef) {
	if len(mods) == 0 {
		return
	}
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RPCTimeout)
		if err := s.gw.WarmModules(ctx, a, mods); err != nil {
			s.log.Debug("could not ask a task manager to compile modules ahead", "tm", a, "err", err)
		}
		cancel()
	}
}

// freeTaskManagers are the addresses of the TaskManagers with a free slot.
func (s *Server) freeTaskManagers() []string {
	var out []string
	for _, tm := range s.rm.Overview().TaskManagers {
		if tm.FreeSlots > 0 {
			out = append(out, tm.RPCAddress)
		}
	}
	return out
}

// quotasOf adapts the tenants file's quotas to the Dispatcher's; nil
// without tenants.
func quotasOf(ts *auth.Tenants) func(string) dispatcher.Quotas {
	if ts == nil {
		return nil
	}
	return func(tenant string) dispatcher.Quotas {
		q := ts.Quotas(tenant)
		return dispatcher.Quotas{
			Slots:            q.Slots,
			RunningJobs:      q.RunningJobs,
			SubmitsPerMinute: q.SubmitsPerMinute,
			ModuleBytes:      q.ModuleBytes,
			Limits: control.TaskLimits{MemoryBytes: q.MemoryBytes, CallTimeout: q.CallTimeout(), StateBytes: q.StateBytes,
				CPUWeight: q.CPUWeight, FuelPerSecond: q.FuelPerSecond, CallFuel: q.CallFuel},
		}
	}
}

// advertised picks the address tasks reach the JobManager at.
func advertised(configured, bound string) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return net.JoinHostPort(h, port)
		}
	}
	return bound
}

// Addr returns the address the JobManager is bound to, host:port.
func (s *Server) Addr() string { return s.srv.Addr() }

// RESTAddr returns the address the REST API is bound to, host:port; ""
// without Config.RESTListenAddr.
func (s *Server) RESTAddr() string {
	if s.rest == nil {
		return ""
	}
	return s.rest.Addr()
}

// MetricsAddr returns the bound address of the Prometheus endpoint
// (host:port), or "" when the JobManager serves none.
func (s *Server) MetricsAddr() string {
	if s.metrics == nil {
		return ""
	}
	return s.metrics.Addr()
}

// Dispatcher returns the Dispatcher, for in-process use (tests, embedded
// tools); clients use the Dispatcher service.
func (s *Server) Dispatcher() *dispatcher.Dispatcher { return s.d }

// ResourceManager returns the ResourceManager, for in-process use.
func (s *Server) ResourceManager() *resourcemanager.ResourceManager { return s.rm }

// Closed reports whether Close has begun (an HA leader that lost its
// lease is closed).
func (s *Server) Closed() bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	return s.bgCtx.Err() != nil
}

// Close stops the JobManager: live jobs are suspended (their tasks canceled
// and slots freed, best effort), then the server and the ResourceManager
// stop. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.rest != nil {
			// First, so no request reaches a closing Dispatcher.
			if err := s.rest.Close(); err != nil {
				s.log.Warn("close rest api", "err", err)
			}
		}
		s.bgMu.Lock()
		s.bgCancel()
		s.bgMu.Unlock()
		s.bg.Wait()
		s.d.Close()
		s.closeErr = s.srv.Close()
		if s.metrics != nil {
			s.closeErr = errors.Join(s.closeErr, s.metrics.Close())
		}
		s.rm.Close()
		s.closeRuntime(context.Background())
	})
	return s.closeErr
}

func (s *Server) closeRuntime(ctx context.Context) {
	if s.ownRT != nil {
		if err := s.ownRT.Close(ctx); err != nil {
			s.log.Warn("close wasm runtime", "err", err)
		}
	}
}
