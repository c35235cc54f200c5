package rest

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

type checkpointBody struct {
	ID               int64  `json:"id"`
	Status           string `json:"status"`
	IsSavepoint      bool   `json:"is_savepoint"`
	SavepointID      string `json:"savepoint_id,omitempty"`
	CheckpointType   string `json:"checkpoint_type"`
	TriggerTimestamp int64  `json:"trigger_timestamp"`
	// LatestAck is when the checkpoint completed or aborted; -1 while in
	// progress (the JobManager keeps no time per acknowledgement).
	LatestAck        int64 `json:"latest_ack_timestamp"`
	EndToEnd         int64 `json:"end_to_end_duration"`
	CheckpointedSize int64 `json:"checkpointed_size"`
	StateSize        int64 `json:"state_size"`
	NumSubtasks      int   `json:"num_subtasks"`
	NumAcknowledged  int   `json:"num_acknowledged_subtasks"`
	// AlignmentMs is the longest barrier alignment of the acknowledged
	// tasks, in ms.
	AlignmentMs    int64  `json:"alignment_duration"`
	ExternalPath   string `json:"external_path"`
	FailureMessage string `json:"failure_message,omitempty"`
	Retained       bool   `json:"retained"`
}

// flinkStatus is Flink's name of a checkpoint status.
func flinkStatus(st string) string {
	if st == checkpoint.StatusAborted {
		return "FAILED"
	}
	return st
}

func (s *Server) checkpointOf(c checkpoint.Stats) checkpointBody {
	b := checkpointBody{
		ID: c.ID, Status: flinkStatus(c.Status), IsSavepoint: c.Savepoint, SavepointID: c.SavepointID,
		CheckpointType: "CHECKPOINT", TriggerTimestamp: ms(c.Triggered), LatestAck: -1,
		EndToEnd: c.Duration.Milliseconds(), CheckpointedSize: c.Size, StateSize: c.Size,
		NumSubtasks: c.Subtasks, NumAcknowledged: c.Acknowledged, AlignmentMs: c.Alignment.Milliseconds(),
		ExternalPath: c.Location, FailureMessage: c.Reason, Retained: c.Retained,
	}
	if c.Savepoint {
		b.CheckpointType = "SAVEPOINT"
	}
	if c.Status == checkpoint.StatusInProgress {
		if !c.Triggered.IsZero() {
			b.EndToEnd = s.cfg.Now().Sub(c.Triggered).Milliseconds()
		}
	} else if !c.Triggered.IsZero() {
		b.LatestAck = ms(c.Triggered.Add(c.Duration))
	}
	return b
}

type restoredBody struct {
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// getCheckpoints is GET /jobs/:job/checkpoints: the job's checkpoints and
// savepoints, newest first (those the JobMaster knows and those retained
// in the blob store, so an ended job's are listed too).
func (s *Server) getCheckpoints(ctx context.Context, r *request) (int, any, error) {
	id := r.param("job")
	cps, err := s.cfg.Dispatcher.ListCheckpoints(ctx, r.tenant, id)
	if err != nil {
		return 0, nil, err
	}
	type counts struct {
		Restored   int `json:"restored"`
		Total      int `json:"total"`
		InProgress int `json:"in_progress"`
		Completed  int `json:"completed"`
		Failed     int `json:"failed"`
	}
	type latest struct {
		Completed *checkpointBody `json:"completed"`
		Savepoint *checkpointBody `json:"savepoint"`
		Failed    *checkpointBody `json:"failed"`
		Restored  *restoredBody   `json:"restored"`
	}
	out := struct {
		Counts  counts           `json:"counts"`
		Latest  latest           `json:"latest"`
		History []checkpointBody `json:"history"`
	}{History: []checkpointBody{}}
	for _, c := range cps {
		b := s.checkpointOf(c)
		out.History = append(out.History, b)
		out.Counts.Total++
		switch b.Status {
		case checkpoint.StatusInProgress:
			out.Counts.InProgress++
		case checkpoint.StatusCompleted:
			out.Counts.Completed++
			if c.Savepoint && out.Latest.Savepoint == nil {
				out.Latest.Savepoint = &b
			} else if !c.Savepoint && out.Latest.Completed == nil {
				out.Latest.Completed = &b
			}
		default:
			out.Counts.Failed++
			if out.Latest.Failed == nil {
				out.Latest.Failed = &b
			}
		}
	}
	// The restore point a known job started from; restarts restore from
	// the latest completed checkpoint, which "latest" shows.
	if spec, err := s.cfg.Dispatcher.JobSpec(ctx, r.tenant, id); err == nil {
		sub := spec.Submission
		if sub.FromSavepoint != "" || sub.FromCheckpoint != "" {
			out.Counts.Restored = 1
			rb := &restoredBody{IsSavepoint: sub.FromSavepoint != "", ExternalPath: sub.FromSavepoint + sub.FromCheckpoint}
			if d, err := s.cfg.Dispatcher.GetJob(ctx, r.tenant, id); err == nil {
				rb.RestoreTimestamp = ms(d.Start)
			}
			out.Latest.Restored = rb
		}
	}
	return http.StatusOK, out, nil
}

// getCheckpointConfig is GET /jobs/:job/checkpoints/config: the job's
// checkpointing as its config set it (defaults filled in).
func (s *Server) getCheckpointConfig(ctx context.Context, r *request) (int, any, error) {
	spec, err := s.cfg.Dispatcher.JobSpec(ctx, r.tenant, r.param("job"))
	if err != nil {
		return 0, nil, err
	}
	c := spec.Config.Checkpoints
	type externalization struct {
		Enabled              bool `json:"enabled"`
		DeleteOnCancellation bool `json:"delete_on_cancellation"`
	}
	return http.StatusOK, struct {
		Enabled         bool            `json:"enabled"`
		Mode            string          `json:"mode"`
		Interval        int64           `json:"interval"`
		Timeout         int64           `json:"timeout"`
		MinPause        int64           `json:"min_pause"`
		MaxConcurrent   int             `json:"max_concurrent"`
		Tolerable       int             `json:"tolerable_failed_checkpoints"`
		Retained        int             `json:"retained"`
		Externalization externalization `json:"externalization"`
	}{
		Enabled: c.Enabled(), Mode: "exactly_once", Interval: c.Interval.Milliseconds(), Timeout: c.Timeout.Milliseconds(),
		MinPause: c.MinPause.Milliseconds(), MaxConcurrent: c.MaxConcurrent, Tolerable: c.TolerableFailures, Retained: c.Retained,
		Externalization: externalization{Enabled: c.Retained > 0, DeleteOnCancellation: !c.KeepOnCancel()},
	}, nil
}

// getCheckpointDetails is GET /jobs/:job/checkpoints/details/:cp.
func (s *Server) getCheckpointDetails(ctx context.Context, r *request) (int, any, error) {
	raw := r.param("cp")
	id, perr := strconv.ParseInt(raw, 10, 64)
	cps, err := s.cfg.Dispatcher.ListCheckpoints(ctx, r.tenant, r.param("job"))
	if err != nil {
		return 0, nil, err // the job first: a foreign job is not found, whatever the id
	}
	if perr != nil {
		return 0, nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "checkpoint id %q: want a number, as GET /jobs/%s/checkpoints lists them", raw, r.param("job"))
	}
	for _, c := range cps {
		if c.ID == id {
			return http.StatusOK, s.checkpointOf(c), nil
		}
	}
	return 0, nil, rpcerr.Errorf(rpcerr.ErrNotFound, "checkpoint %d of job %s not found: GET /jobs/%s/checkpoints lists them", id, r.param("job"), r.param("job"))
}
