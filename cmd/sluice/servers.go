package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/tm"
)

func newJMCmd() *cobra.Command {
	var listen, restListen, blobURL, advertise, tenantsFile, secretFile, metricsListen string
	var hbInterval, hbTimeout, slotTimeout, restartDelay time.Duration
	var restartAttempts int
	var hao haOptions
	var drv driverOpts
	cmd := &cobra.Command{
		Use:   "jm",
		Short: "Run a JobManager (Dispatcher, ResourceManager, JobMasters) until SIGINT/SIGTERM",
		Long: `Run a JobManager. It prints the address it bound on stdout
("jobmanager listening on HOST:PORT"), so --listen 127.0.0.1:0 works. With
--rest-listen it serves the REST API there too (docs/REST.md) and prints
"rest api listening on HOST:PORT".

SIGHUP reloads the --tenants file (docs/OPERATIONS.md): new tenants and
revoked tokens take effect at once, quota and policy changes apply to new
submissions, a removed tenant's running jobs are canceled, and a file that
does not parse changes nothing (the log says what is wrong and where).
With --tls-ca, --tls-cert and --tls-key (docs/SECURITY.md, "TLS") it
serves TLS only and re-reads those files when they change and on SIGHUP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logger(cmd, slog.LevelInfo)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			store, err := openBlob(ctx, blobURL)
			if err != nil {
				return err
			}
			defer store.Close()
			var tenants *auth.Tenants
			if tenantsFile != "" {
				if tenants, err = auth.LoadTenants(tenantsFile); err != nil {
					return usageErr(err)
				}
			}
			secret, err := auth.LoadSecret(secretFile, envSecret)
			if err != nil {
				return usageErr(err)
			}
			tlsSrc, err := serverTLS(ctx, cmd, log)
			if err != nil {
				return err
			}
			driver, active, err := drv.build(blobURL, secretFile)
			if err != nil {
				return err
			}
			cfg := jm.Config{
				TLS:                tlsSrc,
				Driver:             driver,
				Active:             active,
				Tenants:            tenants,
				Secret:             secret,
				ListenAddr:         listen,
				RESTListenAddr:     restListen,
				AdvertiseAddr:      advertise,
				Blob:               store,
				HeartbeatInterval:  hbInterval,
				HeartbeatTimeout:   hbTimeout,
				SlotRequestTimeout: slotTimeout,
				Restart:            jobmaster.RestartStrategy{Attempts: restartAttempts, Delay: restartDelay},
				Logger:             log,
				MetricsListenAddr:  metricsListen,
			}
			if hao.url != "" {
				return runHAJobManager(ctx, cmd, cfg, hao, tenantsFile)
			}
			srv, err := jm.New(ctx, cfg)
			if err != nil {
				return err
			}
			// Before the address is printed: whoever reads it may send
			// SIGHUP at once, and unhandled it ends the process.
			waitReload := reloadTenantsOnHangup(ctx, log, tenantsFile, srv.ReloadTenants)
			fmt.Fprintf(cmd.OutOrStdout(), "jobmanager listening on %s\n", srv.Addr())
			if a := srv.RESTAddr(); a != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "rest api listening on %s\n", a)
				if tenants == nil && !isLoopback(a) {
					fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: no --tenants file: the REST API on %s is open; anyone who reaches it can run code as tenant %q\n", a, "default")
				}
			}
			if a := srv.MetricsAddr(); a != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "jobmanager metrics on http://%s/metrics\n", a)
			}
			if !isLoopback(srv.Addr()) {
				if tenants == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: no --tenants file: this JobManager on %s is open; anyone who reaches it can run code as tenant %q\n", srv.Addr(), "default")
				}
				if secret == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: no cluster secret (--secret-file or %s): any process that reaches %s can join as a TaskManager\n", envSecret, srv.Addr())
				}
				if tlsSrc == nil {
					warnPlaintext(cmd.ErrOrStderr(), "this JobManager", srv.Addr())
				}
			}
			<-ctx.Done()
			waitReload()
			log.Info("shutting down")
			return srv.Close()
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:6123", "Kitex address to listen on (port 0 picks one)")
	cmd.Flags().StringVar(&restListen, "rest-listen", "", "REST API address (docs/REST.md; port 0 picks one; default: no REST API)")
	cmd.Flags().StringVar(&advertise, "advertise", "", "address TaskManagers reach this JobManager at (default: the bound address)")
	cmd.Flags().StringVar(&blobURL, "blob", os.Getenv(envBlob), "blob store URL: file:///abs/dir or s3://bucket/prefix?endpoint=host:port (default $"+envBlob+", else a directory under the user cache dir)")
	cmd.Flags().DurationVar(&hbInterval, "heartbeat-interval", 0, "how often TaskManagers heartbeat (default 2s)")
	cmd.Flags().DurationVar(&hbTimeout, "heartbeat-timeout", 0, "silence after which a TaskManager is declared dead (default 10s)")
	cmd.Flags().DurationVar(&slotTimeout, "slot-timeout", 0, "how long a job waits for free slots before it fails (default 30s)")
	cmd.Flags().IntVar(&restartAttempts, "restart-attempts", 0, "restarts of a failed job, for jobs that set no restart-strategy in their config")
	cmd.Flags().DurationVar(&restartDelay, "restart-delay", time.Second, "delay before each restart")
	metricsFlag(cmd, &metricsListen)
	cmd.Flags().StringVar(&tenantsFile, "tenants", "", "tenants file (JSON, see docs/SECURITY.md), reloaded on SIGHUP; without it every client is tenant \"default\" and needs no token")
	secretFlag(cmd, &secretFile)
	haFlags(cmd, &hao, true)
	drv.flags(cmd)
	return cmd
}

func newTMCmd() *cobra.Command {
	var jmAddr, listen, dataListen, blobURL, advertise, cacheDir, secretFile, metricsListen, resourceID string
	cacheMemory, cacheDisk := byteSize(tm.DefaultModuleCacheMemory), byteSize(tm.DefaultModuleCacheDisk)
	var slots int
	var memoryBytes int64
	var noTaskMetrics bool
	var hao haOptions
	cmd := &cobra.Command{
		Use:   "tm",
		Short: "Run a TaskManager that offers slots to a JobManager, until SIGINT/SIGTERM",
		Long: `Run a TaskManager. It prints the addresses it bound on stdout
("taskmanager listening on HOST:PORT" and "taskmanager data port on HOST:PORT"),
then registers with the JobManager (retrying until it answers). With
--tls-ca, --tls-cert and --tls-key (docs/SECURITY.md, "TLS") both ports
serve TLS only, to members of the CA, and the files are re-read when they
change and on SIGHUP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logger(cmd, slog.LevelInfo)
			if err != nil {
				return err
			}
			if jmAddr == "" && hao.url == "" {
				return usageErr(errors.New("no JobManager address: pass --jm HOST:PORT (or --ha etcd://HOST:PORT) or set " + envJM))
			}
			if slots < 1 {
				return usageErr(fmt.Errorf("--slots %d: need at least 1", slots))
			}
			if memoryBytes < 0 {
				return usageErr(fmt.Errorf("--memory-bytes %d: must not be negative", memoryBytes))
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			store, err := openBlob(ctx, blobURL)
			if err != nil {
				return err
			}
			defer store.Close()
			if cacheDir == "" {
				cacheDir = defaultDir("cache")
			}
			secret, err := auth.LoadSecret(secretFile, envSecret)
			if err != nil {
				return usageErr(err)
			}
			tlsSrc, err := serverTLS(ctx, cmd, log)
			if err != nil {
				return err
			}
			resolver, route, closeHA, err := tmLeader(ctx, log, hao, jmAddr)
			if err != nil {
				return err
			}
			defer closeHA()
			t, err := tm.New(ctx, tm.Config{
				TLS:           tlsSrc,
				JMResolver:    resolver,
				Secret:        secret,
				JMAddress:     route,
				ListenAddr:    listen,
				DataAddr:      dataListen,
				AdvertiseHost: advertise,
				Slots:         slots,
				Blob:          store,
				CacheDir:      cacheDir,
				ResourceID:    resourceID,
				MemoryBytes:   memoryBytes,
				Logger:        log,

				ModuleCacheMemory: int64(cacheMemory),
				ModuleCacheDisk:   int64(cacheDisk),

				MetricsListenAddr: metricsListen,
				DisableMetrics:    noTaskMetrics,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "taskmanager listening on %s\n", t.Addr())
			fmt.Fprintf(cmd.OutOrStdout(), "taskmanager data port on %s\n", t.DataAddr())
			if tlsSrc == nil {
				warnPlaintext(cmd.ErrOrStderr(), "this TaskManager", t.Addr())
				warnPlaintext(cmd.ErrOrStderr(), "this TaskManager's data port", t.DataAddr())
			}
			if a := t.MetricsAddr(); a != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "taskmanager metrics on http://%s/metrics\n", a)
			}
			<-ctx.Done()
			log.Info("shutting down")
			return t.Close()
		},
	}
	jmFlag(cmd, &jmAddr)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "Kitex address to listen on (port 0 picks one)")
	cmd.Flags().StringVar(&dataListen, "data-listen", "", "data-exchange address to listen on (default: port 0 on the --listen host)")
	cmd.Flags().StringVar(&advertise, "advertise-host", "", "host others use to reach this TaskManager (default: the --listen host, or the route to the JobManager for a wildcard)")
	cmd.Flags().IntVar(&slots, "slots", 2, "number of task slots")
	cmd.Flags().StringVar(&resourceID, "resource-id", "", "the id this TaskManager registers under (default: the host name and a random suffix; the process and kubernetes drivers set it)")
	cmd.Flags().Int64Var(&memoryBytes, "memory-bytes", 0, "memory this TaskManager reports (default: the machine's)")
	cmd.Flags().StringVar(&blobURL, "blob", os.Getenv(envBlob), "blob store URL, the same as the JobManager's (default $"+envBlob+", else a directory under the user cache dir)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "where modules are cached (default: under the user cache dir)")
	cmd.Flags().Var(&cacheMemory, "module-cache-memory", "memory budget of compiled modules no task runs, least recently used evicted first (e.g. 512MiB)")
	cmd.Flags().Var(&cacheDisk, "module-cache-disk", "disk budget of --cache-dir: module files and compiled code, least recently used evicted first (e.g. 2GiB)")
	metricsFlag(cmd, &metricsListen)
	noTaskMetricsFlag(cmd, &noTaskMetrics)
	secretFlag(cmd, &secretFile)
	haFlags(cmd, &hao, false)
	return cmd
}

func newLocalCmd() *cobra.Command {
	var tms, slots int
	var dir, blobURL, restListen, metricsHost string
	var noTaskMetrics bool
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a JobManager and TaskManagers in this process until Ctrl-C",
		Long: `Run an embedded cluster: a JobManager and TaskManagers in one process, talking
Kitex over loopback, with a file blob store (by default the same directory
sluice jm, tm and run use). It prints the JobManager's address; point other
commands at it with --jm or SLUICE_JM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logger(cmd, slog.LevelInfo)
			if err != nil {
				return err
			}
			if tms < 1 || slots < 1 {
				return usageErr(fmt.Errorf("--task-managers %d --slots %d: need at least 1 of each", tms, slots))
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if blobURL == "" {
				d := defaultDir("blob")
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
				blobURL = "file://" + filepath.ToSlash(d)
			}
			cacheDir := defaultDir("cache")
			if dir == "" {
				dir = defaultDir("local")
			} else {
				cacheDir = filepath.Join(dir, "cache")
			}
			tlsSrc, err := serverTLS(ctx, cmd, log)
			if err != nil {
				return err
			}
			c, err := local.Start(ctx, local.Config{TLS: tlsSrc, TaskManagers: tms, Slots: slots, Dir: dir, BlobURL: blobURL, CacheDir: cacheDir, Logger: log,
				RESTListenAddr: restListen, MetricsHost: metricsHost, DisableMetrics: noTaskMetrics})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "jobmanager listening on %s\n", c.Addr())
			if a := c.RESTAddr(); a != "" {
				fmt.Fprintf(out, "rest api listening on %s\n", a)
			}
			if a := c.JobManager().MetricsAddr(); a != "" {
				fmt.Fprintf(out, "jobmanager metrics on http://%s/metrics\n", a)
			}
			for _, t := range c.TaskManagers() {
				fmt.Fprintf(out, "taskmanager listening on %s (data %s, %d slots)\n", t.Addr(), t.DataAddr(), slots)
				if a := t.MetricsAddr(); a != "" {
					fmt.Fprintf(out, "taskmanager metrics on http://%s/metrics\n", a)
				}
			}
			fmt.Fprintf(out, "blob store %s\n", blobURL)
			fmt.Fprintf(cmd.ErrOrStderr(), "\nsubmit jobs with:  %s=%s sluice run DIR_OR_MODULE\n", envJM, c.Addr())
			<-ctx.Done()
			log.Info("shutting down")
			return c.Close()
		},
	}
	cmd.Flags().IntVar(&tms, "task-managers", 1, "number of TaskManagers")
	cmd.Flags().IntVar(&slots, "slots", local.DefaultSlots, "slots per TaskManager")
	cmd.Flags().StringVar(&blobURL, "blob", os.Getenv(envBlob), "blob store URL (default $"+envBlob+", else the directory sluice jm, tm and run use by default)")
	cmd.Flags().StringVar(&dir, "dir", "", "directory for caches (default: under the user cache dir)")
	cmd.Flags().StringVar(&restListen, "rest-listen", "", "REST API address (docs/REST.md; port 0 picks one; default: no REST API)")
	cmd.Flags().StringVar(&metricsHost, "metrics-host", "", "serve Prometheus metrics from the JobManager and every TaskManager, each on a free port of this host (e.g. 127.0.0.1; default: none)")
	noTaskMetricsFlag(cmd, &noTaskMetrics)
	return cmd
}

// metricsFlag adds --metrics-listen.
func metricsFlag(cmd *cobra.Command, addr *string) {
	cmd.Flags().StringVar(addr, "metrics-listen", "", "address to serve Prometheus metrics on, at /metrics (port 0 picks one; default: none)")
}

// noTaskMetricsFlag adds --no-task-metrics.
func noTaskMetricsFlag(cmd *cobra.Command, off *bool) {
	cmd.Flags().BoolVar(off, "no-task-metrics", false, "do not measure tasks (records, bytes, busy/idle/back-pressured time): the REST API, dashboard and /metrics show none")
}

// secretFlag adds --secret-file.
func secretFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "secret-file", "", "file holding the cluster secret, the same on the JobManager and every TaskManager (default $"+envSecret+"; neither: an open cluster)")
}

// isLoopback reports whether addr (host:port) is bound to a loopback
// address only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultDir is a directory under the user cache dir (~/.cache/sluice/NAME),
// or under the temp dir when there is no cache dir.
func defaultDir(name string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "sluice", name)
}

// openBlob opens url, or a file store under the user cache dir when empty.
func openBlob(ctx context.Context, url string) (blob.Store, error) {
	if url == "" {
		dir := defaultDir("blob")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		url = "file://" + filepath.ToSlash(dir)
	}
	s, err := blob.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("--blob: %w", err)
	}
	return s, nil
}
