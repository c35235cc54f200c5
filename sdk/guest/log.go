package guest

import (
	"bytes"
	"context"
	"log/slog"
)

// maxStackBytes is the most stack one goroutine of a Go guest may use.
const maxStackBytes = 32 << 20

// Logger returns a logger whose records go to the task's log on the host,
// with the host's job and task attributes added there. Output written to
// os.Stdout and os.Stderr also reaches the task log, line by line.
func Logger() *slog.Logger { return slog.New(&hostHandler{}) }

// hostHandler formats a record as text and hands it to the host's log import
// at the record's level.
type hostHandler struct {
	attrs []slog.Attr
	group string
}

func (h *hostHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *hostHandler) Handle(ctx context.Context, r slog.Record) error {
	var buf bytes.Buffer
	var th slog.Handler = slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			// The host stamps time and level itself.
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		},
	})
	if len(h.attrs) > 0 {
		th = th.WithAttrs(h.attrs)
	}
	if h.group != "" {
		th = th.WithGroup(h.group)
	}
	if err := th.Handle(ctx, r); err != nil {
		return err
	}
	hostLog(int32(r.Level), string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))))
	return nil
}

func (h *hostHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &hostHandler{attrs: append(append([]slog.Attr(nil), h.attrs...), as...), group: h.group}
}

func (h *hostHandler) WithGroup(name string) slog.Handler {
	return &hostHandler{attrs: h.attrs, group: name}
}
