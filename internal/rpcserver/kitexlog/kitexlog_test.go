package kitexlog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func newTest(lvl slog.Level) (*Logger, *bytes.Buffer, *time.Time) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: lvl,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	k := New(l, Options{Window: 10 * time.Second, Now: func() time.Time { return now }})
	return k, &buf, &now
}

func lines(b *bytes.Buffer) []string {
	s := strings.TrimSpace(b.String())
	b.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestLevelsMap(t *testing.T) {
	k, buf, now := newTest(slog.LevelDebug)
	ctx := context.Background()
	for _, tc := range []struct {
		log  func()
		want string
	}{
		{func() { k.Tracef("t %d", 1) }, `level=DEBUG msg="t 1" component=kitex`},
		{func() { k.Debug("d") }, `level=DEBUG msg=d component=kitex`},
		{func() { k.CtxInfof(ctx, "KITEX: server listen at addr=%s", "x") }, `level=DEBUG msg="server listen at addr=x" component=kitex`},
		{func() { k.Notice("n") }, `level=INFO msg=n component=kitex`},
		{func() { k.CtxWarnf(ctx, "w %s", "x") }, `level=WARN msg="w x" component=kitex`},
		{func() { k.Errorf("e %s", "x") }, `level=ERROR msg="e x" component=kitex`},
		// A retry of one attempt is detail: the call's error is the news.
		{func() {
			k.CtxWarnf(ctx, "KITEX: auto retry retryable error, to_service=%s, retry=%d error=%s", "dispatcher", 1, "dial")
		}, `level=DEBUG msg="auto retry retryable error, to_service=dispatcher, retry=1 error=dial" component=kitex`},
	} {
		*now = now.Add(time.Minute) // outside every window
		tc.log()
		if got := lines(buf); len(got) != 1 || got[0] != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestRetryNotesAreNotWarnings(t *testing.T) {
	k, buf, _ := newTest(slog.LevelWarn)
	for i := range 6 {
		k.CtxWarnf(context.Background(), "KITEX: auto retry retryable error, to_service=%s, retry=%d error=%s", "dispatcher", i+1, "refused")
	}
	if got := lines(buf); got != nil {
		t.Fatalf("a warn logger wrote Kitex's retry notes: %q", got)
	}
}

func TestRepeatsAreCountedAndSummarized(t *testing.T) {
	k, buf, now := newTest(slog.LevelInfo)
	const f = "KITEX: processing request error, remoteAddr=%s, error=%s"
	k.Errorf(f, "a:1", "EOF")
	for i := range 41 {
		*now = now.Add(200 * time.Millisecond)
		k.Errorf(f, "a:1", i) // same format, other arguments: the same message
	}
	k.Warnf("other %d", 1) // another message is not held back
	got := lines(buf)
	want := []string{
		`level=ERROR msg="processing request error, remoteAddr=a:1, error=EOF" component=kitex`,
		`level=WARN msg="other 1" component=kitex`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	*now = now.Add(10 * time.Second)
	k.Errorf(f, "a:1", "last")
	got = lines(buf)
	if len(got) != 1 || got[0] != `level=ERROR msg="processing request error, remoteAddr=a:1, error=last" component=kitex repeated=41 within=10s` {
		t.Fatalf("after the window: %q", got)
	}
	*now = now.Add(10 * time.Second)
	k.Errorf(f, "a:1", "again")
	if got := lines(buf); len(got) != 1 || strings.Contains(got[0], "repeated") {
		t.Fatalf("a count was carried over: %q", got)
	}
}

func TestFilterStaysBounded(t *testing.T) {
	k, buf, now := newTest(slog.LevelDebug)
	for i := range 3 * maxKeys {
		k.Info("m", i)
	}
	if n := len(lines(buf)); n != 3*maxKeys {
		t.Fatalf("%d distinct messages wrote %d lines", 3*maxKeys, n)
	}
	if len(k.seen) > maxKeys {
		t.Fatalf("remembers %d messages, bound %d", len(k.seen), maxKeys)
	}
	*now = now.Add(time.Minute)
	k.Info("fresh")
	if len(k.seen) > maxKeys || k.seen["fresh"] == nil {
		t.Fatalf("expired messages were not forgotten for a new one: %d", len(k.seen))
	}
}

func TestInstallRestoresOnlyItsOwnTarget(t *testing.T) {
	a := slog.New(slog.DiscardHandler)
	b := slog.New(slog.DiscardHandler)
	undoA := Install(a)
	if process.k.Target() != a {
		t.Fatal("Install did not set the target")
	}
	undoB := Install(b)
	undoA() // a is no longer the target: nothing changes
	if process.k.Target() != b {
		t.Fatal("restoring an older logger replaced the current one")
	}
	undoB()
	if process.k.Target() != a {
		t.Fatal("restore did not go back to the previous logger")
	}
	undoA()
}
