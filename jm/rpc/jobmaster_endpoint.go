package rpc

import (
	"context"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/internal/rpcerr"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
	jmd "github.com/sluicehq/sluice/jm/jobmaster"
)

// JobMasterEndpoint serves the JobMaster service for every job: calls are
// routed by the job id of their fencing token.
type JobMasterEndpoint struct {
	D    *dsp.Dispatcher
	Auth Auth
}

var _ jobmaster.JobMaster = (*JobMasterEndpoint)(nil)

// UpdateTaskState applies a task's state report.
func (e *JobMasterEndpoint) UpdateTaskState(ctx context.Context, req *jobmaster.TaskStateUpdate) error {
	if err := e.Auth.Peer(ctx); err != nil {
		return rpcerr.ToWire(err)
	}
	if req == nil || req.Fencing == nil || req.GetExecutionId() == "" {
		return rpcerr.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "task state update: needs a fencing token and an execution id"))
	}
	jm, err := e.D.JobMaster(req.Fencing.GetJobId())
	if err != nil {
		return rpcerr.ToWire(err)
	}
	return rpcerr.ToWire(jm.UpdateTaskState(ctx, updateFromWire(req)))
}

// RequestNextSplit hands out a source subtask's next input split.
func (e *JobMasterEndpoint) RequestNextSplit(ctx context.Context, req *jobmaster.NextSplitRequest) (*jobmaster.NextSplitResponse, error) {
	if err := e.Auth.Peer(ctx); err != nil {
		return nil, rpcerr.ToWire(err)
	}
	if req == nil || req.Fencing == nil || req.GetExecutionId() == "" {
		return nil, rpcerr.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "next split: needs a fencing token and an execution id"))
	}
	jm, err := e.D.JobMaster(req.Fencing.GetJobId())
	if err != nil {
		return nil, rpcerr.ToWire(err)
	}
	sp, done, err := jm.NextSplit(ctx, jmd.SplitRequest{
		Fencing:     fencingFromWire(req.Fencing),
		ExecutionID: req.GetExecutionId(),
		VertexID:    int(req.GetVertexId()),
		Subtask:     int(req.GetSubtask()),
	})
	if err != nil {
		return nil, rpcerr.ToWire(err)
	}
	if done {
		return &jobmaster.NextSplitResponse{Done: true}, nil
	}
	return &jobmaster.NextSplitResponse{Split: &jobmaster.InputSplit{Key: sp.Key, Offset: sp.Offset, Length: sp.Length}}, nil
}
