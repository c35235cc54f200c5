package jobmaster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
)

// TestRetentionWhenTheJobEnds: with state.checkpoints.num-retained=2 a job
// keeps its two newest completed checkpoints while it runs; when it ends
// CANCELED with RETAIN_ON_CANCELLATION, or FAILED either way, it keeps
// them (metadata and state), commits the newest one's file-sink parts and
// deletes what no retained checkpoint needs (the one in progress, pending
// parts after the newest); CANCELED with DELETE_ON_CANCELLATION deletes
// everything of the job.
func TestRetentionWhenTheJobEnds(t *testing.T) {
	for _, tt := range []struct {
		name      string
		retention jobconfig.Retention
		fail      bool
		kept      bool
	}{
		{"canceled, retain on cancellation", jobconfig.RetainOnCancellation, false, true},
		{"canceled, delete on cancellation", jobconfig.DeleteOnCancellation, false, false},
		{"canceled, default retention", "", false, false},
		{"failed, delete on cancellation", jobconfig.DeleteOnCancellation, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cc := periodic(20 * time.Millisecond)
			cc.Retained, cc.Retention = 2, tt.retention
			var stored4 atomic.Int64
			h, st := startCP(t, fileSinkJob(), cc, func(c *Config, g *fakeGateway) {
				g.onCheckpoint = func(d control.Deployment, tr checkpoint.Trigger, a *checkpoint.Ack) cpReply {
					p := sinkPart(d.Subtask, int(tr.ID))
					g.store.(*recStore).write(t, p.Pending, fmt.Sprintf("part %d of checkpoint %d", d.Subtask, tr.ID))
					if tr.ID >= 4 {
						stored4.Add(1)
						return cpReply{ignore: true} // 4 stays in progress; its part is never covered
					}
					a.SinkParts = []checkpoint.SinkPart{p}
					return cpReply{}
				}
			})
			h.checkpoint(t, 3, checkpoint.StatusCompleted)
			testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				if n := stored4.Load(); n < 2 {
					return fmt.Errorf("%d tasks stored their state of checkpoint 4, want 2", n)
				}
				return cpDirGone(t, st, 1, "subsumed")
			})
			if tt.fail {
				d := h.deploysOf(0)[0]
				h.gw.report(d, ExecFailed, "boom", nil, nil)
				h.wait(t, Failed)
			} else {
				h.jm.Cancel(context.Background())
				h.wait(t, Canceled)
			}
			h.jm.Close() // waits for the cleanup

			job, _ := testKeys.Job("j1")
			if !tt.kept {
				if left := st.keys(t, job); len(left) != 0 {
					t.Fatalf("left after the job ended: %v", left)
				}
				return
			}
			for _, id := range []int64{2, 3} {
				m := readMeta(t, st, cpDir(id))
				for _, ts := range m.Tasks {
					if !st.exists(ts.State.Key) {
						t.Errorf("retained checkpoint %d lost its state %s", id, ts.State.Key)
					}
				}
			}
			if err := cpDirGone(t, st, 1, "subsumed"); err != nil {
				t.Error(err)
			}
			if err := cpDirGone(t, st, 4, "unfinished"); err != nil {
				t.Error(err)
			}
			if left := st.keys(t, job+"pending/"); len(left) != 0 {
				t.Errorf("pending parts left: %v (want them committed or deleted)", left)
			}
			for sub := range 2 {
				for id := 1; id <= 3; id++ {
					if p := sinkPart(sub, id); !st.exists(p.Final) {
						t.Errorf("part %d of completed checkpoint %d not committed", sub, id)
					}
				}
				if p := sinkPart(sub, 4); st.exists(p.Final) {
					t.Errorf("part %d of unfinished checkpoint 4 committed", sub)
				}
			}
		})
	}
}
