package task

import (
	"context"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/tm/exchange"
)

// Failure is how Run reports a task that failed by itself, before anyone
// canceled it: the error and whether it is the task's own cause or the
// consequence of a failure elsewhere (Classify). A task that fails while
// being canceled returns its context's error instead.
//
// It is decided when the task fails, before its cleanup aborts its output
// channels: a cancel that arrives while the task is being torn down (the
// JobMaster reacting to a consequence this very failure caused downstream)
// does not turn the root cause into a cancellation.
type Failure struct {
	Kind control.FailureKind
	Err  error
}

func (f *Failure) Error() string { return f.Err.Error() }

// Unwrap lets errors.Is and errors.As see the task's error.
func (f *Failure) Unwrap() error { return f.Err }

// Classify says whether err, a task's failure, started in the task
// (control.FailureCause: a guest trap or ERROR status, a limit, a keyless
// or oversized record on an output, a module or split that cannot be read)
// or reached it from another task or TaskManager
// (control.FailureConsequence: see exchange.IsPeerFailure). What it does
// not recognise is a cause, so no failure is ever hidden as a consequence
// by mistake.
func Classify(err error) control.FailureKind {
	if exchange.IsPeerFailure(err) {
		return control.FailureConsequence
	}
	return control.FailureCause
}

// failed is err as Run returns it: a *Failure when the task failed while
// ctx was live, else err (the task was canceled).
func failed(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	return &Failure{Kind: Classify(err), Err: err}
}
