package rpcserver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cloudwego/kitex/pkg/kerrors"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
)

// roundTrip sends err through the wire form, as an RPC does.
func roundTrip(err error) error { return rpcserver.FromCall(rpcserver.ToWire(err)) }

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		code     common.ErrorCode
		msg      string
		is, isnt []error
	}{
		{"not found", rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", "x"),
			common.ErrorCode_NOT_FOUND, `job "x" not found`,
			[]error{rpcerr.ErrNotFound, rpcerr.ErrJobNotFound}, []error{rpcerr.ErrModuleNotFound, rpcerr.ErrInvalidArgument}},
		{"not enough slots", fmt.Errorf("request slots: %w", rpcerr.NotEnoughSlots(4, 2)),
			common.ErrorCode_RESOURCE_EXHAUSTED, "request slots: not enough slots: need 4, free 2",
			[]error{rpcerr.ErrNotEnoughSlots, rpcerr.ErrResourceExhausted}, []error{rpcerr.ErrUnavailable}},
		{"wrapped sentinel", fmt.Errorf("deploy task t1: %w", rpcerr.ErrStaleFencingToken),
			common.ErrorCode_STALE_FENCING_TOKEN, "deploy task t1: stale fencing token",
			[]error{rpcerr.ErrStaleFencingToken}, []error{rpcerr.ErrInternal}},
		{"invalid graph", fmt.Errorf("%w: cycle through vertices 1 -> 2 -> 1", jobgraph.ErrInvalidGraph),
			common.ErrorCode_INVALID_ARGUMENT, "invalid job graph: cycle through vertices 1 -> 2 -> 1",
			[]error{rpcerr.ErrInvalidArgument, jobgraph.ErrInvalidGraph}, []error{rpcerr.ErrInvalidModule}},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded),
			common.ErrorCode_DEADLINE_EXCEEDED, "wait: context deadline exceeded",
			[]error{rpcerr.ErrDeadlineExceeded, context.DeadlineExceeded}, nil},
		{"canceled", context.Canceled, common.ErrorCode_UNAVAILABLE, "context canceled",
			[]error{context.Canceled, rpcerr.ErrUnavailable}, nil},
		{"plain", errors.New("boom"), common.ErrorCode_UNKNOWN, "boom",
			[]error{rpcerr.ErrUnknown}, []error{rpcerr.ErrInternal}},
		{"unauthenticated", rpcerr.ErrUnauthenticated, common.ErrorCode_UNAUTHENTICATED, "unauthenticated",
			[]error{rpcerr.ErrUnauthenticated}, []error{rpcerr.ErrPermissionDenied}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := rpcserver.ToSluiceError(tt.err)
			if w.Code != tt.code || w.Message != tt.msg {
				t.Fatalf("wire = %v %q, want %v %q", w.Code, w.Message, tt.code, tt.msg)
			}
			if got := rpcerr.CodeOf(tt.err); common.ErrorCode(got) != tt.code {
				t.Errorf("server: CodeOf = %v, want %v", got, tt.code)
			}
			// The client's error answers errors.Is for the code's sentinel and
			// the specific one, whichever the server used.
			for _, side := range []struct {
				name string
				err  error
			}{{"client", roundTrip(tt.err)}, {"client twice", roundTrip(roundTrip(tt.err))}} {
				if side.err.Error() != tt.msg {
					t.Errorf("%s: message %q, want %q", side.name, side.err.Error(), tt.msg)
				}
				for _, target := range tt.is {
					if !errors.Is(side.err, target) {
						t.Errorf("%s: errors.Is(%v) = false", side.name, target)
					}
				}
				for _, target := range tt.isnt {
					if errors.Is(side.err, target) {
						t.Errorf("%s: errors.Is(%v) = true", side.name, target)
					}
				}
			}
		})
	}
}

func TestNil(t *testing.T) {
	if rpcserver.ToWire(nil) != nil || rpcserver.FromCall(nil) != nil || rpcserver.FromWire(nil) != nil || rpcserver.ToSluiceError(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}

func TestFromCallTransport(t *testing.T) {
	err := rpcserver.FromCall(kerrors.ErrRPCTimeout)
	if !errors.Is(err, rpcerr.ErrDeadlineExceeded) || !errors.Is(err, kerrors.ErrRPCTimeout) {
		t.Fatalf("timeout: %v", err)
	}
	err = rpcserver.FromCall(fmt.Errorf("dial: %w", kerrors.ErrGetConnection))
	if !errors.Is(err, rpcerr.ErrUnreachable) || !errors.Is(err, rpcerr.ErrUnavailable) || rpcerr.CodeOf(err) != rpcerr.CodeUnavailable {
		t.Fatalf("no connection: %v", err)
	}
	err = rpcserver.FromCall(fmt.Errorf("read: %w", kerrors.ErrRemoteOrNetwork))
	if !errors.Is(err, rpcerr.ErrUnreachable) {
		t.Fatalf("broken connection: %v", err)
	}
	err = rpcserver.FromCall(errors.New("undeclared exception"))
	if errors.Is(err, rpcerr.ErrUnreachable) || !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Fatalf("undeclared error: %v", err)
	}
	// A server's own UNAVAILABLE (its blob store is down, say) does not
	// make it unreachable.
	if errors.Is(roundTrip(rpcerr.Errorf(rpcerr.ErrUnavailable, "blob store down")), rpcerr.ErrUnreachable) {
		t.Fatal("a declared UNAVAILABLE reads as unreachable")
	}
}

// TestCodesMatchTheWire: rpcerr's codes are common.ErrorCode's, name for
// name, so a code crosses the wire as itself.
func TestCodesMatchTheWire(t *testing.T) {
	for c := rpcerr.CodeUnknown; c <= rpcerr.CodeInternal; c++ {
		if w := common.ErrorCode(c).String(); w != c.String() {
			t.Errorf("code %d is %s here and %s on the wire", c, c, w)
		}
	}
}
