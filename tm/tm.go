package tm

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/logring"
	"github.com/sluicehq/sluice/internal/metricsrv"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/tm/executor"
	"github.com/sluicehq/sluice/tm/metrics"
	"github.com/sluicehq/sluice/tm/rpc"
	"github.com/sluicehq/sluice/wasmhost"
)

// Config configures a TaskManager.
type Config struct {
	// JMAddress is the JobManager's Kitex address (host:port).
	JMAddress string
	// JMResolver, when set, finds the leader JobManager's address (an HA
	// cluster): the TaskManager registers with whichever leads and
	// re-registers when the leader changes. JMAddress is then only the
	// route used to pick the advertised host, and may be empty.
	JMResolver func(context.Context) (string, error)
	// ListenAddr is where the TaskExecutor Kitex service listens; port 0
	// picks a free port. Empty means "127.0.0.1:0".
	ListenAddr string
	// DataAddr is where the data-exchange port listens. Empty means port 0
	// on ListenAddr's host.
	DataAddr string
	// AdvertiseHost is the host the JobManager and other TaskManagers use to
	// reach this one. Empty means ListenAddr's host or, when that is a
	// wildcard (0.0.0.0, ::), the local address of the route to JMAddress.
	AdvertiseHost string
	// Slots is the number of task slots; at least 1.
	Slots int
	// Blob is where modules and inputs are read from. Required; the
	// TaskManager does not close it.
	Blob blob.Store
	// Runtime compiles and runs guests. Nil means the TaskManager creates
	// one (with CacheDir) and closes it on Close.
	Runtime *wasmhost.Runtime
	// CacheDir keeps module bytes (and, for an owned runtime, compiled
	// modules) across restarts. Empty means no disk cache.
	CacheDir string
	// ModuleCacheMemory bounds the compiled modules kept after their last
	// task ended (their estimated size); 0 means DefaultModuleCacheMemory.
	// ModuleCacheDisk bounds the files under CacheDir: a quarter for module
	// bytes and the rest, for an owned runtime, for compiled machine code
	// (see DiskBudgets); 0 means DefaultModuleCacheDisk. Least recently used
	// modules go first; a running task's module never goes.
	ModuleCacheMemory int64
	ModuleCacheDisk   int64
	// ResourceID names this TaskManager to the ResourceManager; empty means
	// a random id with the host name.
	ResourceID string
	// CPUCores and MemoryBytes are reported at registration; 0 means the
	// machine's.
	CPUCores    int
	MemoryBytes int64
	// RPC configures the clients to the JobManager; zero means the
	// rpcserver defaults.
	RPC rpcserver.ClientConfig
	// Secret is the cluster secret: calls to the JobManager carry its proof,
	// TaskExecutor calls without it are refused, and the data port checks
	// its HELLO token. Nil means an open cluster.
	Secret *auth.Secret
	// TLS, when set, makes the TaskExecutor port and the data port TLS
	// only, each requiring a client certificate signed by the CA (only the
	// JobManager and other TaskManagers call them), and every connection
	// this TaskManager makes TLS, presenting its certificate. The
	// certificate must name the advertised host. Nil means plaintext.
	TLS *tlsconf.Source
	// Logger receives the TaskManager's logs; nil means slog.Default().
	Logger *slog.Logger
	// MetricsListenAddr, when set, is where the TaskManager serves its
	// Prometheus metrics at /metrics (port 0 picks one; see MetricsAddr).
	// Empty means no metrics endpoint.
	MetricsListenAddr string
	// DisableMetrics turns the task metrics off: tasks count nothing and
	// report no figures (the JobManager, REST API and dashboard show
	// zeros); /metrics, if served, has only the slots and the Go runtime.
	DisableMetrics bool
}

// Default module cache budgets of a TaskManager.
const (
	DefaultModuleCacheMemory = 512 << 20
	DefaultModuleCacheDisk   = 2 << 30
)

// DiskBudgets splits a disk budget (0 or less: DefaultModuleCacheDisk)
// between module bytes (a quarter) and compiled machine code (the rest),
// which is several times the size of the module it came from.
func DiskBudgets(total int64) (modules, compiled int64) {
	if total <= 0 {
		total = DefaultModuleCacheDisk
	}
	modules = max(total/4, 1)
	return modules, max(total-modules, 1)
}

// TaskManager is a running TaskManager: a Kitex server with the
// TaskExecutor service, a data-exchange port, the slot table and the
// registration loop with the JobManager.
type TaskManager struct {
	cfg       Config
	log       *slog.Logger
	srv       *rpcserver.Server
	metrics   *metricsrv.Server // nil without MetricsListenAddr
	ex        *executor.Executor
	xchg      *exchange.Manager
	rt        *wasmhost.Runtime
	ownRT     bool
	stop      context.CancelFunc
	loopDone  chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New starts a TaskManager: it binds its ports, then registers with the
// JobManager in the background (retrying until the JobManager answers), so
// it can start before the JobManager does.
//
// # Errors
//
// A bad configuration (no JMAddress, no Blob, Slots < 1) or a port that
// cannot be bound; nothing is left running then.
func New(ctx context.Context, cfg Config) (_ *TaskManager, err error) {
	if cfg.JMAddress == "" && cfg.JMResolver == nil {
		return nil, errors.New("task manager: no job manager address: set --jm or SLUICE_JM")
	}
	if cfg.Blob == nil {
		return nil, errors.New("task manager: no blob store: set --blob")
	}
	if cfg.Slots < 1 {
		return nil, fmt.Errorf("task manager: %d slots: need at least 1", cfg.Slots)
	}
	if cfg.TLS != nil && !cfg.TLS.HasCert() {
		return nil, errors.New("task manager: TLS without a certificate: pass --tls-cert and --tls-key with --tls-ca")
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	listenHost, _, err := net.SplitHostPort(cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("task manager: listen address %q: %w", cfg.ListenAddr, err)
	}
	if cfg.DataAddr == "" {
		cfg.DataAddr = net.JoinHostPort(listenHost, "0")
	}
	if cfg.ResourceID == "" {
		cfg.ResourceID = newResourceID()
	}
	if cfg.CPUCores <= 0 {
		cfg.CPUCores = runtime.NumCPU()
	}
	if cfg.MemoryBytes <= 0 {
		cfg.MemoryBytes = totalMemory()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The TaskManager keeps its own recent log (INFO and above) for
	// `sluice logs --tm` and the REST API, beside writing it.
	own := logring.New(executor.DefaultOwnLogLines, executor.DefaultOwnLogBytes)
	log := slog.New(logring.NewHandler(cfg.Logger.Handler(), own, slog.LevelInfo, func(l *control.LogLine) {
		l.TaskManager = cfg.ResourceID
	})).With("tm", cfg.ResourceID)
	t := &TaskManager{cfg: cfg, log: log, rt: cfg.Runtime, loopDone: make(chan struct{})}
	defer func() {
		if err != nil {
			t.closeParts()
		}
	}()

	if t.rt == nil {
		rc := wasmhost.NewRuntimeConfig()
		if cfg.CacheDir != "" {
			_, compiled := DiskBudgets(cfg.ModuleCacheDisk)
			rc = rc.WithCacheDir(cfg.CacheDir).WithCacheDirBudget(compiled)
		}
		if t.rt, err = wasmhost.NewRuntime(ctx, rc); err != nil {
			return nil, fmt.Errorf("task manager: wasm runtime: %w", err)
		}
		t.ownRT = true
	}
	adv := advertiseHost(cfg.AdvertiseHost, listenHost, cfg.JMAddress)
	xcfg, err := dataConfig(cfg.DataAddr, adv)
	if err != nil {
		return nil, fmt.Errorf("task manager: data port: %w", err)
	}
	xcfg.Logger = log
	var serverTLS *tls.Config
	if cfg.TLS != nil {
		serverTLS = cfg.TLS.ServerConfig(tls.RequireAndVerifyClientCert)
		xcfg.ServerTLS, xcfg.ClientTLS = serverTLS, cfg.TLS.ClientConfig
		cfg.RPC.TLS = cfg.TLS.ClientConfig
	}
	if cfg.Secret != nil {
		secret := cfg.Secret
		xcfg.Token = secret.DataToken()
		xcfg.Authenticate = func(tok []byte) error {
			if !secret.CheckData(tok) {
				return errors.New("wrong cluster secret")
			}
			return nil
		}
		md := maps.Clone(cfg.RPC.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		md[rpcserver.MetaPeer] = secret.RPCProof()
		cfg.RPC.Metadata = md
	}
	if t.xchg, err = exchange.NewManager(ctx, xcfg); err != nil {
		return nil, fmt.Errorf("task manager: data port: %w", err)
	}
	jms := rpc.NewJobMasters(cfg.RPC)
	moduleDir := ""
	moduleDisk, _ := DiskBudgets(cfg.ModuleCacheDisk)
	if cfg.CacheDir != "" {
		moduleDir = cfg.CacheDir + string(os.PathSeparator) + "modules"
	}
	t.ex = executor.New(executor.Config{
		Slots:      cfg.Slots,
		Runtime:    t.rt,
		Blob:       cfg.Blob,
		Exchange:   t.xchg,
		JobMasters: jms,
		CacheDir:   moduleDir,

		ModuleMemory: cfg.ModuleCacheMemory,
		ModuleDisk:   moduleDisk,
		Logger:       log,
		ResourceID:   cfg.ResourceID,
		OwnLog:       own,

		DisableMetrics: cfg.DisableMetrics,
	})
	if cfg.MetricsListenAddr != "" {
		reg := metricsrv.NewRegistry()
		reg.MustRegister(metrics.NewCollector(cfg.ResourceID, t.ex))
		if t.metrics, err = metricsrv.Listen(cfg.MetricsListenAddr, reg, log); err != nil {
			return nil, fmt.Errorf("task manager: %w", err)
		}
		log.Info("serving metrics", "addr", t.metrics.Addr())
	}
	if t.srv, err = rpcserver.Start(ctx, rpcserver.Config{Addr: cfg.ListenAddr, Logger: log, TLS: serverTLS}, rpc.RegisterTaskExecutor(t.ex, cfg.Secret)); err != nil {
		return nil, fmt.Errorf("task manager: %w", err)
	}
	var rm executor.ResourceManager
	if cfg.JMResolver != nil {
		rm = rpc.NewFollowingResourceManager(cfg.JMResolver, cfg.RPC)
	} else if rm, err = rpc.NewResourceManager(cfg.JMAddress, cfg.RPC); err != nil {
		return nil, fmt.Errorf("task manager: %w", err)
	}

	reg := control.Registration{
		ResourceID:  cfg.ResourceID,
		RPCAddress:  withHost(t.srv.Addr(), adv),
		DataAddress: t.xchg.Addr(),
		Slots:       cfg.Slots,
		CPUCores:    cfg.CPUCores,
		MemoryBytes: cfg.MemoryBytes,
	}
	loopCtx, stop := context.WithCancel(context.Background())
	t.stop = stop
	go func() {
		defer close(t.loopDone)
		t.ex.RunRegistration(loopCtx, rm, reg)
	}()
	log.Info("task manager started", "rpc", reg.RPCAddress, "data", reg.DataAddress, "slots", cfg.Slots, "jm", cfg.JMAddress)
	return t, nil
}

// Addr is the bound Kitex address (host:port).
func (t *TaskManager) Addr() string { return t.srv.Addr() }

// DataAddr is the bound data-exchange address (host:port).
func (t *TaskManager) DataAddr() string { return t.xchg.Addr() }

// MetricsAddr is the bound address of the Prometheus endpoint (host:port),
// or "" when the TaskManager serves none.
func (t *TaskManager) MetricsAddr() string {
	if t.metrics == nil {
		return ""
	}
	return t.metrics.Addr()
}

// ResourceID is the id this TaskManager registers under.
func (t *TaskManager) ResourceID() string { return t.cfg.ResourceID }

// Registered reports whether the TaskManager is registered with the
// ResourceManager now.
func (t *TaskManager) Registered() bool {
	_, ok := t.ex.Registered()
	return ok
}

// Slots returns the current slot report.
func (t *TaskManager) Slots() []control.SlotStatus { return t.ex.SlotReport() }

// RunningTasks returns the execution ids of the tasks not yet ended.
func (t *TaskManager) RunningTasks() []string { return t.ex.RunningTasks() }

// ModuleCacheStats reports the module cache's figures per layer: compiled
// modules in memory, module files on disk, and the runtime's compile cache.
func (t *TaskManager) ModuleCacheStats() executor.CacheStats { return t.ex.Modules().Stats() }

// Close stops the TaskManager: it stops heartbeating, cancels its tasks
// (reporting them CANCELED while the JobManager still listens), and closes
// its ports. It is safe to call more than once.
func (t *TaskManager) Close() error {
	t.closeOnce.Do(func() {
		t.closeErr = t.closeParts()
	})
	return t.closeErr
}

func (t *TaskManager) closeParts() error {
	var errs []error
	if t.stop != nil {
		t.stop()
		<-t.loopDone
	}
	if t.ex != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, t.ex.Close(ctx))
		cancel()
	}
	if t.srv != nil {
		errs = append(errs, t.srv.Close())
	}
	if t.metrics != nil {
		errs = append(errs, t.metrics.Close())
	}
	if t.xchg != nil {
		errs = append(errs, t.xchg.Close())
	}
	if t.ownRT && t.rt != nil {
		errs = append(errs, t.rt.Close(context.Background()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close task manager: %w", err)
	}
	t.log.Info("task manager stopped")
	return nil
}

func newResourceID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	if host == "" {
		host = "tm"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// advertiseHost picks the host others dial to reach this TaskManager.
func advertiseHost(explicit, listenHost, jmAddr string) string {
	if explicit != "" {
		return explicit
	}
	if ip := net.ParseIP(listenHost); listenHost != "" && (ip == nil || !ip.IsUnspecified()) {
		return listenHost
	}
	// A wildcard listener: the local address of the route to the JobManager
	// is the one the JobManager can reach (no packet is sent).
	if c, err := net.Dial("udp", jmAddr); err == nil {
		defer c.Close()
		if ua, ok := c.LocalAddr().(*net.UDPAddr); ok {
			return ua.IP.String()
		}
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "127.0.0.1"
}

// dataConfig is the exchange's listen and advertised address. The exchange
// serves a target equal to its advertised address in memory, so that
// address must be exactly what the JobManager hands out: the advertised host
// with the bound port. A wildcard listener with port 0 gets its port picked
// here, as the advertised address is fixed before the listener binds.
func dataConfig(dataAddr, adv string) (exchange.Config, error) {
	host, port, err := net.SplitHostPort(dataAddr)
	if err != nil {
		return exchange.Config{}, fmt.Errorf("data address %q: %w", dataAddr, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return exchange.Config{ListenAddr: dataAddr}, nil
	}
	if port == "0" {
		ln, err := net.Listen("tcp", dataAddr)
		if err != nil {
			return exchange.Config{}, err
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		ln.Close()
	}
	return exchange.Config{ListenAddr: net.JoinHostPort(host, port), AdvertiseAddr: net.JoinHostPort(adv, port)}, nil
}

// withHost replaces addr's host with host, keeping its port.
func withHost(addr, host string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, port)
}

// totalMemory is the machine's memory in bytes, or 0 when unknown.
func totalMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil {
		return 0
	}
	return kb * 1024
}
