package jm

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/wasmhost"
)

// wasmPlanner is the Dispatcher's Planner over wasmhost: it validates
// modules by compiling them and runs plans in the sandbox with limits.
type wasmPlanner struct {
	rt  *wasmhost.Runtime
	lim wasmhost.Limits
}

var _ dispatcher.Planner = wasmPlanner{}

// Validate compiles the module and keeps it in the runtime's cache: it is
// about to be planned, and compiling is the slow part.
func (p wasmPlanner) Validate(ctx context.Context, wasm []byte) error {
	_, err := p.rt.Compile(ctx, wasm)
	return classifyWasm("invalid module", err)
}

func (p wasmPlanner) Plan(ctx context.Context, wasm []byte, args []string) (*jobgraph.Graph, error) {
	m, err := p.rt.Compile(ctx, wasm)
	if err != nil {
		return nil, classifyWasm("invalid module", err)
	}
	g, err := m.Plan(ctx, args, p.lim)
	if err != nil {
		return nil, classifyWasm("plan of module "+m.Digest()+" failed", err)
	}
	return g, nil
}

// classifyWasm gives wasmhost's errors their wire code: a bad module or a
// failing guest is the caller's to fix (the guest's message and stack trace
// are kept); anything else is the JobManager's.
func classifyWasm(what string, err error) error {
	var ge *wasmhost.GuestError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wasmhost.ErrInvalidModule):
		return rpcerr.Errorf(rpcerr.ErrInvalidModule, "%s: %w", what, err)
	case errors.As(err, &ge):
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s: %w", what, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	// The plan returned without a graph, or one that is not JSON: the
	// module's fault too.
	return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s: %w", what, err)
}
