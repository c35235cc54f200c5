package guest

import (
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// MonitorEvery makes a TextSource follow its paths, as Flink's continuous
// FileSource does: the cluster lists them again every d and hands the
// objects that appeared since as new input, and the source never ends (stop
// the job with a savepoint, `sluice stop --drain`, or cancel it). d must be
// at least 100 ms.
//
//	env.TextSource("events", "incoming/").MonitorEvery(10 * time.Second)
//
// # Notes
//
// An object is read once, when it is first listed: one that changes after
// that is not read again, so write each object whole (upload, then never
// rewrite) and let new data arrive as new objects. A path that names
// nothing yet is waited for rather than refused. Which objects were found
// is kept in every checkpoint, so a restored job reads neither an object
// twice nor misses one that appeared while it was down.
func (s *Stream) MonitorEvery(d time.Duration) *Stream {
	if s.op.kind != jobgraph.KindSource || s.op.connector != jobgraph.ConnectorText {
		s.env.fail("MonitorEvery on %q: only a TextSource follows its paths", s.op.name)
		return s
	}
	if d < jobgraph.MinMonitorInterval {
		s.env.fail("MonitorEvery(%v) on %q: the interval must be at least %v", d, s.op.name, jobgraph.MinMonitorInterval)
		return s
	}
	v := jobgraph.Vertex{Config: s.op.config}
	v.SetMonitorInterval(d)
	s.op.config = v.Config
	return s
}
