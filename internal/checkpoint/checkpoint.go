package checkpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trigger starts checkpoint ID at a source task.
type Trigger struct {
	ID          int64
	TimestampMs int64
	// Savepoint marks a checkpoint the user asked for.
	Savepoint bool
	// Stop asks sources to emit nothing after this barrier: the job stops
	// once the savepoint completes (stop-with-savepoint).
	Stop bool
	// Drain (with Stop) asks sources to send the maximum watermark before
	// the barrier, so every event-time timer fires before the savepoint
	// (Flink's stop --drain).
	Drain bool
}

// Split is a byte range of one blob object, read with the line rule of the
// text source: a split that does not start at 0 skips the partial line it
// starts in, and reads past its end to finish its last line.
type Split struct {
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

// ID names the split by its object and end offset, which stay the same when
// the split is cut by Rest.
func (s Split) ID() string { return s.Key + "@" + strconv.FormatInt(s.Offset+s.Length, 10) }

// Rest is the unread part of s when the next line to read starts at byte
// next of the object (s.Offset ≤ next ≤ end): the split from next to s's
// end. Under the line rule a split starting at a line's first byte reads
// that line, so the rest reads exactly the lines not read yet. ok is false
// when nothing is left.
func (s Split) Rest(next int64) (rest Split, ok bool) {
	end := s.Offset + s.Length
	if next >= end {
		return Split{}, false
	}
	if next <= s.Offset {
		return s, true
	}
	return Split{Key: s.Key, Offset: next, Length: end - next}, true
}

// SourcePosition is where a text-source subtask stands at a barrier.
type SourcePosition struct {
	// Finished are the IDs of the splits the subtask read to the end since
	// it started.
	Finished []string `json:"finished,omitempty"`
	// Current is the unread rest of the split being read; nil between
	// splits.
	Current *Split `json:"current,omitempty"`
}

// RemainingSplits is what a text source still has to read after a
// checkpoint: the splits that were left when the attempt started (base),
// minus those the subtasks finished, with the splits in progress cut to
// their unread rest. In-progress rests come first, so they are read first
// after a restore.
func RemainingSplits(base []Split, positions []SourcePosition) []Split {
	finished := map[string]bool{}
	current := map[string]Split{}
	var order []string
	for _, p := range positions {
		for _, id := range p.Finished {
			finished[id] = true
		}
		if p.Current != nil {
			id := p.Current.ID()
			if _, dup := current[id]; !dup {
				order = append(order, id)
			}
			current[id] = *p.Current
		}
	}
	var out []Split
	for _, id := range order {
		if !finished[id] {
			out = append(out, current[id])
		}
	}
	for _, s := range base {
		id := s.ID()
		if _, inProgress := current[id]; inProgress || finished[id] {
			continue
		}
		out = append(out, s)
	}
	return out
}

// StateHandle is one subtask's snapshot of wasmhost.State in the blob
// store.
type StateHandle struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// KeyGroupStart..KeyGroupEnd (inclusive) are the key groups the
	// snapshot holds.
	KeyGroupStart int `json:"key_group_start"`
	KeyGroupEnd   int `json:"key_group_end"`
}

// SinkPart is one part file of the transactional file sink: written under
// Pending, visible under Final once a checkpoint that covers it completes.
type SinkPart struct {
	Pending string `json:"pending"`
	Final   string `json:"final"`
	Size    int64  `json:"size"`
}

// Ack is a task's acknowledgement of checkpoint ID: its state has been
// uploaded.
type Ack struct {
	ExecutionID  string
	CheckpointID int64
	// State is the snapshot of the task's guest state; nil for a task
	// without guest operators.
	State *StateHandle
	// Source is set by text-source tasks.
	Source *SourcePosition
	// SinkParts are the file-sink parts the task closed and that no
	// completed checkpoint has committed yet (all of them, not only those
	// of this checkpoint: a part of an aborted checkpoint is committed by
	// the next one that completes).
	SinkParts []SinkPart
	// Alignment is how long the task waited for the barrier on all its
	// inputs (Flink's alignment duration); zero for a source or a task
	// with one input channel.
	Alignment time.Duration
	// Collected are the values of the records that reached the task's
	// collect sink before this checkpoint's barrier and that no
	// acknowledgement the task knows arrived has carried, in arrival
	// order; CollectedFrom is the task's index of the first (the task
	// counts its collected records from 0). The JobMaster skips the ones it
	// already has (an acknowledgement whose answer was lost is resent with
	// the next) and releases them to clients once a checkpoint at or after
	// this one completes, so what a client sees is never undone by a
	// restore.
	Collected     [][]byte
	CollectedFrom int64
}

// Decline is a task's refusal of checkpoint ID, e.g. because its state
// could not be uploaded.
type Decline struct {
	ExecutionID  string
	CheckpointID int64
	Reason       string
}

// TaskRestore is what one new subtask restores: every snapshot of the
// checkpoint's matching task whose key groups overlap its own.
type TaskRestore struct {
	CheckpointID int64
	States       []StateHandle
}

// TaskState is one subtask's entry in the metadata.
type TaskState struct {
	// Vertices are the ids of the chain's vertices, head first: a task of
	// a later job matches it when they share a vertex.
	Vertices    []int       `json:"vertices"`
	Subtask     int         `json:"subtask"`
	Parallelism int         `json:"parallelism"`
	State       StateHandle `json:"state"`
}

// TaskKey names a chain in state keys: its vertex ids joined by "_".
func TaskKey(vertices []int) string {
	s := make([]string, len(vertices))
	for i, v := range vertices {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, "_")
}

// StateObject is the name of a subtask's snapshot inside a checkpoint
// directory.
func StateObject(vertices []int, subtask int) string {
	return fmt.Sprintf("task-%s-%d.state", TaskKey(vertices), subtask)
}

// RestoreFor picks, from m, the snapshots a subtask of a chain with the
// given vertices must merge to hold key groups start..end (inclusive):
// those of tasks sharing a vertex with the chain, whose key groups overlap.
// At the same parallelism that is exactly the subtask's own snapshot.
func RestoreFor(m *Metadata, vertices []int, start, end int) *TaskRestore {
	r := &TaskRestore{CheckpointID: m.ID}
	for _, ts := range m.Tasks {
		if !slices.ContainsFunc(ts.Vertices, func(v int) bool { return slices.Contains(vertices, v) }) {
			continue
		}
		if ts.State.KeyGroupEnd < start || ts.State.KeyGroupStart > end {
			continue
		}
		r.States = append(r.States, ts.State)
	}
	return r
}
