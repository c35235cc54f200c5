package jm

import (
	"context"
	"errors"
	"strings"

	"github.com/sluicehq/sluice/internal/admit"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/dispatcher"
	"github.com/sluicehq/sluice/wasmhost"
)

// Defaults of the plan gate (Config.MaxPlans, Config.MaxPlansPerTenant).
// Each plan instance may use up to its memory cap (PlanLimits, narrowed by
// the tenant's memory_bytes), so these bound the memory plans take on the
// JobManager: MaxPlans × the cap.
const (
	DefaultMaxPlans          = 4
	DefaultMaxPlansPerTenant = 2
	// planQueue callers of one tenant may wait for a plan place; more are
	// refused with ResourceExhausted.
	planQueue = 16
)

// wasmPlanner is the Dispatcher's Planner over wasmhost: it validates
// modules by compiling them and runs plans in the sandbox with limits.
type wasmPlanner struct {
	rt    *wasmhost.Runtime
	lim   wasmhost.Limits
	plans *admit.Gate
}

var _ dispatcher.Planner = wasmPlanner{}

// Validate compiles the module and keeps it in the runtime's cache: it is
// about to be planned, and compiling is the slow part.
func (p wasmPlanner) Validate(ctx context.Context, tenant string, wasm []byte) error {
	_, err := p.rt.CompileFor(ctx, tenant, wasm)
	return classifyWasm("invalid module", err)
}

func (p wasmPlanner) Plan(ctx context.Context, tenant string, wasm []byte, args []string, q control.TaskLimits) (*jobgraph.Graph, error) {
	release, err := p.plans.Acquire(ctx, tenant)
	if err != nil {
		if errors.Is(err, admit.ErrBusy) {
			return nil, rpcerr.Errorf(rpcerr.ErrResourceExhausted, "too many plans in progress (%v); retry when one of your submissions returns", err)
		}
		return nil, err
	}
	defer release()
	m, err := p.rt.CompileFor(ctx, tenant, wasm)
	if err != nil {
		return nil, classifyWasm("invalid module", err)
	}
	g, err := m.Plan(ctx, args, planLimits(p.lim, q))
	if err != nil {
		return nil, classifyWasm("plan of module "+m.Digest()+" failed", err)
	}
	return g, nil
}

// planLimits narrows the JobManager's plan limits by the tenant's quotas:
// a plan gets no more memory or time than the tenant's tasks do.
func planLimits(lim wasmhost.Limits, q control.TaskLimits) wasmhost.Limits {
	if lim.MemoryLimitBytes == 0 {
		lim.MemoryLimitBytes = wasmhost.DefaultMemoryLimitBytes
	}
	if lim.CallTimeout == 0 {
		lim.CallTimeout = wasmhost.DefaultCallTimeout
	}
	if q.MemoryBytes > 0 && uint64(q.MemoryBytes) < lim.MemoryLimitBytes {
		lim.MemoryLimitBytes = uint64(q.MemoryBytes)
	}
	if q.CallTimeout > 0 && q.CallTimeout < lim.CallTimeout {
		lim.CallTimeout = q.CallTimeout
	}
	if q.StateBytes > 0 && (lim.MaxStateBytes == 0 || q.StateBytes < lim.MaxStateBytes) {
		lim.MaxStateBytes = q.StateBytes
	}
	return lim
}

// classifyWasm gives wasmhost's errors their wire code: a bad module or a
// failing guest is the caller's to fix (the guest's message and stack trace
// are kept); too much work in progress is the tenant's to retry; anything
// else is the JobManager's.
func classifyWasm(what string, err error) error {
	var ge *wasmhost.GuestError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wasmhost.ErrInvalidModule) && strings.HasPrefix(err.Error(), what):
		// wasmhost's error already says "invalid module: ...".
		return rpcerr.Errorf(rpcerr.ErrInvalidModule, "%w", err)
	case errors.Is(err, wasmhost.ErrInvalidModule):
		return rpcerr.Errorf(rpcerr.ErrInvalidModule, "%s: %w", what, err)
	case errors.Is(err, wasmhost.ErrBusy):
		return rpcerr.Errorf(rpcerr.ErrResourceExhausted, "%w", err)
	case errors.As(err, &ge):
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s: %w", what, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	// The plan returned without a graph, or one that is not JSON: the
	// module's fault too.
	return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s: %w", what, err)
}
