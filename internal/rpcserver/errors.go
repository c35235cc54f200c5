package rpcserver

import (
	"errors"

	"github.com/cloudwego/kitex/pkg/kerrors"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// This file is the RPC edge of internal/rpcerr's table: the domain's coded
// errors become common.SluiceError on the way out and come back as the same
// codes on the way in, so errors.Is answers alike on both sides. rpcerr.Code
// values are those of common.ErrorCode.

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
	code, reason := rpcerr.Classify(err)
	w := &common.SluiceError{Code: common.ErrorCode(code), Message: err.Error()}
	if reason != "" {
		w.Reason = &reason
	}
	return w
}

// FromWire returns the local form of a wire error: an *rpcerr.Error with the
// same code, reason and message. It returns nil for nil.
func FromWire(se *common.SluiceError) error {
	if se == nil {
		return nil
	}
	return &rpcerr.Error{Code: rpcerr.Code(se.GetCode()), Reason: se.GetReason(), Message: se.GetMessage()}
}

// FromCall converts the error a generated Kitex client method returned: the
// declared exception becomes its local form (FromWire); a timeout becomes
// rpcerr.ErrDeadlineExceeded; a network failure (no connection, or one that
// broke during the call) becomes rpcerr.ErrUnreachable; any other transport
// failure (a peer that sent an undeclared error, say) becomes
// rpcerr.ErrUnavailable wrapping the original. It returns nil for nil.
func FromCall(err error) error {
	if err == nil {
		return nil
	}
	var se *common.SluiceError
	if errors.As(err, &se) {
		return FromWire(se)
	}
	var e *rpcerr.Error
	if errors.As(err, &e) {
		return err
	}
	msg := "rpc: " + err.Error()
	if kerrors.IsTimeoutError(err) {
		return rpcerr.Wrap(rpcerr.ErrDeadlineExceeded, msg, err)
	}
	if errors.Is(err, kerrors.ErrGetConnection) || errors.Is(err, kerrors.ErrRemoteOrNetwork) {
		return rpcerr.Wrap(rpcerr.ErrUnreachable, msg, err)
	}
	return rpcerr.Wrap(rpcerr.ErrUnavailable, msg, err)
}
