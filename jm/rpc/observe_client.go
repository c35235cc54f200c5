package rpc

import (
	"context"
	"fmt"

	"github.com/cloudwego/kitex/client/callopt"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
)

var _ dsp.TaskObserver = (*TaskExecutors)(nil)

// TaskLogs reads the kept log lines of a job's tasks on the TaskManager at
// addr.
func (t *TaskExecutors) TaskLogs(ctx context.Context, addr string, r control.TaskLogsRequest) ([]control.LogLine, error) {
	c, err := t.client(addr)
	if err != nil {
		return nil, err
	}
	w, err := c.TaskLogs(ctx, rpcwire.TaskLogsToWire(r))
	if err != nil {
		return nil, fmt.Errorf("task logs on %s: %w", addr, rpcserver.FromCall(err))
	}
	return rpcwire.LogLinesFromWire(w), nil
}

// TaskManagerLogs reads the own log of the TaskManager at addr.
func (t *TaskExecutors) TaskManagerLogs(ctx context.Context, addr string, r control.TaskManagerLogsRequest) ([]control.LogLine, error) {
	c, err := t.client(addr)
	if err != nil {
		return nil, err
	}
	w, err := c.TaskManagerLogs(ctx, rpcwire.TaskManagerLogsToWire(r))
	if err != nil {
		return nil, fmt.Errorf("task manager logs of %s: %w", addr, rpcserver.FromCall(err))
	}
	return rpcwire.LogLinesFromWire(w), nil
}

// SampleStacks samples a job's task stacks on the TaskManager at addr; the
// call may take the sampling duration plus the usual RPC timeout.
func (t *TaskExecutors) SampleStacks(ctx context.Context, addr string, r control.TaskStacksRequest) ([]control.TaskStack, error) {
	c, err := t.client(addr)
	if err != nil {
		return nil, err
	}
	rpcTimeout := t.cfg.RPCTimeout
	if rpcTimeout <= 0 {
		rpcTimeout = rpcserver.DefaultRPCTimeout
	}
	w, err := c.SampleStacks(ctx, rpcwire.StacksRequestToWire(r), callopt.WithRPCTimeout(r.Query.Duration+rpcTimeout))
	if err != nil {
		return nil, fmt.Errorf("sample stacks on %s: %w", addr, rpcserver.FromCall(err))
	}
	return rpcwire.StacksFromWire(w), nil
}
