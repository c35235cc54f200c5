package jobmaster

import (
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/jm/jobmaster/checkpointing"
)

// A text source that follows its paths (Flink's continuous FileSource):
// a relist goroutine per such source calls Config.Discover every monitor
// interval and sends what it found to the loop (evDiscovered); the loop
// keeps the splits of the objects the attempt has not seen, appends them
// to the source's base splits (handed out by onSplit after those already
// there) and tells the checkpoint coordinator in the same step, so a
// checkpoint's remaining splits and its discovered keys always agree.
// The keys start each attempt as the restore point's (setKnown): an
// object found after that checkpoint is found again by the next relist.
//
// A kafka source's discovery is the same machinery: its splits are its
// partitions (jobgraph.KafkaSplitKey), a partition or topic created while
// the job runs is a key not seen before, and kafkaSplit hands each to the
// subtask that owns it. A subtask that took one keeps its offset in its
// own state, so the checkpoint's remaining splits are those no subtask
// has taken yet.

// evDiscovered is what one relist of a following source found.
type evDiscovered struct {
	vertex int
	splits []checkpoint.Split
	err    error
}

// followers returns the monitor interval of every text source of g that
// follows its paths, and the discovery interval of every kafka source
// that looks for new partitions.
func followers(g *jobgraph.Graph) (map[int]time.Duration, error) {
	out := map[int]time.Duration{}
	for i := range g.Vertices {
		v := &g.Vertices[i]
		if v.Kind == jobgraph.KindSource && v.Connector == jobgraph.ConnectorKafkaSource {
			s, err := v.Kafka()
			if err != nil {
				return nil, err
			}
			if s.Discovery > 0 {
				out[v.ID] = s.Discovery
			}
			continue
		}
		if v.Kind != jobgraph.KindSource || v.Connector != jobgraph.ConnectorText {
			continue
		}
		d, ok, err := v.MonitorInterval()
		if err != nil {
			return nil, err
		}
		if ok {
			out[v.ID] = d
		}
	}
	return out, nil
}

// startRelists starts the relist goroutine of every following source; each
// ends with the job.
func (jm *JobMaster) startRelists() {
	for v, every := range jm.follow {
		jm.goBG(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-jm.jobCtx.Done():
					return
				case <-t.C:
				}
				splits, err := jm.cfg.Discover(jm.jobCtx, v)
				if jm.jobCtx.Err() != nil || !jm.send(evDiscovered{vertex: v, splits: splits, err: err}) {
					return
				}
			}
		})
	}
}

// onDiscovered appends the splits of objects not seen before to the
// source's base splits. A failed relist is logged and the next one tried:
// a blob store that is down for a while delays new input, it does not fail
// the job.
func (jm *JobMaster) onDiscovered(ev evDiscovered) {
	if ev.err != nil {
		jm.log.Warn("relisting a following text source (or a kafka source's partitions) failed; trying again at the next interval", "vertex", ev.vertex, "every", jm.follow[ev.vertex], "err", ev.err)
		return
	}
	known := jm.known[ev.vertex]
	if known == nil || jm.state != Running {
		return // between attempts: the next relist finds them
	}
	var fresh []checkpoint.Split
	var keys []string
	for _, s := range ev.splits {
		if known[s.Key] {
			continue
		}
		fresh = append(fresh, s)
		if len(keys) == 0 || keys[len(keys)-1] != s.Key {
			keys = append(keys, s.Key)
		}
	}
	if len(fresh) == 0 {
		return
	}
	for _, k := range keys {
		known[k] = true
	}
	jm.base[ev.vertex] = append(jm.base[ev.vertex], fresh...)
	jm.log.Info("new input objects found", "vertex", ev.vertex, "objects", len(keys), "splits", len(fresh), "first", keys[0])
	jm.checkpointEvent(checkpointing.SplitsDiscovered{Vertex: ev.vertex, Splits: fresh, Keys: keys})
}

// setKnown sets the keys each following source has found, at the start
// of an attempt: the restore point's, or, from scratch (or from a
// checkpoint taken before the source followed), those of the splits the
// job was submitted with and those still to read.
func (jm *JobMaster) setKnown() {
	jm.known = map[int]map[string]bool{}
	for _, v := range jm.tracked() {
		known := map[string]bool{}
		if r := jm.restore; r != nil && r.Discovered[v] != nil {
			for _, k := range r.Discovered[v] {
				known[k] = true
			}
		} else {
			for _, s := range jm.cfg.Splits[v] {
				known[s.Key] = true
			}
			for _, s := range jm.base[v] {
				known[s.Key] = true
			}
		}
		// A kafka source's base may hold partitions created since the
		// restore point (kafkaBase): found now, not by the next relist.
		for _, s := range jm.base[v] {
			known[s.Key] = true
		}
		jm.known[v] = known
	}
}

// tracked returns the sources whose keys the checkpoints keep: every text
// source that follows its paths and every kafka source (with discovery or
// without: a restore then knows which partitions are new).
func (jm *JobMaster) tracked() []int {
	var out []int
	for _, t := range jm.tasks {
		v, ok := t.textSource()
		if _, following := jm.follow[v.ID]; ok && (following || v.Connector == jobgraph.ConnectorKafkaSource) {
			out = append(out, v.ID)
		}
	}
	return out
}

// kafkaBase is what a kafka source starts an attempt with after a restore
// point: the partitions no subtask had taken (rest), and those listed at
// submission (listed) that the restore point did not know, created since.
func kafkaBase(rest, listed []checkpoint.Split, known []string) []checkpoint.Split {
	out := slices.Clone(rest)
	for _, s := range listed {
		if !slices.Contains(known, s.Key) {
			out = append(out, s)
		}
	}
	return out
}

// knownKeys returns the keys each following source has found, sorted.
func (jm *JobMaster) knownKeys() map[int][]string {
	if len(jm.known) == 0 {
		return nil
	}
	out := map[int][]string{}
	for v, known := range jm.known {
		out[v] = slices.Sorted(maps.Keys(known))
	}
	return out
}

// kafkaSplit hands the subtask of a kafka source at parallelism the next
// partition it owns (jobgraph.KafkaPartitionOwner) that is not handed out
// yet. With none: no split yet when the source discovers partitions (it
// asks again at its discovery interval), done otherwise.
func (jm *JobMaster) kafkaSplit(r control.SplitRequest, parallelism int, all []checkpoint.Split) splitReply {
	if jm.handed == nil {
		jm.handed = map[int]map[int]bool{}
	}
	handed := jm.handed[r.VertexID]
	if handed == nil {
		handed = map[int]bool{}
		jm.handed[r.VertexID] = handed
	}
	for i, s := range all {
		if handed[i] {
			continue
		}
		topic, p, ok := jobgraph.ParseKafkaSplitKey(s.Key)
		if !ok || jobgraph.KafkaPartitionOwner(topic, p, parallelism) != r.Subtask {
			continue
		}
		handed[i] = true
		jm.log.Debug("partition assigned", "vertex", r.VertexID, "subtask", r.Subtask, "topic", topic, "partition", p)
		return splitReply{split: s}
	}
	_, following := jm.follow[r.VertexID]
	return splitReply{done: !following}
}
