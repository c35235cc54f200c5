package rpcerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// TestClassify: each error travels with the code and reason of its most
// specific row, and an *Error answers errors.Is for its code's sentinel and
// its reason's. The wire round trip is tested in internal/rpcserver.
func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   rpcerr.Code
		reason string
		is     []error
	}{
		{"not found", rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", "x"), rpcerr.CodeNotFound, "JOB_NOT_FOUND",
			[]error{rpcerr.ErrNotFound, rpcerr.ErrJobNotFound}},
		{"not enough slots", fmt.Errorf("request slots: %w", rpcerr.NotEnoughSlots(4, 2)), rpcerr.CodeResourceExhausted, "NOT_ENOUGH_SLOTS",
			[]error{rpcerr.ErrNotEnoughSlots, rpcerr.ErrResourceExhausted}},
		{"wrapped sentinel", fmt.Errorf("deploy: %w", rpcerr.ErrStaleFencingToken), rpcerr.CodeStaleFencingToken, "", []error{rpcerr.ErrStaleFencingToken}},
		{"invalid graph", fmt.Errorf("%w: cycle", jobgraph.ErrInvalidGraph), rpcerr.CodeInvalidArgument, "INVALID_JOB_GRAPH", []error{jobgraph.ErrInvalidGraph}},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), rpcerr.CodeDeadlineExceeded, "", []error{context.DeadlineExceeded}},
		{"canceled", context.Canceled, rpcerr.CodeUnavailable, "CANCELED", []error{context.Canceled}},
		{"plain", errors.New("boom"), rpcerr.CodeUnknown, "", nil},
		{"wrap", rpcerr.Wrap(rpcerr.ErrUnreachable, "rpc: dial", errors.New("dial")), rpcerr.CodeUnavailable, "UNREACHABLE",
			[]error{rpcerr.ErrUnreachable, rpcerr.ErrUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, reason := rpcerr.Classify(tt.err); code != tt.code || reason != tt.reason {
				t.Fatalf("Classify = %v %q, want %v %q", code, reason, tt.code, tt.reason)
			}
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v) = false", target)
				}
			}
		})
	}
}

func TestErrorfKeepsCause(t *testing.T) {
	cause := errors.New("disk full")
	err := rpcerr.Errorf(rpcerr.ErrUnavailable, "store module: %w", cause)
	if !errors.Is(err, cause) || !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Fatalf("%v", err)
	}
}
