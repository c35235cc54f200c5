package wasmhost

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// logSink routes an instance's output (stdout, stderr and the log import)
// to its logger, line by line, within a byte budget. Beyond the budget
// output is dropped, with one warning when that starts and a count at close.
type logSink struct {
	mu      sync.Mutex
	logger  *slog.Logger
	budget  int64
	used    int64
	dropped int64
	// The first and last bytes of what stderr got during the current call,
	// for GuestError.Output: a Go guest prints the reason of a fatal error
	// first and then every goroutine's stack.
	head, tail []byte
	skipped    int64
}

const (
	headBytes    = 2 << 10
	tailBytes    = 2 << 10
	maxLineBytes = 16 << 10
)

func (s *logSink) log(level slog.Level, stream string, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLocked(level, stream, msg)
}

func (s *logSink) logLocked(level slog.Level, stream string, msg []byte) {
	n := int64(len(msg))
	if s.used+n > s.budget {
		if s.dropped == 0 {
			s.logger.Warn("guest output truncated: the instance exceeded its log budget", "max_log_bytes", s.budget)
		}
		s.dropped += n
		return
	}
	s.used += n
	s.logger.LogAttrs(context.Background(), level, string(msg), slog.String("stream", stream))
}

func (s *logSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped > 0 {
		s.logger.Warn("guest output dropped", "bytes", s.dropped, "max_log_bytes", s.budget)
	}
}

// resetCall forgets the stderr kept for the previous call.
func (s *logSink) resetCall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head, s.tail, s.skipped = s.head[:0], s.tail[:0], 0
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
	if w.keep {
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
