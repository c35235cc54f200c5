package executor

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/tm/task"
)

// splitSource hands a text-source task its input splits, one RequestNextSplit
// to the task's JobMaster at a time (as Flink's RequestNextInputSplit).
type splitSource struct {
	jms      JobMasters
	d        Deployment
	vertexID int
}

// NextSplit implements task.Deps.Splits.
func (s *splitSource) NextSplit(ctx context.Context) (task.Split, bool, error) {
	sp, done, err := s.jms.NextSplit(ctx, s.d.JobMasterAddress, SplitRequest{
		Fencing:     s.d.Fencing,
		ExecutionID: s.d.ExecutionID,
		VertexID:    s.vertexID,
		Subtask:     s.d.Subtask,
	})
	if err != nil {
		return task.Split{}, false, fmt.Errorf("request next split: %w", err)
	}
	if done {
		return task.Split{}, true, nil
	}
	return task.Split{Key: sp.Key, Offset: sp.Offset, Length: sp.Length}, false, nil
}
