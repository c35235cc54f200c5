package rpc

import (
	"context"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcwire"
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
	jm, err := e.jobOf(ctx, "task state update", req.GetFencing(), req.GetExecutionId())
	if err != nil {
		return rpcserver.ToWire(err)
	}
	return rpcserver.ToWire(jm.UpdateTaskState(ctx, rpcwire.TaskUpdateFromWire(req)))
}

// RequestNextSplit hands out a source subtask's next input split.
func (e *JobMasterEndpoint) RequestNextSplit(ctx context.Context, req *jobmaster.NextSplitRequest) (*jobmaster.NextSplitResponse, error) {
	jm, err := e.jobOf(ctx, "next split", req.GetFencing(), req.GetExecutionId())
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	sp, done, err := jm.NextSplit(ctx, rpcwire.SplitRequestFromWire(req))
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return rpcwire.NextSplitToWire(sp, done), nil
}

// jobOf authenticates a task's call and finds the job its fencing token
// names.
func (e *JobMasterEndpoint) jobOf(ctx context.Context, what string, f *common.FencingToken, executionID string) (*jmd.JobMaster, error) {
	if err := e.Auth.Peer(ctx); err != nil {
		return nil, err
	}
	if f == nil || executionID == "" {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s: needs a fencing token and an execution id", what)
	}
	return e.D.JobMaster(f.GetJobId())
}

// AcknowledgeCheckpoint takes a task's acknowledgement of a checkpoint.
func (e *JobMasterEndpoint) AcknowledgeCheckpoint(ctx context.Context, req *jobmaster.AcknowledgeCheckpointRequest) error {
	jm, err := e.jobOf(ctx, "acknowledge checkpoint", req.GetFencing(), req.GetExecutionId())
	if err != nil {
		return rpcserver.ToWire(err)
	}
	return rpcserver.ToWire(jm.AcknowledgeCheckpoint(ctx, rpcwire.FencingFromWire(req.Fencing), rpcwire.AckFromWire(req)))
}

// DeclineCheckpoint takes a task's refusal of a checkpoint.
func (e *JobMasterEndpoint) DeclineCheckpoint(ctx context.Context, req *jobmaster.DeclineCheckpointRequest) error {
	jm, err := e.jobOf(ctx, "decline checkpoint", req.GetFencing(), req.GetExecutionId())
	if err != nil {
		return rpcserver.ToWire(err)
	}
	return rpcserver.ToWire(jm.DeclineCheckpoint(ctx, rpcwire.FencingFromWire(req.Fencing), rpcwire.DeclineFromWire(req)))
}
