package rpc

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
)

// GetLogs returns the kept log lines of a job's tasks.
func (e *DispatcherEndpoint) GetLogs(ctx context.Context, req *dispatcher.JobLogsRequest) (*common.LogLines, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "logs: no request"))
	}
	lines, err := e.D.Logs(ctx, tenant, req.GetJobId(), dsp.LogQuery{
		Task: req.GetTask(), After: rpcwire.CursorFromWire(req.GetAfter()), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.LogLinesToWire(lines), nil
}

// GetTaskManagerLogs returns the lines of a TaskManager's own log the
// caller may read.
func (e *DispatcherEndpoint) GetTaskManagerLogs(ctx context.Context, req *dispatcher.TaskManagerLogsQuery) (*common.LogLines, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "task manager logs: no request"))
	}
	lines, err := e.D.TaskManagerLogs(ctx, tenant, req.GetTaskManagerId(), dsp.LogQuery{
		After: map[string]uint64{"": uint64(max(req.GetAfter(), 0))}, Limit: int(req.GetLimit())})
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.LogLinesToWire(lines), nil
}

// GetStacks samples the guest stacks of a job's running tasks.
func (e *DispatcherEndpoint) GetStacks(ctx context.Context, req *dispatcher.JobStacksRequest) (*common.TaskStacks, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "stacks: no request"))
	}
	if req.GetDurationMs() < 0 || req.GetIntervalMs() < 0 {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "stacks: negative duration or interval"))
	}
	stacks, err := e.D.Stacks(ctx, tenant, req.GetJobId(), dsp.StackQuery{Task: req.GetTask(),
		Duration: time.Duration(req.GetDurationMs()) * time.Millisecond, Interval: time.Duration(req.GetIntervalMs()) * time.Millisecond})
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.StacksToWire(stacks), nil
}
