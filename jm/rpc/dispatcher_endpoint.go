package rpc

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	dsp "github.com/sluicehq/sluice/jm/dispatcher"
	jmd "github.com/sluicehq/sluice/jm/jobmaster"
)

// DispatcherEndpoint serves the Dispatcher service.
type DispatcherEndpoint struct {
	D    *dsp.Dispatcher
	Auth Auth
}

var _ dispatcher.Dispatcher = (*DispatcherEndpoint)(nil)

// UploadModule stores a module.
func (e *DispatcherEndpoint) UploadModule(ctx context.Context, req *dispatcher.UploadModuleRequest) (*dispatcher.UploadModuleResponse, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "upload module: no request"))
	}
	digest, size, err := e.D.UploadModule(ctx, tenant, req.GetModule())
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return &dispatcher.UploadModuleResponse{Digest: digest, Size: size}, nil
}

// SubmitJob starts a job.
func (e *DispatcherEndpoint) SubmitJob(ctx context.Context, req *dispatcher.SubmitJobRequest) (*dispatcher.SubmitJobResponse, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "submit job: no request"))
	}
	if err := checkSubmission(req); err != nil {
		return nil, rpcserver.ToWire(err)
	}
	id, err := e.D.SubmitJob(ctx, tenant, dsp.Submission{
		ModuleDigest:   req.GetModuleDigest(),
		Args:           req.GetArgs_(),
		Parallelism:    int(req.GetParallelism()),
		Config:         req.GetConfig(),
		Name:           req.GetName(),
		FromSavepoint:  req.GetFromSavepoint(),
		FromCheckpoint: req.GetFromCheckpoint(),
	})
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return &dispatcher.SubmitJobResponse{JobId: id}, nil
}

// Bounds on a submission's arguments, config and name (the Dispatcher's,
// which the REST API checks too).
const (
	MaxArgs        = dsp.MaxArgs
	MaxArgsBytes   = dsp.MaxArgsBytes
	MaxConfig      = dsp.MaxConfig
	MaxConfigBytes = dsp.MaxConfigBytes
	MaxNameBytes   = dsp.MaxNameBytes
)

// checkSubmission refuses arguments, config and names beyond the bounds
// (dsp.CheckSubmission).
func checkSubmission(req *dispatcher.SubmitJobRequest) error {
	return dsp.CheckSubmission(dsp.Submission{Args: req.GetArgs_(), Config: req.GetConfig(), Name: req.GetName()})
}

// ListJobs lists the tenant's jobs.
func (e *DispatcherEndpoint) ListJobs(ctx context.Context) (*dispatcher.ListJobsResponse, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	resp := &dispatcher.ListJobsResponse{Jobs: []*dispatcher.JobSummary{}}
	for _, d := range e.D.ListJobs(ctx, tenant) {
		resp.Jobs = append(resp.Jobs, summaryToWire(d))
	}
	return resp, nil
}

// GetJob returns a job's details.
func (e *DispatcherEndpoint) GetJob(ctx context.Context, jobID string) (*dispatcher.JobDetails, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	d, err := e.D.GetJob(ctx, tenant, jobID)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return detailsToWire(d), nil
}

// CancelJob asks a job to cancel.
func (e *DispatcherEndpoint) CancelJob(ctx context.Context, jobID string) error {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return rpcserver.ToWire(err)
	}
	return rpcserver.ToWire(e.D.CancelJob(ctx, tenant, jobID))
}

// WaitJob waits for a job to end, up to the request's timeout, or with
// records_from for its next released records.
func (e *DispatcherEndpoint) WaitJob(ctx context.Context, req *dispatcher.WaitJobRequest) (*dispatcher.JobResult_, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil || req.GetTimeoutMs() < 0 {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "wait job: timeout_ms must be 0 or more"))
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	var r jmd.Result
	if req.IsSetRecordsFrom() {
		r, err = e.D.WaitRecords(ctx, tenant, req.GetJobId(), req.GetRecordsFrom(), timeout)
	} else {
		r, err = e.D.WaitJob(ctx, tenant, req.GetJobId(), timeout)
	}
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return resultToWire(r), nil
}

// Overview describes the cluster.
func (e *DispatcherEndpoint) Overview(ctx context.Context) (*dispatcher.ClusterOverview, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	o := overviewToWire(e.D.Overview(ctx, tenant))
	o.Tenant = &tenant
	return o, nil
}

// TriggerSavepoint takes a savepoint of a job, and stops the job after it
// when asked.
func (e *DispatcherEndpoint) TriggerSavepoint(ctx context.Context, req *dispatcher.SavepointRequest) (*dispatcher.CheckpointInfo, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	if req == nil {
		return nil, rpcserver.ToWire(rpcerr.Errorf(rpcerr.ErrInvalidArgument, "savepoint: no request"))
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	var st checkpoint.Stats
	switch {
	case req.GetDrain() && !req.GetStop():
		err = rpcerr.Errorf(rpcerr.ErrInvalidArgument, "savepoint of job %s: drain is for stopping a job: set stop too (sluice stop --drain)", req.GetJobId())
	case req.GetDrain():
		st, err = e.D.StopWithDrain(ctx, tenant, req.GetJobId(), timeout)
	default:
		st, err = e.D.TriggerSavepoint(ctx, tenant, req.GetJobId(), req.GetStop(), timeout)
	}
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	return checkpointToWire(st), nil
}

// ListCheckpoints lists a job's checkpoints and savepoints.
func (e *DispatcherEndpoint) ListCheckpoints(ctx context.Context, jobID string) (*dispatcher.ListCheckpointsResponse, error) {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	cps, err := e.D.ListCheckpoints(ctx, tenant, jobID)
	if err != nil {
		return nil, rpcserver.ToWire(err)
	}
	w := &dispatcher.ListCheckpointsResponse{Checkpoints: []*dispatcher.CheckpointInfo{}}
	for _, c := range cps {
		w.Checkpoints = append(w.Checkpoints, checkpointToWire(c))
	}
	return w, nil
}

// DisposeSavepoint deletes a savepoint.
func (e *DispatcherEndpoint) DisposeSavepoint(ctx context.Context, id string) error {
	tenant, err := e.Auth.Client(ctx)
	if err != nil {
		return rpcserver.ToWire(err)
	}
	return rpcserver.ToWire(e.D.DisposeSavepoint(ctx, tenant, id))
}
