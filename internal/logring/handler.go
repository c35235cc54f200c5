package logring

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/control"
)

// identityKeys are the attributes a LogLine has columns for (or that its
// ring implies): they are not repeated in Attrs.
var identityKeys = map[string]bool{"job": true, "task": true, "tenant": true, "subtask": true, "tm": true}

// Handler writes every record at or above its level into a Ring and passes
// it on to the next handler when that one is enabled for it. It remembers
// the identity attributes (job, task, tenant, subtask) given through
// WithAttrs or on the record in the line's fields, so a reader can keep
// one tenant's lines only.
type Handler struct {
	next   slog.Handler
	ring   *Ring
	level  slog.Level
	stamp  func(*control.LogLine) // fills the line's identity; may be nil
	prefix string                 // group prefix for attribute keys
	attrs  string                 // rendered WithAttrs attributes
	id     control.LogLine        // identity from WithAttrs: JobID, Task, Subtask, Tenant
}

// NewHandler returns a Handler writing records at level or above into
// ring, and every record next is enabled for into next (nil: none).
// stamp, when set, fills each line's identity fields (job, task...) before
// it is kept.
func NewHandler(next slog.Handler, ring *Ring, level slog.Level, stamp func(*control.LogLine)) *Handler {
	if next == nil {
		next = slog.DiscardHandler
	}
	return &Handler{next: next, ring: ring, level: level, stamp: stamp}
}

// Enabled reports whether the ring or the next handler wants level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.level || h.next.Enabled(ctx, level)
}

// Handle keeps r in the ring and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= h.level {
		l := h.id
		l.Time, l.Level, l.Message = r.Time, r.Level.String(), r.Message
		var b strings.Builder
		b.WriteString(h.attrs)
		r.Attrs(func(a slog.Attr) bool {
			h.identity(&l, a)
			appendAttr(&b, h.prefix, a)
			return true
		})
		l.Attrs = b.String()
		if h.stamp != nil {
			h.stamp(&l)
		}
		h.ring.Add(l)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// WithAttrs returns a Handler adding attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		h.identity(&c.id, a)
		appendAttr(&b, h.prefix, a)
	}
	c.attrs = b.String()
	return &c
}

// identity takes the identity attributes (outside any group) into l.
func (h *Handler) identity(l *control.LogLine, a slog.Attr) {
	if h.prefix != "" || !identityKeys[a.Key] {
		return
	}
	v := a.Value.Resolve()
	switch a.Key {
	case "job":
		l.JobID = v.String()
	case "task":
		l.Task = v.String()
	case "tenant":
		l.Tenant = v.String()
	case "subtask":
		if v.Kind() == slog.KindInt64 {
			l.Subtask = int(v.Int64())
		}
	}
}

// WithGroup returns a Handler qualifying later attributes with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.next = h.next.WithGroup(name)
	c.prefix = h.prefix + name + "."
	return &c
}

// maxAttrValue bounds one attribute value kept (an error with a guest's
// stack trace is kept whole up to this).
const maxAttrValue = 16 << 10

func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			appendAttr(b, p, g)
		}
		return
	}
	if prefix == "" && identityKeys[a.Key] {
		return
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(prefix)
	b.WriteString(a.Key)
	b.WriteByte('=')
	v := a.Value.String()
	if len(v) > maxAttrValue {
		v = v[:maxAttrValue]
		for !utf8.ValidString(v) && len(v) > 0 {
			v = v[:len(v)-1]
		}
		v += "..."
	}
	if v == "" || strings.ContainsAny(v, " =\"\n\t") || !utf8.ValidString(v) {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}
