package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

const (
	// maxPartBytes is where the file sink rolls to a new part between
	// barriers, bounding the part it holds in memory.
	maxPartBytes = 64 << 20
	// maxUnuploadedBytes bounds the closed parts the sink keeps in memory
	// while the blob store refuses them; beyond it the task fails.
	maxUnuploadedBytes = 4 * maxPartBytes
)

// fileSink is the transactional file sink at a chain's tail: each record's
// value and "\n" go into the current part, held in memory. A part closes at
// each barrier (and when it reaches maxPartBytes, and at the end of input),
// is uploaded under its pending key, and is listed in the task's
// acknowledgements until a completed checkpoint covers it. The JobMaster
// commits parts (copies them to their final keys) once the checkpoint they
// were acknowledged with, or a later one, completes; the sink never writes
// a final key.
//
// The task's goroutine owns cur and seq; the upload goroutine reaches
// parts under mu.
type fileSink struct {
	store         blob.Store
	pendingPrefix string // tenants/<t>/jobs/<job>/pending/
	finalPrefix   string // tenants/<t>/files/<path>/
	name          string // <vertex>-<subtask>-a<attempt>
	job           string
	completed     func() int64 // the highest checkpoint notified completed

	cur []byte
	seq int // parts closed so far

	mu         sync.Mutex
	parts      []*sinkPart // closed, not yet covered by a completed checkpoint
	unuploaded int64
	lastErr    error
}

type sinkPart struct {
	checkpoint.SinkPart
	seq       int
	data      []byte // until uploaded
	ackedWith int64  // the first checkpoint whose ack listed it; 0: none yet
}

// sinkPath checks the file sink's path: relative, below the tenant's files,
// usable in a blob key.
func sinkPath(v jobgraph.Vertex) (string, error) {
	raw := v.SinkPath()
	p := strings.TrimSuffix(raw, "/")
	bad := func(why string) error {
		return fmt.Errorf("vertex %d (%s): file sink path %q %s; use a relative path such as \"results/wordcount\", which names a directory under the tenant's files", v.ID, v.Name, raw, why)
	}
	switch {
	case p == "":
		return "", bad("is empty (set the vertex config \"path\")")
	case strings.HasPrefix(p, "/"):
		return "", bad("is absolute")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return "", bad(fmt.Sprintf("has a %q segment", seg))
		}
	}
	if err := blob.ValidateKey(p); err != nil {
		return "", bad(fmt.Sprintf("is not usable as a blob key (%v)", err))
	}
	return p, nil
}

// newFileSink prepares the sink of a task; every key it will use is
// checked now, so a bad path or id fails the task before it runs.
func newFileSink(spec Spec, v jobgraph.Vertex, store blob.Store, completed func() int64) (*fileSink, error) {
	path, err := sinkPath(v)
	if err != nil {
		return nil, err
	}
	s, err := openFileSink(spec, path, fmt.Sprintf("%d-%d-a%d", v.ID, spec.Subtask, spec.Attempt), store, completed)
	if err != nil {
		return nil, fmt.Errorf("vertex %d (%s): %w", v.ID, v.Name, err)
	}
	return s, nil
}

// openFileSink prepares a sink whose parts are named name (unique in the
// job and the attempt) and are committed under path, relative to the
// tenant's files and already checked.
func openFileSink(spec Spec, path, name string, store blob.Store, completed func() int64) (*fileSink, error) {
	keys, err := blob.ForTenant(spec.Tenant)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	jobPrefix, err := keys.Job(spec.JobID)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	s := &fileSink{
		store:         store,
		pendingPrefix: jobPrefix + "pending/",
		finalPrefix:   keys.Prefix() + "files/" + path + "/",
		name:          name,
		job:           spec.JobID,
		completed:     completed,
	}
	if _, err := s.keys(0); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	return s, nil
}

// keys returns the pending and final keys of part seq. The sequence number
// is zero-padded so a directory lists its parts in order.
func (s *fileSink) keys(seq int) (checkpoint.SinkPart, error) {
	suffix := fmt.Sprintf("%s-%08d", s.name, seq)
	pending, err := blob.Join(s.pendingPrefix, suffix)
	if err != nil {
		return checkpoint.SinkPart{}, err
	}
	final, err := blob.Join(s.finalPrefix, "part-"+s.job+"-"+suffix)
	if err != nil {
		return checkpoint.SinkPart{}, err
	}
	return checkpoint.SinkPart{Pending: pending, Final: final}, nil
}

// write appends the records' values as lines. It reports true when the
// part reached maxPartBytes and was closed: the caller has it uploaded.
func (s *fileSink) write(recs []abi.Record) (rolled bool) {
	for i := range recs {
		v := recs[i].Value
		if len(s.cur) > 0 && len(s.cur)+len(v)+1 > maxPartBytes {
			s.closePart()
			rolled = true
		}
		if s.cur == nil {
			s.cur = make([]byte, 0, min(max(64<<10, len(v)+1), maxPartBytes))
		}
		s.cur = append(s.cur, v...)
		s.cur = append(s.cur, '\n')
	}
	return rolled
}

// closePart closes the current part, if it holds anything, and returns the
// number of parts closed so far.
func (s *fileSink) closePart() int {
	if len(s.cur) == 0 {
		return s.seq
	}
	p, err := s.keys(s.seq)
	if err != nil {
		panic(err) // checked by newFileSink: only seq changes
	}
	p.Size = int64(len(s.cur))
	s.mu.Lock()
	s.parts = append(s.parts, &sinkPart{SinkPart: p, seq: s.seq, data: s.cur})
	s.unuploaded += p.Size
	s.mu.Unlock()
	s.cur = nil
	s.seq++
	return s.seq
}

// unuploadedErr fails the task when the parts the blob store refused hold
// too much memory.
func (s *fileSink) unuploadedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unuploaded > maxUnuploadedBytes {
		return fmt.Errorf("file sink: %d bytes of closed parts could not be uploaded to the blob store (last error: %v)", s.unuploaded, s.lastErr)
	}
	return nil
}

// upload puts every part below seq upto that is not uploaded yet under its
// pending key, in order. A part that fails stays in memory for the next
// attempt.
func (s *fileSink) upload(ctx context.Context, upto int) error {
	for {
		s.mu.Lock()
		var p *sinkPart
		for _, c := range s.parts {
			if c.seq < upto && c.data != nil {
				p = c
				break
			}
		}
		s.mu.Unlock()
		if p == nil {
			return nil
		}
		// data is immutable once closed: upload without the lock.
		err := s.store.Put(ctx, p.Pending, bytes.NewReader(p.data), int64(len(p.data)))
		s.mu.Lock()
		if err != nil {
			err = fmt.Errorf("upload file-sink part %s: %w", p.Pending, err)
			s.lastErr = err
			s.mu.Unlock()
			return err
		}
		p.data = nil
		s.unuploaded -= p.Size
		s.mu.Unlock()
	}
}

// ackParts returns the parts below seq upto that no completed checkpoint
// covers yet, noting id as the checkpoint that first listed them. Covered
// parts are forgotten.
func (s *fileSink) ackParts(id int64, upto int) []checkpoint.SinkPart {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune()
	var out []checkpoint.SinkPart
	for _, p := range s.parts {
		if p.seq >= upto {
			break
		}
		if p.ackedWith == 0 {
			p.ackedWith = id
		}
		out = append(out, p.SinkPart)
	}
	return out
}

// remaining returns every part no completed checkpoint covers: what the
// task hands back at the end for the JobMaster's final commit.
func (s *fileSink) remaining() []checkpoint.SinkPart {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune()
	out := make([]checkpoint.SinkPart, 0, len(s.parts))
	for _, p := range s.parts {
		out = append(out, p.SinkPart)
	}
	return out
}

// prune forgets the parts a completed checkpoint covers: those first
// listed by a checkpoint at or below the newest completed one. Called with
// mu held.
func (s *fileSink) prune() {
	done := s.completed()
	kept := s.parts[:0]
	for _, p := range s.parts {
		if p.ackedWith > 0 && p.ackedWith <= done && p.data == nil {
			continue
		}
		kept = append(kept, p)
	}
	clear(s.parts[len(kept):])
	s.parts = kept
}

var errNoStore = errors.New("the task has no blob store (Deps.Blob)")
