package rest

import (
	"context"
	"io"
	"mime"
	"net/http"

	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/dispatcher"
)

// getModules is GET /modules: the tenant's modules.
func (s *Server) getModules(ctx context.Context, r *request) (int, any, error) {
	mods, err := s.cfg.Dispatcher.ListModules(ctx, r.tenant)
	if err != nil {
		return 0, nil, err
	}
	type module struct {
		Digest   string `json:"digest"`
		Size     int64  `json:"size"`
		Uploaded int64  `json:"uploaded"`
	}
	out := struct {
		Modules []module `json:"modules"`
	}{Modules: []module{}}
	for _, m := range mods {
		out.Modules = append(out.Modules, module{Digest: m.Digest, Size: m.Size, Uploaded: ms(m.Uploaded)})
	}
	return http.StatusOK, out, nil
}

// postModule is POST /modules with the raw module as the body: validate and
// store it, as `sluice run` uploads it. The size limit is the Kitex
// upload's; a body over it is refused before it is read (413).
func (s *Server) postModule(ctx context.Context, r *request) (int, any, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt == "multipart/form-data" || mt == "application/x-www-form-urlencoded" {
			return 0, nil, errStatus(http.StatusUnsupportedMediaType, "upload module: send the module as the raw body with Content-Type application/wasm, not as a form")
		}
	}
	limit := s.cfg.ModuleSizeLimit
	if r.ContentLength > limit {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrModuleTooLarge, "module is %d bytes, over the limit of %d bytes", r.ContentLength, limit)
	}
	wasm, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return 0, nil, errStatus(http.StatusBadRequest, "upload module: reading the body failed: %v", err)
	}
	if int64(len(wasm)) > limit {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrModuleTooLarge, "module is over the limit of %d bytes", limit)
	}
	digest, size, err := s.cfg.Dispatcher.UploadModule(ctx, r.tenant, wasm)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		Digest string `json:"digest"`
		Size   int64  `json:"size"`
	}{digest, size}, nil
}

// runRequest is the body of POST /modules/:digest/run. Flink's jar-run
// names (programArgsList, savepointPath) are accepted too.
type runRequest struct {
	Args            []string          `json:"args"`
	ProgramArgsList []string          `json:"programArgsList"`
	Parallelism     int               `json:"parallelism"`
	Config          map[string]string `json:"config"`
	Name            string            `json:"name"`
	SavepointPath   string            `json:"savepoint-path"`
	FlinkSavepoint  string            `json:"savepointPath"`
	CheckpointPath  string            `json:"checkpoint-path"`
}

// postRun is POST /modules/:digest/run: submit a job of the tenant's
// module; {"jobid"}.
func (s *Server) postRun(ctx context.Context, r *request) (int, any, error) {
	var req runRequest
	if err := decodeBody(r, s.cfg.MaxBody, "run", &req); err != nil {
		return 0, nil, err
	}
	if req.Args != nil && req.ProgramArgsList != nil {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "run: both args and programArgsList: send one")
	}
	if req.SavepointPath != "" && req.FlinkSavepoint != "" {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "run: both savepoint-path and savepointPath: send one")
	}
	sub := dispatcher.Submission{
		ModuleDigest:   r.param("digest"),
		Args:           append(req.Args, req.ProgramArgsList...),
		Parallelism:    req.Parallelism,
		Config:         req.Config,
		Name:           req.Name,
		FromSavepoint:  req.SavepointPath + req.FlinkSavepoint,
		FromCheckpoint: req.CheckpointPath,
	}
	if err := dispatcher.CheckSubmission(sub); err != nil {
		return 0, nil, err
	}
	id, err := s.cfg.Dispatcher.SubmitJob(ctx, r.tenant, sub)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		JobID string `json:"jobid"`
	}{id}, nil
}
