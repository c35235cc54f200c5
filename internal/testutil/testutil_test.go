package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records Fatalf and ends the calling goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fatalTB in its own goroutine and returns the
// message of its Fatalf ("" if none).
func run(fn func(t testing.TB)) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() { defer close(done); fn(f) }()
	<-done
	return f.msg
}

func TestCheckForReportsTheLastError(t *testing.T) {
	n := 0
	msg := run(func(tb testing.TB) {
		CheckFor(tb, 30*time.Millisecond, time.Millisecond, func() error {
			n++
			return fmt.Errorf("attempt %d: job is RUNNING, want FINISHED", n)
		})
	})
	if !strings.Contains(msg, fmt.Sprintf("attempt %d: job is RUNNING, want FINISHED", n)) || !strings.Contains(msg, "30ms") {
		t.Fatalf("message %q does not carry the last error (attempt %d) and the timeout", msg, n)
	}
	if n < 2 {
		t.Fatalf("f called %d times in 30ms", n)
	}
}

func TestCheckForReturnsOnceMet(t *testing.T) {
	n := 0
	msg := run(func(tb testing.TB) {
		CheckFor(tb, 10*time.Second, time.Millisecond, func() error {
			if n++; n < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || n != 3 {
		t.Fatalf("msg %q after %d calls; want none after 3", msg, n)
	}
}
