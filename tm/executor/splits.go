package executor

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
)

// splitSource hands a text-source task its input splits, one RequestNextSplit
// to the task's JobMaster at a time (as Flink's RequestNextInputSplit).
type splitSource struct {
	jms      JobMasters
	d        control.Deployment
	vertexID int
}

// NextSplit implements task.Deps.Splits.
func (s *splitSource) NextSplit(ctx context.Context) (checkpoint.Split, bool, error) {
	sp, done, err := s.jms.NextSplit(ctx, s.d.JobMasterAddress, control.SplitRequest{
		Fencing:     s.d.Fencing,
		ExecutionID: s.d.ExecutionID,
		VertexID:    s.vertexID,
		Subtask:     s.d.Subtask,
	})
	if err != nil {
		return checkpoint.Split{}, false, fmt.Errorf("request next split: %w", err)
	}
	if done {
		return checkpoint.Split{}, true, nil
	}
	return checkpoint.Split{Key: sp.Key, Offset: sp.Offset, Length: sp.Length}, false, nil
}
