package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	jmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster/jobmaster"
	rmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
	"github.com/sluicehq/sluice/tm/executor"
)

// ResourceManager calls the JobManager's ResourceManager service.
type ResourceManager struct {
	c rmclient.Client
}

var _ executor.ResourceManager = (*ResourceManager)(nil)

// NewResourceManager returns a client for the ResourceManager at addr. Its
// calls (registration, heartbeats) are what an idle TaskManager makes, so
// they go through rpcserver.IntervalClientOptions: the context's deadline
// bounds them as a read timeout, and cancelling it does not end them.
func NewResourceManager(addr string, cfg rpcserver.ClientConfig) (*ResourceManager, error) {
	c, err := rmclient.NewClient("resourcemanager", rpcserver.IntervalClientOptions(addr, cfg)...)
	if err != nil {
		return nil, fmt.Errorf("resource manager client for %s: %w", addr, err)
	}
	return &ResourceManager{c: c}, nil
}

// Register registers the TaskManager.
func (r *ResourceManager) Register(ctx context.Context, reg control.Registration) (control.Registered, error) {
	resp, err := r.c.RegisterTaskManager(rpcserver.Detach(ctx), rpcwire.RegistrationToWire(reg))
	if err != nil {
		return control.Registered{}, fmt.Errorf("register task manager: %w", rpcserver.FromCall(err))
	}
	return rpcwire.RegisteredFromWire(resp), nil
}

// Heartbeat sends one heartbeat.
func (r *ResourceManager) Heartbeat(ctx context.Context, h control.Heartbeat) (bool, error) {
	resp, err := r.c.Heartbeat(rpcserver.Detach(ctx), rpcwire.HeartbeatToWire(h))
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", rpcserver.FromCall(err))
	}
	return resp.GetKnown(), nil
}

// JobMasters calls JobMasters by address, keeping one Kitex client per
// address (a JobManager serves every JobMaster on its one port, so in
// practice there is one).
type JobMasters struct {
	cfg rpcserver.ClientConfig

	mu      sync.Mutex
	clients map[string]jmclient.Client
}

var _ executor.JobMasters = (*JobMasters)(nil)

// NewJobMasters returns an empty client pool.
func NewJobMasters(cfg rpcserver.ClientConfig) *JobMasters {
	return &JobMasters{cfg: cfg, clients: make(map[string]jmclient.Client)}
}

func (j *JobMasters) client(addr string) (jmclient.Client, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if c, ok := j.clients[addr]; ok {
		return c, nil
	}
	c, err := jmclient.NewClient("jobmaster", rpcserver.ClientOptions(addr, j.cfg)...)
	if err != nil {
		return nil, fmt.Errorf("job master client for %s: %w", addr, err)
	}
	j.clients[addr] = c
	return c, nil
}

// UpdateTaskState reports a task state.
func (j *JobMasters) UpdateTaskState(ctx context.Context, addr string, u control.TaskUpdate) error {
	c, err := j.client(addr)
	if err != nil {
		return err
	}
	if err := c.UpdateTaskState(ctx, rpcwire.TaskUpdateToWire(u)); err != nil {
		return fmt.Errorf("report %s of %s: %w", u.State, u.ExecutionID, rejected(rpcserver.FromCall(err)))
	}
	return nil
}

// NextSplit asks for a source subtask's next input split.
func (j *JobMasters) NextSplit(ctx context.Context, addr string, req control.SplitRequest) (checkpoint.Split, bool, error) {
	c, err := j.client(addr)
	if err != nil {
		return checkpoint.Split{}, false, err
	}
	resp, err := c.RequestNextSplit(ctx, rpcwire.SplitRequestToWire(req))
	if err != nil {
		return checkpoint.Split{}, false, rejected(rpcserver.FromCall(err))
	}
	sp, done, err := rpcwire.NextSplitFromWire(resp)
	if err != nil {
		return checkpoint.Split{}, false, rpcerr.Errorf(rpcerr.ErrInternal, "%w", err)
	}
	return sp, done, nil
}

// AcknowledgeCheckpoint acknowledges a checkpoint for a task.
func (j *JobMasters) AcknowledgeCheckpoint(ctx context.Context, addr string, f control.FencingToken, a checkpoint.Ack) error {
	c, err := j.client(addr)
	if err != nil {
		return err
	}
	if err := c.AcknowledgeCheckpoint(ctx, rpcwire.AckToWire(f, a)); err != nil {
		return fmt.Errorf("acknowledge checkpoint %d of %s: %w", a.CheckpointID, a.ExecutionID, rejected(rpcserver.FromCall(err)))
	}
	return nil
}

// DeclineCheckpoint declines a checkpoint for a task.
func (j *JobMasters) DeclineCheckpoint(ctx context.Context, addr string, f control.FencingToken, d checkpoint.Decline) error {
	c, err := j.client(addr)
	if err != nil {
		return err
	}
	if err := c.DeclineCheckpoint(ctx, rpcwire.DeclineToWire(f, d)); err != nil {
		return fmt.Errorf("decline checkpoint %d of %s: %w", d.CheckpointID, d.ExecutionID, rejected(rpcserver.FromCall(err)))
	}
	return nil
}

// rejected marks errors that retrying cannot fix with executor.ErrRejected.
func rejected(err error) error {
	switch {
	case errors.Is(err, rpcerr.ErrStaleFencingToken), errors.Is(err, rpcerr.ErrNotFound),
		errors.Is(err, rpcerr.ErrInvalidArgument), errors.Is(err, rpcerr.ErrFailedPrecondition):
		return fmt.Errorf("%w: %w", executor.ErrRejected, err)
	}
	return err
}

// FollowingResourceManager calls the ResourceManager of whichever
// JobManager leads (an HA cluster): every registration asks resolve for
// the leader's address, and a heartbeat that finds the leader changed
// answers known=false, so the TaskManager registers with the new one at
// once rather than after the heartbeat timeout.
type FollowingResourceManager struct {
	resolve func(context.Context) (string, error)
	cfg     rpcserver.ClientConfig

	mu   sync.Mutex
	addr string
	rm   *ResourceManager
}

var _ executor.ResourceManager = (*FollowingResourceManager)(nil)

// NewFollowingResourceManager returns a client that follows the leader
// resolve finds.
func NewFollowingResourceManager(resolve func(context.Context) (string, error), cfg rpcserver.ClientConfig) *FollowingResourceManager {
	return &FollowingResourceManager{resolve: resolve, cfg: cfg}
}

// Register registers with the current leader.
//
// # Errors
//
// No leader found (an election under way, etcd unreachable), or the
// registration's.
func (f *FollowingResourceManager) Register(ctx context.Context, reg control.Registration) (control.Registered, error) {
	addr, err := f.resolve(ctx)
	if err != nil {
		return control.Registered{}, fmt.Errorf("find the leader JobManager: %w", err)
	}
	f.mu.Lock()
	if addr != f.addr || f.rm == nil {
		rm, err := NewResourceManager(addr, f.cfg)
		if err != nil {
			f.mu.Unlock()
			return control.Registered{}, err
		}
		f.addr, f.rm = addr, rm
	}
	rm := f.rm
	f.mu.Unlock()
	return rm.Register(ctx, reg)
}

// Heartbeat heartbeats the leader registered with, or answers
// known=false when another JobManager leads now.
//
// # Errors
//
// The heartbeat's.
func (f *FollowingResourceManager) Heartbeat(ctx context.Context, h control.Heartbeat) (bool, error) {
	f.mu.Lock()
	addr, rm := f.addr, f.rm
	f.mu.Unlock()
	if rm == nil {
		return false, nil
	}
	if now, err := f.resolve(ctx); err == nil && now != addr {
		return false, nil
	}
	return rm.Heartbeat(ctx, h)
}
