package rest

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Savepoints, stops and rescales take long; as Flink's, the API answers
// their POST with a request id at once and runs them in the background,
// and GET .../savepoints/:id (or .../rescaling/:id) tells how they went.

type opKind string

const (
	opSavepoint opKind = "savepoint" // savepoints and stops
	opRescale   opKind = "rescaling"
)

// operation is one savepoint, stop or rescale request.
type operation struct {
	id, tenant, job string
	kind            opKind
	done            bool
	location        string // savepoints: the savepoint's directory
	savepointID     string
	newJob          string // rescales: the job that resumed
	err             error
}

// operations keeps the last max operations; the oldest ended one goes
// first.
type operations struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*operation
	order []string
}

func newOperations(max int) *operations {
	return &operations{max: max, byID: map[string]*operation{}}
}

// add keeps op, or refuses it when max operations are all in progress.
func (o *operations) add(op *operation) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.order) >= o.max {
		for i, id := range o.order {
			if o.byID[id].done {
				delete(o.byID, id)
				o.order = append(o.order[:i:i], o.order[i+1:]...)
				break
			}
		}
	}
	if len(o.order) >= o.max {
		return rpcerr.Errorf(rpcerr.ErrResourceExhausted, "%d savepoint, stop and rescale requests are in progress: wait for one to end", len(o.order))
	}
	o.byID[op.id] = op
	o.order = append(o.order, op.id)
	return nil
}

// finish records the outcome of op.
func (o *operations) finish(id string, f func(*operation)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if op := o.byID[id]; op != nil {
		f(op)
		op.done = true
	}
}

// get returns a copy of tenant's operation id of job.
func (o *operations) get(tenant, job, id string, kind opKind) (operation, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	op := o.byID[id]
	if op == nil || op.tenant != tenant || op.job != job || op.kind != kind {
		return operation{}, false
	}
	return *op, true
}

// start registers an operation of tenant's job and runs f for it in the
// background; it answers 202 with the request id.
func (s *Server) start(r *request, kind opKind, f func(ctx context.Context, op *operation)) (int, any, error) {
	op := &operation{id: randomID(), tenant: r.tenant, job: r.param("job"), kind: kind}
	if err := s.ops.add(op); err != nil {
		return 0, nil, err
	}
	res := *op
	if !s.goOp(func(ctx context.Context) {
		f(ctx, &res)
		s.ops.finish(op.id, func(o *operation) {
			o.location, o.savepointID, o.newJob, o.err = res.location, res.savepointID, res.newJob, res.err
		})
	}) {
		s.ops.finish(op.id, func(o *operation) {
			o.err = rpcerr.Errorf(rpcerr.ErrUnavailable, "the job manager is shutting down")
		})
		return 0, nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "the job manager is shutting down")
	}
	return http.StatusAccepted, struct {
		RequestID string `json:"request-id"`
	}{op.id}, nil
}

type savepointRequest struct {
	CancelJob       bool   `json:"cancel-job"`
	TargetDirectory string `json:"target-directory"`
	FormatType      string `json:"formatType"`
}

// postSavepoint is POST /jobs/:job/savepoints {"cancel-job": bool}: take a
// savepoint; with cancel-job, stop the job with it (it ends FINISHED, as
// POST /jobs/:job/stop).
func (s *Server) postSavepoint(ctx context.Context, r *request) (int, any, error) {
	if _, err := s.cfg.Dispatcher.GetJob(ctx, r.tenant, r.param("job")); err != nil {
		return 0, nil, err
	}
	var req savepointRequest
	if err := decodeBody(r, s.cfg.MaxBody, "savepoint", &req); err != nil {
		return 0, nil, err
	}
	if req.TargetDirectory != "" {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "target-directory %q: savepoints go under the tenant's savepoints in the blob store; leave it out", req.TargetDirectory)
	}
	return s.savepoint(r, req.CancelJob)
}

type stopRequest struct {
	Drain           bool   `json:"drain"`
	TargetDirectory string `json:"targetDirectory"`
}

// postStop is POST /jobs/:job/stop {"drain": false}: stop the job with a
// savepoint (the status is under /jobs/:job/savepoints/:id).
func (s *Server) postStop(ctx context.Context, r *request) (int, any, error) {
	if _, err := s.cfg.Dispatcher.GetJob(ctx, r.tenant, r.param("job")); err != nil {
		return 0, nil, err
	}
	var req stopRequest
	if err := decodeBody(r, s.cfg.MaxBody, "stop", &req); err != nil {
		return 0, nil, err
	}
	if req.Drain {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "drain: jobs have no event time yet, so there is no watermark to drain; send {\"drain\": false}")
	}
	if req.TargetDirectory != "" {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "targetDirectory %q: savepoints go under the tenant's savepoints in the blob store; leave it out", req.TargetDirectory)
	}
	return s.savepoint(r, true)
}

func (s *Server) savepoint(r *request, stop bool) (int, any, error) {
	tenant, job := r.tenant, r.param("job")
	return s.start(r, opSavepoint, func(ctx context.Context, op *operation) {
		sp, err := s.cfg.Dispatcher.TriggerSavepoint(ctx, tenant, job, stop, s.cfg.SavepointTimeout)
		op.location, op.savepointID, op.err = sp.Location, sp.SavepointID, err
	})
}

// patchRescaling is PATCH /jobs/:job/rescaling?parallelism=N: stop the job
// with a savepoint and run it again from it at parallelism N, as a new job
// (Dispatcher.Rescale; the status names it).
func (s *Server) patchRescaling(ctx context.Context, r *request) (int, any, error) {
	tenant, job := r.tenant, r.param("job")
	raw := r.URL.Query().Get("parallelism")
	if _, err := s.cfg.Dispatcher.GetJob(ctx, tenant, job); err != nil {
		return 0, nil, err
	}
	p, err := strconv.Atoi(raw)
	if err != nil {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "parallelism %q: want ?parallelism=N, a number", raw)
	}
	if err := s.cfg.Dispatcher.CheckRescale(ctx, tenant, job, p); err != nil {
		return 0, nil, err
	}
	return s.start(r, opRescale, func(ctx context.Context, op *operation) {
		res, err := s.cfg.Dispatcher.Rescale(ctx, tenant, job, p, s.cfg.SavepointTimeout)
		op.savepointID, op.newJob, op.err = res.SavepointID, res.JobID, err
	})
}

type failureCause struct {
	Class      string `json:"class"`
	StackTrace string `json:"stack-trace"`
}

type operationBody struct {
	Location     string        `json:"location,omitempty"`
	SavepointID  string        `json:"savepoint-id,omitempty"`
	JobID        string        `json:"jobid,omitempty"`
	FailureCause *failureCause `json:"failure-cause,omitempty"`
}

// getOperation is GET /jobs/:job/savepoints/:op and
// /jobs/:job/rescaling/:op: Flink's {"status": {"id"}, "operation"}.
func (s *Server) getOperation(kind opKind) handler {
	return func(ctx context.Context, r *request) (int, any, error) {
		op, ok := s.ops.get(r.tenant, r.param("job"), r.param("op"), kind)
		if !ok {
			return 0, nil, rpcerr.Errorf(rpcerr.ErrNotFound, "%s request %q of job %q not found", kind, r.param("op"), r.param("job"))
		}
		type status struct {
			ID string `json:"id"`
		}
		out := struct {
			Status    status         `json:"status"`
			Operation *operationBody `json:"operation,omitempty"`
		}{Status: status{"IN_PROGRESS"}}
		if op.done {
			out.Status.ID = "COMPLETED"
			ob := &operationBody{Location: op.location, SavepointID: op.savepointID, JobID: op.newJob}
			if op.err != nil {
				ob.FailureCause = &failureCause{Class: rpcerr.CodeOf(op.err).String(), StackTrace: op.err.Error()}
			}
			out.Operation = ob
		}
		return http.StatusOK, out, nil
	}
}
