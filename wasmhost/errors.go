package wasmhost

import (
	"errors"
	"fmt"
	"strings"
)

// Causes of a *GuestError, for errors.Is.
var (
	// ErrTrap: the guest executed a trap (unreachable, out-of-bounds access,
	// division by zero...) or misused the ABI (a bad pointer or length, a
	// malformed batch), which traps it too.
	ErrTrap = errors.New("trap")
	// ErrDeadline: a call took longer than Limits.CallTimeout.
	ErrDeadline = errors.New("call deadline exceeded")
	// ErrFuelLimit: a call used Limits.CallFuel: it stops at the same
	// check on every run with the same input.
	ErrFuelLimit = errors.New("call fuel limit exceeded")
	// ErrMemoryLimit: the guest needed more memory than Limits.MemoryLimitBytes
	// (or more state than Limits.MaxStateBytes).
	ErrMemoryLimit = errors.New("memory limit exceeded")
	// ErrStackOverflow: the guest's call stack (or a Go guest's goroutine
	// stack) overflowed.
	ErrStackOverflow = errors.New("stack overflow")
	// ErrExit: the guest called WASI proc_exit, e.g. a Go guest's unrecovered
	// panic or fatal runtime error, or os.Exit.
	ErrExit = errors.New("guest exited")
	// ErrGuestFailed: a guest export returned the error status, with the
	// reason it gave (the Go SDK reports a panic in user code this way,
	// with the Go stack).
	ErrGuestFailed = errors.New("guest reported failure")
	// ErrInvalidModule: Compile rejected the module; the message says why.
	ErrInvalidModule = errors.New("invalid module")
	// ErrBusy: the runtime has as many compiles of the caller's owner
	// running and waiting as it allows; retry when one ends.
	ErrBusy = errors.New("too many compiles in progress")
	// ErrClosed: the instance was closed, or failed before.
	ErrClosed = errors.New("instance closed")
)

// GuestError is a failure of guest code: a trap, a deadline, a limit, an
// exit, or an error the guest reported. The host is unaffected; the
// instance is unusable afterwards.
type GuestError struct {
	Digest   string // module digest, "sha256-<hex>"
	Function string // the guest export that was running, e.g. "sluice_process"
	Cause    error  // ErrTrap, ErrDeadline, ErrFuelLimit, ErrMemoryLimit, ErrStackOverflow, ErrExit, ErrGuestFailed
	Message  string // what happened, in the words of wazero, the host or the guest
	Stack    string // the Wasm stack trace with function names, innermost first, when there is one
	Output   string // the head and tail of the guest's stderr during the call, where a Go guest prints fatal errors (while planning: of all its output)
	Err      error  // the underlying error from wazero, if any
}

func (e *GuestError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "guest %s (module %s): %v", e.Function, shortDigest(e.Digest), e.Cause)
	if e.Message != "" && e.Message != e.Cause.Error() {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Stack != "" {
		fmt.Fprintf(&b, "\nwasm stack trace:\n\t%s", strings.ReplaceAll(e.Stack, "\n", "\n\t"))
	}
	if e.Output != "" {
		fmt.Fprintf(&b, "\nguest output (head and tail):\n%s", e.Output)
	}
	return b.String()
}

// Unwrap lets errors.Is match the Cause and the underlying error.
func (e *GuestError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Cause, e.Err}
	}
	return []error{e.Cause}
}

func shortDigest(d string) string {
	if len(d) > len("sha256-")+12 {
		return d[:len("sha256-")+12]
	}
	return d
}

// trapError is what a host function panics with when the guest misuses the
// ABI; wazero turns the panic into a trap of the guest call.
type trapError struct {
	msg   string
	cause error // ErrTrap or ErrMemoryLimit
}

func (e *trapError) Error() string { return e.msg }

func trapf(format string, args ...any) *trapError {
	return &trapError{msg: fmt.Sprintf(format, args...), cause: ErrTrap}
}

// hostAbort is what a host function panics with when the host side (the
// task's Emit) fails: the guest call stops and the caller gets err.
type hostAbort struct{ err error }

func (e *hostAbort) Error() string { return e.err.Error() }
func (e *hostAbort) Unwrap() error { return e.err }
