package logring

import (
	"sync"

	"github.com/sluicehq/sluice/internal/control"
)

// lineOverhead is what a kept line costs beyond its strings: the struct
// and the slice slot, roughly.
const lineOverhead = 160

// Ring is a bounded buffer of log lines, safe for concurrent use.
type Ring struct {
	mu       sync.Mutex
	maxLines int
	maxBytes int64
	lines    []control.LogLine // circular; start is the oldest
	start    int
	n        int
	bytes    int64
	next     uint64 // Seq of the next line added
}

// New returns a Ring keeping at most maxLines lines and maxBytes bytes
// (each line costs its strings plus about 160 bytes); a line larger than
// maxBytes alone is kept cut to fit. Both must be positive.
func New(maxLines int, maxBytes int64) *Ring {
	return &Ring{maxLines: max(maxLines, 1), maxBytes: max(maxBytes, lineOverhead+1), next: 1}
}

func cost(l *control.LogLine) int64 {
	return int64(len(l.Message)+len(l.Attrs)+len(l.Source)+len(l.JobID)+len(l.Task)+len(l.TaskManager)) + lineOverhead
}

// Add appends l, numbering it (its Seq and Dropped are set here) and
// dropping the oldest lines while the ring is over its bounds.
func (r *Ring) Add(l control.LogLine) {
	if c := cost(&l); c > r.maxBytes {
		room := r.maxBytes - (c - int64(len(l.Message)+len(l.Attrs)))
		l.Attrs = ""
		if room < int64(len(l.Message)) {
			l.Message = l.Message[:max(room, 0)]
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l.Seq, l.Dropped = r.next, 0
	r.next++
	c := cost(&l)
	for r.n > 0 && (r.n >= r.maxLines || r.bytes+c > r.maxBytes) {
		r.bytes -= cost(&r.lines[r.start])
		r.lines[r.start] = control.LogLine{}
		r.start = (r.start + 1) % len(r.lines)
		r.n--
	}
	if len(r.lines) < r.maxLines && r.n == len(r.lines) {
		// Grow lazily: most tasks log a few lines.
		grown := make([]control.LogLine, min(max(2*len(r.lines), 16), r.maxLines))
		for i := 0; i < r.n; i++ {
			grown[i] = r.lines[(r.start+i)%len(r.lines)]
		}
		r.lines, r.start = grown, 0
	}
	r.lines[(r.start+r.n)%len(r.lines)] = l
	r.n++
	r.bytes += c
}

// Read returns the kept lines after Seq after that keep accepts (nil keeps
// every line), oldest first, at most limit of them (the newest; limit 0
// means control.MaxLogLines). The first line returned says in Dropped how
// many lines after after are gone: dropped by the ring, or skipped for
// limit. Lines keep refused are not counted.
func (r *Ring) Read(after uint64, limit int, keep func(*control.LogLine) bool) []control.LogLine {
	if limit <= 0 || limit > control.MaxLogLines {
		limit = control.MaxLogLines
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []control.LogLine
	var gone uint64
	if r.n > 0 {
		if oldest := r.lines[r.start].Seq; after+1 < oldest {
			gone = oldest - after - 1
		}
	} else if after+1 < r.next {
		gone = r.next - after - 1
	}
	for i := 0; i < r.n; i++ {
		l := &r.lines[(r.start+i)%len(r.lines)]
		if l.Seq <= after || (keep != nil && !keep(l)) {
			continue
		}
		out = append(out, *l)
	}
	if len(out) > limit {
		gone += uint64(len(out) - limit)
		out = out[len(out)-limit:]
	}
	if gone > 0 && len(out) > 0 {
		out[0].Dropped = gone
	}
	return out
}

// Last returns the Seq of the newest line added, 0 before the first.
func (r *Ring) Last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next - 1
}
