package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/rpcserver/kitexlog"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/tm"
	"github.com/sluicehq/sluice/wasmhost"
)

// Config configures an embedded cluster. The zero value is one TaskManager
// with DefaultSlots slots, state in a temporary directory.
type Config struct {
	// TaskManagers is the number of TaskManagers to start; 0 means 1.
	TaskManagers int
	// Slots is the number of slots of each TaskManager; 0 means DefaultSlots.
	Slots int
	// Dir holds the blob store (Dir/blob) and caches (Dir/cache). Empty
	// means a temporary directory, removed by Close.
	Dir string
	// BlobURL overrides the blob store; empty means file://Dir/blob.
	BlobURL string
	// CacheDir holds compiled modules across runs; empty means Dir/cache.
	CacheDir string
	// ModuleCacheMemory and ModuleCacheDisk are every TaskManager's module
	// cache budgets (tm.Config); the disk budget's compiled share bounds
	// the shared runtime's compile cache. 0 means the tm defaults.
	ModuleCacheMemory int64
	ModuleCacheDisk   int64
	// Logger receives every component's logs; nil means a logger that
	// discards them.
	Logger *slog.Logger
	// RESTListenAddr, when set, is where the JobManager serves its REST API
	// (port 0 picks one; see Cluster.RESTAddr).
	RESTListenAddr string
	// JobManager, when set, adjusts the JobManager's configuration before
	// it starts (tests shorten heartbeat timeouts with it).
	JobManager func(*jm.Config)
	// Runtime, when set, adjusts the Wasm runtime's configuration (shared by
	// the JobManager's planner and every TaskManager) before it starts.
	Runtime func(wasmhost.RuntimeConfig) wasmhost.RuntimeConfig
	// MetricsHost, when set, has the JobManager and every TaskManager
	// serve Prometheus metrics on a port of their own on that host (port
	// 0: see jm.Server.MetricsAddr, tm.TaskManager.MetricsAddr).
	MetricsHost string
	// DisableMetrics turns the TaskManagers' task metrics off.
	DisableMetrics bool
	// TLS, when set, runs every connection of the cluster over TLS with
	// this CA and certificate (which must name 127.0.0.1): the JobManager,
	// each TaskManager and the data ports use it, and Client verifies the
	// JobManager with it.
	TLS *tlsconf.Source
}

// DefaultSlots is the number of slots per TaskManager when Config.Slots is 0.
const DefaultSlots = 4

// Cluster is a running embedded cluster.
type Cluster struct {
	cfg      Config
	log      *slog.Logger
	dir      string
	cacheDir string
	tempDir  bool
	store    blob.Store
	rt       *wasmhost.Runtime
	jm       *jm.Server

	mu        sync.Mutex
	tms       []*tm.TaskManager // nil entries were stopped
	kitexUndo func()            // points Kitex's logger back; nil once done
}

// Start starts a JobManager and cfg.TaskManagers TaskManagers on loopback
// ports and waits until every TaskManager has registered.
//
// # Errors
//
// A blob store that cannot be opened, a port that cannot be bound, or
// TaskManagers that do not register within a minute; nothing is left
// running then.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.TaskManagers <= 0 {
		cfg.TaskManagers = 1
	}
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{cfg: cfg, log: log, dir: cfg.Dir}
	// Kitex's logger is process-wide (see kitexlog): while this cluster
	// runs, Kitex writes to its logger, at slog levels, repeats summarized.
	c.kitexUndo = kitexlog.Install(log)
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "sluice-local-"); err != nil {
			return nil, fmt.Errorf("embedded cluster: %w", err)
		}
		c.tempDir = true
	}
	blobURL := cfg.BlobURL
	if blobURL == "" {
		blobDir := filepath.Join(c.dir, "blob")
		if err := os.MkdirAll(blobDir, 0o755); err != nil {
			return nil, fmt.Errorf("embedded cluster: %w", err)
		}
		blobURL = "file://" + filepath.ToSlash(blobDir)
	}
	if c.store, err = blob.Open(ctx, blobURL); err != nil {
		return nil, fmt.Errorf("embedded cluster: blob store: %w", err)
	}
	c.cacheDir = cfg.CacheDir
	if c.cacheDir == "" {
		c.cacheDir = filepath.Join(c.dir, "cache")
	}
	_, compiledBudget := tm.DiskBudgets(cfg.ModuleCacheDisk)
	// One wasm runtime per process, shared by the JobManager (plans) and
	// every TaskManager (tasks), so a module compiles once.
	rc := wasmhost.NewRuntimeConfig().WithCacheDir(filepath.Join(c.cacheDir, "compiled")).WithCacheDirBudget(compiledBudget)
	if cfg.Runtime != nil {
		rc = cfg.Runtime(rc)
	}
	if c.rt, err = wasmhost.NewRuntime(ctx, rc); err != nil {
		return nil, fmt.Errorf("embedded cluster: wasm runtime: %w", err)
	}
	jcfg := jm.Config{
		ListenAddr: "127.0.0.1:0",
		Blob:       c.store,
		Runtime:    c.rt,
		Logger:     log.With("component", "jobmanager"),
		TLS:        cfg.TLS,

		RESTListenAddr: cfg.RESTListenAddr,
	}
	if cfg.MetricsHost != "" {
		jcfg.MetricsListenAddr = net.JoinHostPort(cfg.MetricsHost, "0")
	}
	if cfg.JobManager != nil {
		cfg.JobManager(&jcfg)
	}
	if c.jm, err = jm.New(ctx, jcfg); err != nil {
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	for range cfg.TaskManagers {
		if _, err := c.AddTaskManager(ctx, cfg.Slots); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitRegistered(wctx); err != nil {
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	return c, nil
}

// Addr is the JobManager's Kitex address.
func (c *Cluster) Addr() string { return c.jm.Addr() }

// RESTAddr is the JobManager's REST API address; "" without
// Config.RESTListenAddr.
func (c *Cluster) RESTAddr() string { return c.jm.RESTAddr() }

// JobManager is the cluster's JobManager.
func (c *Cluster) JobManager() *jm.Server { return c.jm }

// metricsAddr is port 0 on host, or "" (no endpoint) without a host.
func metricsAddr(host string) string {
	if host == "" {
		return ""
	}
	return net.JoinHostPort(host, "0")
}

// Blob is the cluster's blob store.
func (c *Cluster) Blob() blob.Store { return c.store }

// Dir is the directory holding the cluster's blob store and caches.
func (c *Cluster) Dir() string { return c.dir }

// Runtime is the process's wasm runtime.
func (c *Cluster) Runtime() *wasmhost.Runtime { return c.rt }

// Client returns a client for the cluster's JobManager; with Config.TLS
// it verifies the JobManager with the cluster's CA.
func (c *Cluster) Client(opts ...client.Option) (*client.Client, error) {
	if c.cfg.TLS != nil {
		opts = append([]client.Option{client.WithTLS(c.cfg.TLS.ClientConfig(""))}, opts...)
	}
	return client.New(c.Addr(), opts...)
}

// AddTaskManager starts one more TaskManager with slots slots. It does not
// wait for it to register (see WaitRegistered).
func (c *Cluster) AddTaskManager(ctx context.Context, slots int) (*tm.TaskManager, error) {
	c.mu.Lock()
	n := len(c.tms)
	c.mu.Unlock()
	t, err := tm.New(ctx, tm.Config{
		JMAddress:  c.Addr(),
		ListenAddr: "127.0.0.1:0",
		DataAddr:   "127.0.0.1:0",
		Slots:      slots,
		Blob:       c.store,
		Runtime:    c.rt,
		CacheDir:   c.cacheDir,
		ResourceID: fmt.Sprintf("local-tm-%d", n),
		Logger:     c.log.With("component", "taskmanager"),
		TLS:        c.cfg.TLS,

		ModuleCacheMemory: c.cfg.ModuleCacheMemory,
		ModuleCacheDisk:   c.cfg.ModuleCacheDisk,

		DisableMetrics:    c.cfg.DisableMetrics,
		MetricsListenAddr: metricsAddr(c.cfg.MetricsHost),
	})
	if err != nil {
		return nil, fmt.Errorf("embedded cluster: task manager %d: %w", n, err)
	}
	c.mu.Lock()
	c.tms = append(c.tms, t)
	c.mu.Unlock()
	return t, nil
}

// TaskManagers returns the running TaskManagers.
func (c *Cluster) TaskManagers() []*tm.TaskManager {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*tm.TaskManager, 0, len(c.tms))
	for _, t := range c.tms {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// StopTaskManager closes the i-th TaskManager started (counting stopped ones).
func (c *Cluster) StopTaskManager(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.tms) || c.tms[i] == nil {
		c.mu.Unlock()
		return fmt.Errorf("no running task manager %d", i)
	}
	t := c.tms[i]
	c.tms[i] = nil
	c.mu.Unlock()
	return t.Close()
}

// WaitRegistered waits until the JobManager's ResourceManager counts every
// running TaskManager's slots. It asks in process, so it needs no token on
// a cluster with tenants.
func (c *Cluster) WaitRegistered(ctx context.Context) error {
	want := 0
	tms := c.TaskManagers()
	for _, t := range tms {
		want += len(t.Slots())
	}
	var last error
	for {
		ov := c.jm.ResourceManager().Overview()
		if len(ov.TaskManagers) >= len(tms) && ov.SlotsTotal >= want {
			return nil
		}
		last = fmt.Errorf("%d of %d task managers registered, %d of %d slots", len(ov.TaskManagers), len(tms), ov.SlotsTotal, want)
		select {
		case <-ctx.Done():
			return fmt.Errorf("task managers did not register: %w", errors.Join(ctx.Err(), last))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops the TaskManagers, then the JobManager, and removes a
// temporary directory. It is safe to call on a partly started cluster.
func (c *Cluster) Close() error {
	var errs []error
	c.mu.Lock()
	tms := c.tms
	c.tms = nil
	undo := c.kitexUndo
	c.kitexUndo = nil
	c.mu.Unlock()
	if undo != nil {
		defer undo() // after the servers stopped: their last lines go here
	}
	var wg sync.WaitGroup
	errCh := make(chan error, len(tms))
	for _, t := range tms {
		if t == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); errCh <- t.Close() }()
	}
	wg.Wait()
	close(errCh)
	for err := range errCh {
		errs = append(errs, err)
	}
	if c.jm != nil {
		errs = append(errs, c.jm.Close())
	}
	if c.rt != nil {
		errs = append(errs, c.rt.Close(context.Background()))
	}
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	if c.tempDir {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}
