package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/leader"
)

// DefaultLeaseTTL is the lease of a JobManager's etcd session: a leader
// that stops answering for this long is replaced.
const DefaultLeaseTTL = 5 * time.Second

// Etcd is an Elector on etcd's concurrency.Election.
type Etcd struct {
	cli *clientv3.Client
	t   leader.Target
	ttl time.Duration
}

var _ Elector = (*Etcd)(nil)

// NewEtcd returns an elector for cluster t through cli, whose leaderships
// hold a lease of ttl (DefaultLeaseTTL when 0; etcd counts whole seconds,
// at least 1).
func NewEtcd(cli *clientv3.Client, t leader.Target, ttl time.Duration) *Etcd {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &Etcd{cli: cli, t: t, ttl: ttl}
}

// Jobs reads the job store.
//
// # Errors
//
// etcd's; a record that does not decode.
func (e *Etcd) Jobs(ctx context.Context) ([]Job, error) {
	return (&etcdLeadership{cli: e.cli, t: e.t}).Jobs(ctx)
}

// Close closes nothing of its own: the client is the caller's.
func (e *Etcd) Close() error { return nil }

// Campaign creates a session (a lease kept alive in the background) and
// campaigns with it; each leadership has its own session, so a lost one
// never comes back.
//
// # Errors
//
// etcd's, and ctx's end.
func (e *Etcd) Campaign(ctx context.Context) (Leadership, error) {
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(max(1, int(e.ttl/time.Second))))
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	el := concurrency.NewElection(s, e.t.ElectionPrefix())
	if err := el.Campaign(ctx, "{}"); err != nil {
		s.Close()
		return nil, fmt.Errorf("campaign: %w", err)
	}
	l := &etcdLeadership{cli: e.cli, t: e.t, s: s, el: el, key: el.Key(), rev: el.Rev(), lost: make(chan struct{})}
	go func() {
		select {
		case <-s.Done():
			l.markLost()
		case <-l.lost:
		}
	}()
	return l, nil
}

type etcdLeadership struct {
	cli  *clientv3.Client
	t    leader.Target
	s    *concurrency.Session
	el   *concurrency.Election
	key  string
	rev  int64
	once sync.Once
	lost chan struct{}
}

func (l *etcdLeadership) Session() string       { return control.HASession(l.rev) }
func (l *etcdLeadership) Lost() <-chan struct{} { return l.lost }
func (l *etcdLeadership) markLost()             { l.once.Do(func() { close(l.lost) }) }

func (l *etcdLeadership) Proclaim(ctx context.Context, address string) error {
	v, _ := json.Marshal(leader.Info{Address: address, Session: l.Session()})
	return l.guarded(ctx, "publish the leader's address", clientv3.OpPut(l.key, string(v), clientv3.WithLease(l.s.Lease())))
}

func (l *etcdLeadership) Resign(ctx context.Context) error {
	defer l.markLost()
	defer l.s.Close()
	return l.el.Resign(ctx)
}

// guarded runs ops in a transaction that holds only while this
// leadership's election key is the one it created.
func (l *etcdLeadership) guarded(ctx context.Context, what string, ops ...clientv3.Op) error {
	select {
	case <-l.lost:
		return fmt.Errorf("%s: %w: this JobManager's leadership ended", what, ErrNotLeader)
	default:
	}
	r, err := l.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("%s: etcd: %w", what, err)
	}
	if !r.Succeeded {
		l.markLost()
		return fmt.Errorf("%s: %w: another JobManager was elected", what, ErrNotLeader)
	}
	return nil
}

func (l *etcdLeadership) PutJob(ctx context.Context, j Job) error {
	v, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store job %s: %w", j.ID, err)
	}
	return l.guarded(ctx, "store job "+j.ID, clientv3.OpPut(l.t.JobsPrefix()+j.ID, string(v)))
}

// pointer is the value of a job's checkpoint key.
type pointer struct {
	Ref     string `json:"ref"`
	Attempt int64  `json:"attempt"`
}

func (l *etcdLeadership) PutCheckpoint(ctx context.Context, jobID, ref string, attempt int64) error {
	v, _ := json.Marshal(pointer{Ref: ref, Attempt: attempt})
	return l.guarded(ctx, "store the checkpoint pointer of job "+jobID, clientv3.OpPut(l.t.CheckpointsPrefix()+jobID, string(v)))
}

func (l *etcdLeadership) DeleteJob(ctx context.Context, jobID string) error {
	return l.guarded(ctx, "delete job "+jobID, clientv3.OpDelete(l.t.JobsPrefix()+jobID), clientv3.OpDelete(l.t.CheckpointsPrefix()+jobID))
}

func (l *etcdLeadership) Check(ctx context.Context) error {
	return l.guarded(ctx, "check the leadership")
}

func (l *etcdLeadership) Jobs(ctx context.Context) ([]Job, error) {
	r, err := l.cli.Txn(ctx).Then(
		clientv3.OpGet(l.t.JobsPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(l.t.CheckpointsPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("read the job store: %w", err)
	}
	cps := map[string]pointer{}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		var p pointer
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			return nil, fmt.Errorf("job store checkpoint pointer %s: %w", kv.Key, err)
		}
		cps[strings.TrimPrefix(string(kv.Key), l.t.CheckpointsPrefix())] = p
	}
	var out []Job
	for _, kv := range r.Responses[0].GetResponseRange().Kvs {
		var j Job
		if err := json.Unmarshal(kv.Value, &j); err != nil {
			return nil, fmt.Errorf("job store record %s: %w", kv.Key, err)
		}
		j.Checkpoint, j.Attempt = cps[j.ID].Ref, cps[j.ID].Attempt
		out = append(out, j)
	}
	return out, nil
}
