package kitexlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/kitex/pkg/klog"
)

// DefaultWindow is how long a repeated message stays summarized.
const DefaultWindow = 10 * time.Second

// maxKeys bounds the messages the repeat filter remembers.
const maxKeys = 256

// retryNote starts the line Kitex writes for each attempt of a call that
// failed to connect; the call's own error says the same once.
const retryNote = "KITEX: auto retry retryable error"

// Options configure a Logger; the zero value is the defaults.
type Options struct {
	// Window is how long after a message was written the same message is
	// counted instead of written; 0 means DefaultWindow.
	Window time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Logger is a klog.FullLogger that writes to a slog.Logger. It is safe for
// concurrent use; SetTarget changes the slog.Logger while Kitex uses it.
type Logger struct {
	target atomic.Pointer[slog.Logger]
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]*repeat // by format (or message without one)
}

type repeat struct {
	written time.Time // when the message was last written
	dropped int       // left out since then
}

var _ klog.FullLogger = (*Logger)(nil)

// New returns a Logger writing to l (discarded when nil).
func New(l *slog.Logger, o Options) *Logger {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	k := &Logger{window: o.Window, now: o.Now, seen: make(map[string]*repeat)}
	k.SetTarget(l)
	return k
}

// SetTarget makes the Logger write to l (discarded when nil).
func (k *Logger) SetTarget(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	k.target.Store(l)
}

// Target returns the slog.Logger the Logger writes to.
func (k *Logger) Target() *slog.Logger { return k.target.Load() }

// process is the Logger klog holds once Install has run.
var process struct {
	once sync.Once
	k    *Logger
}

// Install points Kitex's process-wide logger at l: the first call sets
// klog's logger (a Logger with default Options), later ones change its
// target. The returned function points it back at the previous target if
// it still writes to l, so a closed embedded cluster's logger does not
// keep Kitex's lines of the clusters after it.
//
// # Notes
//
// klog is a global of Kitex: in a process with several embedded clusters,
// Kitex's lines go to the last installed logger.
func Install(l *slog.Logger) (restore func()) {
	process.once.Do(func() {
		process.k = New(nil, Options{})
		klog.SetLogger(process.k)
	})
	k := process.k
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	prev := k.target.Swap(l)
	return func() { k.target.CompareAndSwap(l, prev) }
}

// level maps a Kitex level to slog's. Kitex's info lines (listening,
// graceful shutdown) restate what Sluice's own lines say, so in a Sluice
// process they are debug detail.
func level(lv klog.Level) slog.Level {
	switch lv {
	case klog.LevelTrace, klog.LevelDebug, klog.LevelInfo:
		return slog.LevelDebug
	case klog.LevelNotice:
		return slog.LevelInfo
	case klog.LevelWarn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// log writes one Kitex line. key identifies the message for the repeat
// filter: the format string, or the message when there is none.
func (k *Logger) log(ctx context.Context, lv klog.Level, key string, msg func() string) {
	l := k.target.Load()
	sl := level(lv)
	if strings.HasPrefix(key, retryNote) {
		sl = slog.LevelDebug
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, sl) && lv != klog.LevelFatal {
		return
	}
	dropped, ok := k.admit(key)
	if !ok && lv != klog.LevelFatal {
		return
	}
	attrs := []slog.Attr{slog.String("component", "kitex")}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("repeated", dropped), slog.Duration("within", k.window))
	}
	l.LogAttrs(ctx, sl, strings.TrimPrefix(msg(), "KITEX: "), attrs...)
	if lv == klog.LevelFatal {
		os.Exit(1) // klog's contract: Fatal ends the process
	}
}

// admit reports whether a message with key is written now, and how many
// like it were left out since it was last written.
func (k *Logger) admit(key string) (dropped int, ok bool) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.seen[key]
	if r != nil && now.Sub(r.written) < k.window {
		r.dropped++
		return 0, false
	}
	if r == nil {
		if len(k.seen) >= maxKeys {
			for key, old := range k.seen {
				if now.Sub(old.written) >= k.window {
					delete(k.seen, key)
				}
			}
			if len(k.seen) >= maxKeys {
				// Every remembered message is recent: write this one
				// without remembering it rather than forget a count.
				return 0, true
			}
		}
		r = &repeat{}
		k.seen[key] = r
	}
	dropped, r.dropped, r.written = r.dropped, 0, now
	return dropped, true
}

func sprint(v []any) (key string, msg func() string) {
	s := fmt.Sprint(v...)
	return s, func() string { return s }
}

func sprintf(format string, v []any) (key string, msg func() string) {
	return format, func() string { return fmt.Sprintf(format, v...) }
}

// Trace implements klog.Logger.
func (k *Logger) Trace(v ...any) { k.logv(nil, klog.LevelTrace, v) }

// Debug implements klog.Logger.
func (k *Logger) Debug(v ...any) { k.logv(nil, klog.LevelDebug, v) }

// Info implements klog.Logger.
func (k *Logger) Info(v ...any) { k.logv(nil, klog.LevelInfo, v) }

// Notice implements klog.Logger.
func (k *Logger) Notice(v ...any) { k.logv(nil, klog.LevelNotice, v) }

// Warn implements klog.Logger.
func (k *Logger) Warn(v ...any) { k.logv(nil, klog.LevelWarn, v) }

// Error implements klog.Logger.
func (k *Logger) Error(v ...any) { k.logv(nil, klog.LevelError, v) }

// Fatal implements klog.Logger: it logs at error and exits the process.
func (k *Logger) Fatal(v ...any) { k.logv(nil, klog.LevelFatal, v) }

// Tracef implements klog.FormatLogger.
func (k *Logger) Tracef(format string, v ...any) { k.logf(nil, klog.LevelTrace, format, v) }

// Debugf implements klog.FormatLogger.
func (k *Logger) Debugf(format string, v ...any) { k.logf(nil, klog.LevelDebug, format, v) }

// Infof implements klog.FormatLogger.
func (k *Logger) Infof(format string, v ...any) { k.logf(nil, klog.LevelInfo, format, v) }

// Noticef implements klog.FormatLogger.
func (k *Logger) Noticef(format string, v ...any) { k.logf(nil, klog.LevelNotice, format, v) }

// Warnf implements klog.FormatLogger.
func (k *Logger) Warnf(format string, v ...any) { k.logf(nil, klog.LevelWarn, format, v) }

// Errorf implements klog.FormatLogger.
func (k *Logger) Errorf(format string, v ...any) { k.logf(nil, klog.LevelError, format, v) }

// Fatalf implements klog.FormatLogger: it logs at error and exits.
func (k *Logger) Fatalf(format string, v ...any) { k.logf(nil, klog.LevelFatal, format, v) }

// CtxTracef implements klog.CtxLogger.
func (k *Logger) CtxTracef(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelTrace, format, v)
}

// CtxDebugf implements klog.CtxLogger.
func (k *Logger) CtxDebugf(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelDebug, format, v)
}

// CtxInfof implements klog.CtxLogger.
func (k *Logger) CtxInfof(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelInfo, format, v)
}

// CtxNoticef implements klog.CtxLogger.
func (k *Logger) CtxNoticef(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelNotice, format, v)
}

// CtxWarnf implements klog.CtxLogger.
func (k *Logger) CtxWarnf(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelWarn, format, v)
}

// CtxErrorf implements klog.CtxLogger.
func (k *Logger) CtxErrorf(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelError, format, v)
}

// CtxFatalf implements klog.CtxLogger: it logs at error and exits.
func (k *Logger) CtxFatalf(ctx context.Context, format string, v ...any) {
	k.logf(ctx, klog.LevelFatal, format, v)
}

// SetLevel implements klog.Control. It does nothing: the slog.Logger's
// handler decides what is written.
func (k *Logger) SetLevel(klog.Level) {}

// SetOutput implements klog.Control. It does nothing: the slog.Logger's
// handler decides where lines go.
func (k *Logger) SetOutput(io.Writer) {}

func (k *Logger) logv(ctx context.Context, lv klog.Level, v []any) {
	key, msg := sprint(v)
	k.log(ctx, lv, key, msg)
}

func (k *Logger) logf(ctx context.Context, lv klog.Level, format string, v []any) {
	key, msg := sprintf(format, v)
	k.log(ctx, lv, key, msg)
}
