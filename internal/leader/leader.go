package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultCluster is the cluster id of a URL without a path.
const DefaultCluster = "default"

// ErrNoLeader is returned while no JobManager of the cluster is elected.
var ErrNoLeader = errors.New("no leader JobManager elected")

// Target is where a cluster's coordination lives: etcd's endpoints and the
// cluster id that namespaces its keys (several clusters share one etcd).
type Target struct {
	Endpoints []string // host:port each
	Cluster   string
}

// IsURL reports whether s is an etcd:// URL rather than a JobManager
// address.
func IsURL(s string) bool { return strings.HasPrefix(s, "etcd://") }

// ParseURL reads "etcd://host:port[,host:port...][/cluster]".
//
// # Errors
//
// A URL of another scheme, without endpoints, with an endpoint that is not
// host:port, or with a cluster id that is not one path segment of
// letters, digits, '-', '_' and '.'.
func ParseURL(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("HA URL %q: %s: want etcd://HOST:PORT[,HOST:PORT...][/CLUSTER]", s, why)
	}
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return bad("not an etcd:// URL")
	}
	hosts, cluster, _ := strings.Cut(rest, "/")
	t := Target{Cluster: cluster}
	if t.Cluster == "" {
		t.Cluster = DefaultCluster
	}
	if err := ValidCluster(t.Cluster); err != nil {
		return bad(err.Error())
	}
	for _, h := range strings.Split(hosts, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil || h == "" {
			return bad(fmt.Sprintf("endpoint %q is not host:port", h))
		}
		t.Endpoints = append(t.Endpoints, h)
	}
	if _, err := url.Parse("http://" + t.Endpoints[0]); err != nil {
		return bad(err.Error())
	}
	return t, nil
}

// ValidCluster checks a cluster id: it becomes one segment of etcd keys.
func ValidCluster(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("cluster id %q: 1 to 128 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("cluster id %q: only letters, digits, '-', '_' and '.'", id)
		}
	}
	return nil
}

// Prefix is the root of the cluster's keys.
func (t Target) Prefix() string { return "/sluice/" + t.Cluster + "/" }

// ElectionPrefix is the prefix of the leader election's keys.
func (t Target) ElectionPrefix() string { return t.Prefix() + "leader" }

// JobsPrefix is the prefix of the job store's records.
func (t Target) JobsPrefix() string { return t.Prefix() + "jobs/" }

// CheckpointsPrefix is the prefix of the jobs' latest-checkpoint pointers.
func (t Target) CheckpointsPrefix() string { return t.Prefix() + "checkpoints/" }

// Info is what the leader publishes as its election value.
type Info struct {
	// Address is the leader's RPC address; empty in the moment between
	// winning the election and serving.
	Address string `json:"address"`
	// Session is the leader session in its fencing tokens.
	Session string `json:"session"`
}

// Connect dials etcd and waits until it answers, retrying with backoff
// (100ms doubling to 5s) and logging each failure, until ctx ends: a
// JobManager or TaskManager started before etcd waits for it.
//
// # Errors
//
// ctx's end, with the last failure: etcd unreachable at the endpoints.
func Connect(ctx context.Context, t Target, log *slog.Logger) (*clientv3.Client, error) {
	if log == nil {
		log = slog.Default()
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   t.Endpoints,
			DialTimeout: 2 * time.Second,
			Logger:      zap.NewNop(),
			Context:     context.WithoutCancel(ctx),
		})
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = cli.Get(pctx, t.ElectionPrefix(), clientv3.WithCountOnly())
			cancel()
			if err == nil {
				return cli, nil
			}
			cli.Close()
		}
		lvl := log.Debug
		if attempt == 1 || attempt%10 == 0 {
			lvl = log.Warn
		}
		lvl("etcd unreachable; retrying", "endpoints", strings.Join(t.Endpoints, ","), "attempt", attempt, "backoff", backoff, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd at %s unreachable after %d attempts (%v): check the --ha URL and that etcd runs: %w",
				strings.Join(t.Endpoints, ","), attempt, err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Current returns the elected leader: the election key with the lowest
// create revision, as etcd's concurrency.Election orders candidates.
//
// # Errors
//
// ErrNoLeader while none is elected, or the leader has not published its
// address yet; etcd's errors.
func Current(ctx context.Context, cli *clientv3.Client, t Target) (Info, error) {
	r, err := cli.Get(ctx, t.ElectionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return Info{}, fmt.Errorf("read the leader from etcd: %w", err)
	}
	if len(r.Kvs) == 0 {
		return Info{}, ErrNoLeader
	}
	var in Info
	if err := json.Unmarshal(r.Kvs[0].Value, &in); err != nil || in.Address == "" {
		return Info{}, fmt.Errorf("%w (a candidate won but has not published its address yet)", ErrNoLeader)
	}
	return in, nil
}

// Resolver finds the leader's address in etcd, for a TaskManager or a
// client that follows the leader. Safe for concurrent use.
type Resolver struct {
	cli *clientv3.Client
	t   Target
}

// NewResolver returns a resolver reading the leader of t through cli.
func NewResolver(cli *clientv3.Client, t Target) *Resolver { return &Resolver{cli: cli, t: t} }

// Leader returns the current leader.
//
// # Errors
//
// As Current.
func (r *Resolver) Leader(ctx context.Context) (Info, error) { return Current(ctx, r.cli, r.t) }

// Address returns the current leader's address.
//
// # Errors
//
// As Current.
func (r *Resolver) Address(ctx context.Context) (string, error) {
	in, err := r.Leader(ctx)
	return in.Address, err
}
