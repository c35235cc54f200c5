package rpc

import (
	"context"
	"fmt"

	"github.com/cloudwego/kitex/server"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	tesvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor/taskexecutor"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
	"github.com/sluicehq/sluice/tm/executor"
)

// Executor is the domain side of the TaskExecutor service
// (*executor.Executor).
type Executor interface {
	DeployTask(ctx context.Context, d control.Deployment) error
	CancelTask(ctx context.Context, tok control.FencingToken, executionID string) error
	FreeSlot(ctx context.Context, allocationID string) error
	TriggerCheckpoint(ctx context.Context, tok control.FencingToken, executionID string, t checkpoint.Trigger) error
	NotifyCheckpoint(ctx context.Context, tok control.FencingToken, executionID string, checkpointID int64, completed bool) error
	WarmModules(ctx context.Context, refs []control.ModuleRef) error
	TaskLogs(ctx context.Context, r control.TaskLogsRequest) ([]control.LogLine, error)
	TaskManagerLogs(ctx context.Context, r control.TaskManagerLogsRequest) ([]control.LogLine, error)
	SampleStacks(ctx context.Context, r control.TaskStacksRequest) ([]control.TaskStack, error)
}

// TaskExecutor serves the TaskExecutor Kitex service. Every method runs the
// same steps: convert and validate the request, call the executor, map the
// error through rpcerr.
type TaskExecutor struct {
	ex     Executor
	secret *auth.Secret
}

var _ taskexecutor.TaskExecutor = (*TaskExecutor)(nil)

// NewTaskExecutor returns the handler for ex.
func NewTaskExecutor(ex Executor) *TaskExecutor { return &TaskExecutor{ex: ex} }

// WithSecret returns h refusing calls that do not carry the proof of
// secret (rpcserver.MetaPeer) with UNAUTHENTICATED. A nil secret accepts
// every call.
func (h *TaskExecutor) WithSecret(secret *auth.Secret) *TaskExecutor {
	return &TaskExecutor{ex: h.ex, secret: secret}
}

// peer checks the caller is a cluster member.
func (h *TaskExecutor) peer(ctx context.Context) error {
	if h.secret == nil {
		return nil
	}
	proof, _ := rpcserver.Incoming(ctx, rpcserver.MetaPeer)
	if !h.secret.CheckRPC(proof) {
		return rpcerr.Errorf(rpcerr.ErrUnauthenticated, "not a cluster member: wrong or missing cluster secret")
	}
	return nil
}

// DeployTask accepts a task into a slot and starts it.
func (h *TaskExecutor) DeployTask(ctx context.Context, req *taskexecutor.TaskDeployment) error {
	if err := h.peer(ctx); err != nil {
		return rpcserver.ToWire(err)
	}
	d, err := rpcwire.DeploymentFromWire(req)
	if err != nil {
		return rpcserver.ToWire(fmt.Errorf("%w: %v", executor.ErrInvalidDeployment, err))
	}
	return rpcserver.ToWire(h.ex.DeployTask(ctx, d))
}

// CancelTask stops a running task.
func (h *TaskExecutor) CancelTask(ctx context.Context, req *taskexecutor.CancelTaskRequest) error {
	if err := h.peer(ctx); err != nil {
		return rpcserver.ToWire(err)
	}
	if req == nil || req.Fencing == nil || req.GetExecutionId() == "" {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "cancel task: need a fencing token and an execution id"))
	}
	return rpcserver.ToWire(h.ex.CancelTask(ctx, rpcwire.FencingFromWire(req.Fencing), req.GetExecutionId()))
}

// TriggerCheckpoint starts a checkpoint at a source task.
func (h *TaskExecutor) TriggerCheckpoint(ctx context.Context, req *taskexecutor.TriggerCheckpointRequest) error {
	if err := h.peer(ctx); err != nil {
		return rpcserver.ToWire(err)
	}
	if req == nil || req.Fencing == nil || req.GetExecutionId() == "" || req.GetCheckpointId() < 1 {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "trigger checkpoint: need a fencing token, an execution id and a checkpoint id ≥ 1"))
	}
	return rpcserver.ToWire(h.ex.TriggerCheckpoint(ctx, rpcwire.FencingFromWire(req.Fencing), req.GetExecutionId(), rpcwire.TriggerFromWire(req)))
}

// NotifyCheckpoint tells a task that a checkpoint completed or aborted.
func (h *TaskExecutor) NotifyCheckpoint(ctx context.Context, req *taskexecutor.NotifyCheckpointRequest) error {
	if err := h.peer(ctx); err != nil {
		return rpcserver.ToWire(err)
	}
	if req == nil || req.Fencing == nil || req.GetExecutionId() == "" {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "notify checkpoint: need a fencing token and an execution id"))
	}
	return rpcserver.ToWire(h.ex.NotifyCheckpoint(ctx, rpcwire.FencingFromWire(req.Fencing), req.GetExecutionId(), req.GetCheckpointId(), req.GetCompleted()))
}

// FreeSlot returns a slot to the pool.
func (h *TaskExecutor) FreeSlot(ctx context.Context, allocationID string) error {
	if err := h.peer(ctx); err != nil {
		return rpcserver.ToWire(err)
	}
	if allocationID == "" {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "free slot: no allocation id"))
	}
	return rpcserver.ToWire(h.ex.FreeSlot(ctx, allocationID))
}

// WarmModules queues modules to compile ahead of their deployment.
func (h *TaskExecutor) WarmModules(ctx context.Context, req *taskexecutor.WarmModulesRequest) error {
	if err := h.peer(ctx); err != nil {
		return rpcserver.ToWire(err)
	}
	refs, err := rpcwire.ModuleRefsFromWire(req)
	if err != nil {
		return rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "warm modules: %w", err))
	}
	return rpcserver.ToWire(h.ex.WarmModules(ctx, refs))
}

// TaskLogs returns the kept log lines of a job's tasks.
func (h *TaskExecutor) TaskLogs(ctx context.Context, req *taskexecutor.TaskLogsRequest) (*common.LogLines, error) {
	if err := h.peer(ctx); err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "task logs: no request"))
	}
	lines, err := h.ex.TaskLogs(ctx, rpcwire.TaskLogsFromWire(req))
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.LogLinesToWire(lines), nil
}

// TaskManagerLogs returns the TaskManager's own kept log lines.
func (h *TaskExecutor) TaskManagerLogs(ctx context.Context, req *taskexecutor.TaskManagerLogsRequest) (*common.LogLines, error) {
	if err := h.peer(ctx); err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "task manager logs: no request"))
	}
	lines, err := h.ex.TaskManagerLogs(ctx, rpcwire.TaskManagerLogsFromWire(req))
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.LogLinesToWire(lines), nil
}

// SampleStacks samples the guest stacks of a job's running tasks.
func (h *TaskExecutor) SampleStacks(ctx context.Context, req *taskexecutor.TaskStacksRequest) (*common.TaskStacks, error) {
	if err := h.peer(ctx); err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "sample stacks: no request"))
	}
	stacks, err := h.ex.SampleStacks(ctx, rpcwire.StacksRequestFromWire(req))
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.StacksToWire(stacks), nil
}

// RegisterTaskExecutor returns the registration of the TaskExecutor service
// for ex, for rpcserver.Start. Calls without the proof of secret are
// refused (a nil secret accepts every call).
func RegisterTaskExecutor(ex Executor, secret *auth.Secret) rpcserver.Registration {
	return func(s server.Server) error {
		return tesvc.RegisterService(s, NewTaskExecutor(ex).WithSecret(secret))
	}
}
