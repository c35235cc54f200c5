package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/leader"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/jm/ha"
)

// haOptions are the flags of a JobManager or TaskManager in an HA cluster.
type haOptions struct {
	url     string
	cluster string
	ttl     time.Duration
}

// haFlags adds --ha (and, for a JobManager, --ha-cluster and
// --ha-lease-ttl).
func haFlags(cmd *cobra.Command, o *haOptions, jobManager bool) {
	cmd.Flags().StringVar(&o.url, "ha", "", "high availability on etcd: etcd://HOST:PORT[,HOST:PORT...][/CLUSTER] (docs/OPERATIONS.md)")
	cmd.Flags().StringVar(&o.cluster, "ha-cluster", "", "cluster id that namespaces this cluster's keys in etcd, so clusters share one (default: the --ha URL's path, else \""+leader.DefaultCluster+"\")")
	if jobManager {
		cmd.Flags().DurationVar(&o.ttl, "ha-lease-ttl", ha.DefaultLeaseTTL, "lease of the leader's etcd session: a leader silent this long is replaced (whole seconds)")
	}
}

// target reads the flags' etcd target.
func (o haOptions) target() (leader.Target, error) {
	t, err := leader.ParseURL(o.url)
	if err != nil {
		return leader.Target{}, usageErr(err)
	}
	if o.cluster != "" {
		if err := leader.ValidCluster(o.cluster); err != nil {
			return leader.Target{}, usageErr(fmt.Errorf("--ha-cluster: %w", err))
		}
		t.Cluster = o.cluster
	}
	if o.ttl != 0 && o.ttl < time.Second {
		return leader.Target{}, usageErr(fmt.Errorf("--ha-lease-ttl %v: at least 1s (etcd leases count whole seconds)", o.ttl))
	}
	return t, nil
}

// resolveJM turns a client's --jm into the leader's address: an etcd://
// URL is looked up in etcd (waiting out an election, up to 30s), and a
// comma-separated list of JobManagers is tried in order (standbys do not
// listen: the first that accepts a connection leads). A plain address is
// returned as it is.
func resolveJM(ctx context.Context, addr string) (string, error) {
	switch {
	case leader.IsURL(addr):
		t, err := leader.ParseURL(addr)
		if err != nil {
			return "", usageErr(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cli, err := leader.Connect(ctx, t, nil)
		if err != nil {
			return "", err
		}
		defer cli.Close()
		for {
			in, err := leader.Current(ctx, cli, t)
			if err == nil {
				return in.Address, nil
			}
			if !errors.Is(err, leader.ErrNoLeader) {
				return "", err
			}
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("no leader JobManager of cluster %q in etcd at %s after 30s: start `sluice jm --ha %s`", t.Cluster, strings.Join(t.Endpoints, ","), addr)
			case <-time.After(100 * time.Millisecond):
			}
		}
	case strings.Contains(addr, ","):
		var errs []error
		for _, a := range strings.Split(addr, ",") {
			c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", a)
			if err == nil {
				c.Close()
				return a, nil
			}
			errs = append(errs, err)
		}
		return "", fmt.Errorf("none of the JobManagers %s accepts connections: %w", addr, errors.Join(errs...))
	}
	return addr, nil
}

// runHAJobManager runs `sluice jm --ha`: it connects to etcd (retrying
// with backoff while etcd is unreachable), then stands by and leads in
// turn (jm.RunHA), printing "jobmanager listening on" each time it starts
// to lead.
func runHAJobManager(ctx context.Context, cmd *cobra.Command, cfg jm.Config, o haOptions, tenantsFile string) error {
	t, err := o.target()
	if err != nil {
		return err
	}
	log := cfg.Logger
	cli, err := leader.Connect(ctx, t, log)
	if err != nil {
		return err
	}
	defer cli.Close()
	// Before the first line is printed: whoever reads it may send SIGHUP
	// at once, and unhandled it ends the process.
	hr := &haReload{tenants: cfg.Tenants}
	waitReload := reloadTenantsOnHangup(ctx, log, tenantsFile, hr.reload)
	defer waitReload()
	fmt.Fprintf(cmd.OutOrStdout(), "jobmanager standing by (cluster %s, etcd %s)\n", t.Cluster, strings.Join(t.Endpoints, ","))
	err = jm.RunHA(ctx, cfg, ha.NewEtcd(cli, t, o.ttl), func(srv *jm.Server) {
		hr.lead(srv)
		fmt.Fprintf(cmd.OutOrStdout(), "jobmanager listening on %s\n", srv.Addr())
		if a := srv.RESTAddr(); a != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "rest api listening on %s\n", a)
		}
	})
	log.Info("shutting down")
	return err
}

// tmLeader is how a TaskManager finds its JobManager: with --ha (or an
// etcd:// or comma-separated --jm) a resolver that follows the leader,
// and the address to route to for the advertised host; else none, and
// --jm as it is.
func tmLeader(ctx context.Context, log *slog.Logger, o haOptions, jmAddr string) (func(context.Context) (string, error), string, func(), error) {
	if o.url == "" && leader.IsURL(jmAddr) {
		o.url = jmAddr
	}
	if o.url != "" {
		t, err := o.target()
		if err != nil {
			return nil, "", nil, err
		}
		cli, err := leader.Connect(ctx, t, log)
		if err != nil {
			return nil, "", nil, err
		}
		r := leader.NewResolver(cli, t)
		return r.Address, t.Endpoints[0], func() { cli.Close() }, nil
	}
	if strings.Contains(jmAddr, ",") {
		list := jmAddr
		return func(ctx context.Context) (string, error) { return resolveJM(ctx, list) }, strings.Split(list, ",")[0], func() {}, nil
	}
	return nil, jmAddr, func() {}, nil
}
