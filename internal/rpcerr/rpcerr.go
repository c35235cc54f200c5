package rpcerr

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Code is the kind of an error, as it travels on the wire. The values are the
// ones of common.ErrorCode in idl/common.thrift (internal/rpcserver tests
// that they match).
type Code int32

// The codes, in the order of common.ErrorCode.
const (
	CodeUnknown            Code = 0
	CodeInvalidArgument    Code = 1
	CodeNotFound           Code = 2
	CodeAlreadyExists      Code = 3
	CodePermissionDenied   Code = 4
	CodeUnauthenticated    Code = 5
	CodeResourceExhausted  Code = 6
	CodeFailedPrecondition Code = 7
	CodeUnavailable        Code = 8
	CodeDeadlineExceeded   Code = 9
	CodeStaleFencingToken  Code = 10
	CodeInternal           Code = 11
)

var codeNames = [...]string{
	"UNKNOWN", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
	"UNAUTHENTICATED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "UNAVAILABLE",
	"DEADLINE_EXCEEDED", "STALE_FENCING_TOKEN", "INTERNAL",
}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("CODE_%d", int32(c))
}

// sentinel is the type of the package's sentinel errors. It is only ever
// compared by identity (errors.Is); *Error.Is matches it by code and reason.
type sentinel struct{ msg string }

func (s *sentinel) Error() string { return s.msg }

// Sentinel errors, one per code, and a few more specific ones that carry a
// reason on the wire. Check them with errors.Is on either side of an RPC.
var (
	ErrUnknown            error = &sentinel{"unknown error"}
	ErrInvalidArgument    error = &sentinel{"invalid argument"}
	ErrNotFound           error = &sentinel{"not found"}
	ErrAlreadyExists      error = &sentinel{"already exists"}
	ErrPermissionDenied   error = &sentinel{"permission denied"}
	ErrUnauthenticated    error = &sentinel{"unauthenticated"}
	ErrResourceExhausted  error = &sentinel{"resource exhausted"}
	ErrFailedPrecondition error = &sentinel{"failed precondition"}
	ErrUnavailable        error = &sentinel{"unavailable"}
	ErrDeadlineExceeded   error = &sentinel{"deadline exceeded"}
	ErrStaleFencingToken  error = &sentinel{"stale fencing token"}
	ErrInternal           error = &sentinel{"internal error"}

	// ErrNotEnoughSlots: a slot request could not be met in time
	// (RESOURCE_EXHAUSTED). Build it with NotEnoughSlots.
	ErrNotEnoughSlots error = &sentinel{"not enough slots"}
	// ErrInvalidModule: an uploaded module is not a valid Sluice Wasm module
	// (INVALID_ARGUMENT).
	ErrInvalidModule error = &sentinel{"invalid module"}
	// ErrModuleTooLarge: an uploaded module is over the size limit
	// (INVALID_ARGUMENT).
	ErrModuleTooLarge error = &sentinel{"module too large"}
	// ErrJobNotFound: no job with that id (NOT_FOUND).
	ErrJobNotFound error = &sentinel{"job not found"}
	// ErrModuleNotFound: no module with that digest (NOT_FOUND).
	ErrModuleNotFound error = &sentinel{"module not found"}
	// ErrUnreachable: a call failed on the network — no connection to the
	// peer, or one that broke during the call (UNAVAILABLE).
	// rpcserver.FromCall returns it; it never comes from a server.
	ErrUnreachable error = &sentinel{"unreachable"}
)

// mapping is one row of the table.
type mapping struct {
	err    error
	code   Code
	reason string // set for errors more specific than their code
}

// table is THE mapping, most specific rows first: Classify takes the first row
// the error matches; *Error.Is answers for a target by looking up its row.
// It is never modified.
var table = [...]mapping{
	{ErrNotEnoughSlots, CodeResourceExhausted, "NOT_ENOUGH_SLOTS"},
	{ErrInvalidModule, CodeInvalidArgument, "INVALID_MODULE"},
	{ErrModuleTooLarge, CodeInvalidArgument, "MODULE_TOO_LARGE"},
	{jobgraph.ErrInvalidGraph, CodeInvalidArgument, "INVALID_JOB_GRAPH"},
	{ErrJobNotFound, CodeNotFound, "JOB_NOT_FOUND"},
	{ErrModuleNotFound, CodeNotFound, "MODULE_NOT_FOUND"},
	{ErrUnreachable, CodeUnavailable, "UNREACHABLE"},
	{context.DeadlineExceeded, CodeDeadlineExceeded, ""},
	{context.Canceled, CodeUnavailable, "CANCELED"},

	{ErrUnknown, CodeUnknown, ""},
	{ErrInvalidArgument, CodeInvalidArgument, ""},
	{ErrNotFound, CodeNotFound, ""},
	{ErrAlreadyExists, CodeAlreadyExists, ""},
	{ErrPermissionDenied, CodePermissionDenied, ""},
	{ErrUnauthenticated, CodeUnauthenticated, ""},
	{ErrResourceExhausted, CodeResourceExhausted, ""},
	{ErrFailedPrecondition, CodeFailedPrecondition, ""},
	{ErrUnavailable, CodeUnavailable, ""},
	{ErrDeadlineExceeded, CodeDeadlineExceeded, ""},
	{ErrStaleFencingToken, CodeStaleFencingToken, ""},
	{ErrInternal, CodeInternal, ""},
}

func rowOf(target error) (mapping, bool) {
	for _, m := range table {
		if m.err == target {
			return m, true
		}
	}
	return mapping{}, false
}

// Error is an error with a code: what Errorf builds and what a client gets
// back from the wire. errors.Is(e, target) is true when target is the
// sentinel of e's code, or the specific sentinel of e's reason (so an error
// with reason NOT_ENOUGH_SLOTS is both ErrNotEnoughSlots and
// ErrResourceExhausted).
type Error struct {
	Code    Code
	Reason  string // "" or a row's reason, e.g. "NOT_ENOUGH_SLOTS"
	Message string
	cause   error // the local error it was built from, if any; not sent
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the local cause (a transport error, say), or nil.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is a sentinel e matches by code and reason.
func (e *Error) Is(target error) bool {
	m, ok := rowOf(target)
	if !ok {
		return false
	}
	return m.code == e.Code && (m.reason == "" || m.reason == e.Reason)
}

// Wrap returns an error of kind (as Errorf) with message as its text and
// cause as its local cause, reachable with errors.Is/As but never sent. The
// RPC edge uses it to classify transport failures.
func Wrap(kind error, message string, cause error) *Error {
	m, ok := rowOf(kind)
	if !ok {
		m = mapping{code: CodeUnknown}
	}
	return &Error{Code: m.code, Reason: m.reason, Message: message, cause: cause}
}

// Errorf returns an error of kind (a sentinel of this package, or any error
// in the table) whose message is exactly the formatted text. Arguments
// wrapped with %w stay reachable through errors.Is/As locally.
func Errorf(kind error, format string, args ...any) error {
	m, ok := rowOf(kind)
	if !ok {
		m = mapping{code: CodeUnknown}
	}
	err := fmt.Errorf(format, args...)
	return &Error{Code: m.code, Reason: m.reason, Message: err.Error(), cause: err}
}

// NotEnoughSlots returns ErrNotEnoughSlots with the message
// "not enough slots: need N, free M".
func NotEnoughSlots(need, free int) error {
	return Errorf(ErrNotEnoughSlots, "not enough slots: need %d, free %d", need, free)
}

// Classify returns the code and reason err travels with: those of the
// first *Error in its chain, else of the first table row it matches, else
// CodeUnknown.
func Classify(err error) (Code, string) {
	if err == nil {
		return CodeUnknown, ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code, e.Reason
	}
	for _, m := range table {
		if errors.Is(err, m.err) {
			return m.code, m.reason
		}
	}
	return CodeUnknown, ""
}

// CodeOf returns err's code (see Classify).
func CodeOf(err error) Code {
	c, _ := Classify(err)
	return c
}
