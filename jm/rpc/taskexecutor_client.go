package rpc

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	teclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor/taskexecutor"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
	jmd "github.com/sluicehq/sluice/jm/jobmaster"
	rmd "github.com/sluicehq/sluice/jm/resourcemanager"
)

// TaskExecutors calls the TaskExecutor service of TaskManagers by address,
// keeping one Kitex client per address. It is the JobMasters'
// TaskExecutorGateway.
type TaskExecutors struct {
	cfg rpcserver.ClientConfig

	mu      sync.Mutex
	clients map[string]teclient.Client
}

var _ jmd.TaskExecutorGateway = (*TaskExecutors)(nil)

// NewTaskExecutors returns an empty client pool.
func NewTaskExecutors(cfg rpcserver.ClientConfig) *TaskExecutors {
	return &TaskExecutors{cfg: cfg, clients: map[string]teclient.Client{}}
}

func (t *TaskExecutors) client(addr string) (teclient.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[addr]; ok {
		return c, nil
	}
	c, err := teclient.NewClient("taskexecutor", rpcserver.ClientOptions(addr, t.cfg)...)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInternal, "task executor client for %s: %w", addr, err)
	}
	t.clients[addr] = c
	return c, nil
}

// DeployTask deploys one task.
func (t *TaskExecutors) DeployTask(ctx context.Context, addr string, d control.Deployment) error {
	c, err := t.client(addr)
	if err != nil {
		return err
	}
	req, err := rpcwire.DeploymentToWire(d)
	if err != nil {
		return rpcerr.Errorf(rpcerr.ErrInternal, "deploy task %s: %w", d.ExecutionID, err)
	}
	if err := c.DeployTask(ctx, req); err != nil {
		return fmt.Errorf("deploy task %s: %w", d.ExecutionID, rpcserver.FromCall(err))
	}
	return nil
}

// CancelTask cancels one task.
func (t *TaskExecutors) CancelTask(ctx context.Context, addr string, f control.FencingToken, executionID string) error {
	c, err := t.client(addr)
	if err != nil {
		return err
	}
	if err := c.CancelTask(ctx, &taskexecutor.CancelTaskRequest{Fencing: rpcwire.FencingToWire(f), ExecutionId: executionID}); err != nil {
		return fmt.Errorf("cancel task %s: %w", executionID, rpcserver.FromCall(err))
	}
	return nil
}

// FreeSlot frees an allocation on a TaskManager.
func (t *TaskExecutors) FreeSlot(ctx context.Context, addr, allocationID string) error {
	c, err := t.client(addr)
	if err != nil {
		return err
	}
	if err := c.FreeSlot(ctx, allocationID); err != nil {
		return fmt.Errorf("free slot %s: %w", allocationID, rpcserver.FromCall(err))
	}
	return nil
}

// WarmModules asks the TaskManager at addr to compile mods in the
// background; at most rpcwire.MaxWarmModules of them are sent.
func (t *TaskExecutors) WarmModules(ctx context.Context, addr string, mods []control.ModuleRef) error {
	c, err := t.client(addr)
	if err != nil {
		return err
	}
	if len(mods) > rpcwire.MaxWarmModules {
		mods = mods[:rpcwire.MaxWarmModules]
	}
	if err := c.WarmModules(ctx, rpcwire.ModuleRefsToWire(mods)); err != nil {
		return fmt.Errorf("warm modules on %s: %w", addr, rpcserver.FromCall(err))
	}
	return nil
}

// TriggerCheckpoint starts a checkpoint at a source task.
func (t *TaskExecutors) TriggerCheckpoint(ctx context.Context, addr string, f control.FencingToken, executionID string, tr checkpoint.Trigger) error {
	c, err := t.client(addr)
	if err != nil {
		return err
	}
	if err := c.TriggerCheckpoint(ctx, rpcwire.TriggerToWire(f, executionID, tr)); err != nil {
		return fmt.Errorf("trigger checkpoint %d at task %s: %w", tr.ID, executionID, rpcserver.FromCall(err))
	}
	return nil
}

// NotifyCheckpoint tells a task that a checkpoint completed or aborted.
func (t *TaskExecutors) NotifyCheckpoint(ctx context.Context, addr string, f control.FencingToken, executionID string, id int64, completed bool) error {
	c, err := t.client(addr)
	if err != nil {
		return err
	}
	req := &taskexecutor.NotifyCheckpointRequest{Fencing: rpcwire.FencingToWire(f), ExecutionId: executionID, CheckpointId: id, Completed: completed}
	if err := c.NotifyCheckpoint(ctx, req); err != nil {
		return fmt.Errorf("notify task %s of checkpoint %d: %w", executionID, id, rpcserver.FromCall(err))
	}
	return nil
}

// FreeStale frees an allocation nobody holds; it is the ResourceManager's
// Config.FreeStale.
func (t *TaskExecutors) FreeStale(ctx context.Context, s rmd.Stale) error {
	return t.FreeSlot(ctx, s.RPCAddress, s.AllocationID)
}
