package wasmhost

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// logSink routes an instance's output (stdout, stderr and the log import)
// to its logger, line by line, within a byte budget. Each line costs its
// message plus lineOverheadBytes, so empty lines cost what they really write
// too. Beyond the budget output is dropped, with one warning when that
// starts and a count at close.
type logSink struct {
	mu           sync.Mutex
	logger       *slog.Logger
	budget       int64
	used         int64
	dropped      int64
	droppedLines int64
	// The first and last bytes of what stderr got during the current call,
	// for GuestError.Output: a Go guest prints the reason of a fatal error
	// first and then every goroutine's stack. While planning, stdout and
	// the log import are kept too: nobody sees a plan's log otherwise.
	head, tail []byte
	skipped    int64
	keepAll    bool
}

const (
	headBytes    = 2 << 10
	tailBytes    = 2 << 10
	maxLineBytes = 16 << 10
	// lineOverheadBytes is what a TaskManager writes around one line's
	// message: time, level and the tm, job, task, tenant, subtask, module
	// and stream attributes. Measured as 266 bytes for an empty line of
	// the log import on `sluice run --local` (text handler, default
	// tenant) while job, task and tenant were written twice; a line now
	// carries about 60 bytes less, and the charge stays the figure
	// docs/ABI.md gives guests.
	lineOverheadBytes = 266
)

// clampLevel maps a guest's log level onto the four the ABI names, so a
// guest cannot print "ERROR+1000000" or hide below every handler's level.
func clampLevel(l int32) slog.Level {
	return slog.Level(min(max(l, int32(slog.LevelDebug)), int32(slog.LevelError)))
}

func (s *logSink) log(level slog.Level, stream string, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keepAll {
		s.keepStderr(msg)
		s.keepStderr([]byte{'\n'})
	}
	s.logLocked(level, stream, msg)
}

func (s *logSink) logLocked(level slog.Level, stream string, msg []byte) {
	n := int64(len(msg)) + lineOverheadBytes
	if s.used+n > s.budget {
		if s.droppedLines == 0 {
			s.logger.Warn("guest output dropped from here on: the instance used up its log budget (each line costs its length plus its attributes)",
				"max_log_bytes", s.budget, "line_overhead_bytes", lineOverheadBytes)
		}
		s.dropped += n
		s.droppedLines++
		return
	}
	s.used += n
	s.logger.LogAttrs(context.Background(), level, string(msg), slog.String("stream", stream))
}

func (s *logSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.droppedLines > 0 {
		s.logger.Warn("guest output dropped", "lines", s.droppedLines, "bytes_charged", s.dropped, "max_log_bytes", s.budget)
	}
}

// resetCall forgets the stderr kept for the previous call; keepAll keeps
// every stream for the next one.
func (s *logSink) resetCall(keepAll bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head, s.tail, s.skipped, s.keepAll = s.head[:0], s.tail[:0], 0, keepAll
}

// keepStderr remembers p within the head and tail bounds; caller holds mu.
func (s *logSink) keepStderr(p []byte) {
	if n := headBytes - len(s.head); n > 0 {
		if n > len(p) {
			n = len(p)
		}
		s.head = append(s.head, p[:n]...)
		p = p[n:]
	}
	if len(p) > tailBytes {
		// Only p's end can stay: do not copy the rest (a guest may write
		// all its memory at once).
		s.skipped += int64(len(s.tail) + len(p) - tailBytes)
		s.tail = append(s.tail[:0], p[len(p)-tailBytes:]...)
		return
	}
	s.tail = append(s.tail, p...)
	if over := len(s.tail) - tailBytes; over > 0 {
		s.skipped += int64(over)
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
}

// stderrOfCall returns what the guest wrote to stderr during the current
// call: all of it, or its head and tail.
func (s *logSink) stderrOfCall() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped == 0 {
		return string(s.head) + string(s.tail)
	}
	return fmt.Sprintf("%s\n... (%d bytes skipped) ...\n%s", s.head, s.skipped, s.tail)
}

// streamWriter is the io.Writer wazero writes a guest's stdout or stderr to.
type streamWriter struct {
	s       *logSink
	stream  string
	level   slog.Level
	partial []byte
	keep    bool // keep a tail for error reports (stderr)
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.keep || w.s.keepAll {
		w.s.keepStderr(p)
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.partial = append(w.partial, rest...)
			if len(w.partial) >= maxLineBytes {
				w.s.logLocked(w.level, w.stream, w.partial)
				w.partial = w.partial[:0]
			}
			break
		}
		line := rest[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line...)
			w.partial = w.partial[:0]
		}
		w.s.logLocked(w.level, w.stream, line)
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (w *streamWriter) flush() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if len(w.partial) > 0 {
		w.s.logLocked(w.level, w.stream, w.partial)
		w.partial = w.partial[:0]
	}
}

// discardLogger drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
