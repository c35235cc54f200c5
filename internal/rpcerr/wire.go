package rpcerr

import (
	"errors"

	"github.com/cloudwego/kitex/pkg/kerrors"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
)

// ToWire returns err as the wire error a handler returns: nil for nil, else a
// *common.SluiceError with err's code, reason and full message. A handler
// must return exactly this value (Kitex only sends a *common.SluiceError as
// the declared exception; anything else becomes an opaque transport error).
func ToWire(err error) error {
	if err == nil {
		return nil
	}
	return ToSluiceError(err)
}

// ToSluiceError is ToWire with the concrete type, for code that fills a
// result's Err field itself. It returns nil for nil.
func ToSluiceError(err error) *common.SluiceError {
	if err == nil {
		return nil
	}
	var se *common.SluiceError
	if errors.As(err, &se) {
		return se // already wire form: pass through unchanged
	}
	code, reason := Classify(err)
	w := &common.SluiceError{Code: common.ErrorCode(code), Message: err.Error()}
	if reason != "" {
		w.Reason = &reason
	}
	return w
}

// FromWire returns the local form of a wire error: an *Error with the same
// code, reason and message. It returns nil for nil.
func FromWire(se *common.SluiceError) error {
	if se == nil {
		return nil
	}
	return &Error{Code: Code(se.GetCode()), Reason: se.GetReason(), Message: se.GetMessage()}
}

// FromCall converts the error a generated Kitex client method returned: the
// declared exception becomes its local form (FromWire); a timeout becomes
// ErrDeadlineExceeded; a network failure (no connection, or one that broke
// during the call) becomes ErrUnreachable; any other transport failure (a
// peer that sent an undeclared error, say) becomes ErrUnavailable wrapping
// the original. It returns nil for nil.
func FromCall(err error) error {
	if err == nil {
		return nil
	}
	var se *common.SluiceError
	if errors.As(err, &se) {
		return FromWire(se)
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if kerrors.IsTimeoutError(err) {
		return &Error{Code: CodeDeadlineExceeded, Message: "rpc: " + err.Error(), cause: err}
	}
	if errors.Is(err, kerrors.ErrGetConnection) || errors.Is(err, kerrors.ErrRemoteOrNetwork) {
		return &Error{Code: CodeUnavailable, Reason: "UNREACHABLE", Message: "rpc: " + err.Error(), cause: err}
	}
	return &Error{Code: CodeUnavailable, Message: "rpc: " + err.Error(), cause: err}
}
