package task

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want control.FailureKind
	}{
		{fmt.Errorf("guest sluice_process: output r1: %w", exchange.ErrNoKey), control.FailureCause},
		{fmt.Errorf("output r1: %w: 9 bytes, limit 4", exchange.ErrRecordTooLarge), control.FailureCause},
		{&wasmhost.GuestError{Function: "sluice_process", Cause: wasmhost.ErrTrap, Message: "unreachable"}, control.FailureCause},
		{&wasmhost.GuestError{Function: "sluice_process", Cause: wasmhost.ErrGuestFailed, Message: "bad record"}, control.FailureCause},
		{&wasmhost.GuestError{Function: "sluice_process", Cause: wasmhost.ErrMemoryLimit}, control.FailureCause},
		{fmt.Errorf("%w: the collect sink", ErrCollectTooLarge), control.FailureCause},
		{fmt.Errorf("%w: bad token", exchange.ErrHandshake), control.FailureCause},
		{errors.New("something nobody foresaw"), control.FailureCause},
		{fmt.Errorf("task e: input r1 subtask 0, producer 1: %w: guest trapped", exchange.ErrProducerAborted), control.FailureConsequence},
		// The guest's emit hit a closed consumer: the host error aborted the call.
		{fmt.Errorf("guest sluice_process: output r1: %w: input r1 subtask 1", exchange.ErrChannelClosed), control.FailureConsequence},
		{fmt.Errorf("task e: %w: 127.0.0.1:4000: EOF", exchange.ErrConnectionLost), control.FailureConsequence},
		{fmt.Errorf("open output r1: %w: not reachable", exchange.ErrConsumerNotFound), control.FailureConsequence},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// A failure is classified only while the task's context is live: once it
// was canceled, whatever broke is the cancel's doing.
func TestFailedOnlyWhileLive(t *testing.T) {
	cause := fmt.Errorf("output r1: %w", exchange.ErrNoKey)
	var f *Failure
	if err := failed(context.Background(), cause); !errors.As(err, &f) || f.Kind != control.FailureCause || !errors.Is(err, exchange.ErrNoKey) {
		t.Fatalf("live: %#v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := failed(ctx, cause); errors.As(err, &f) {
		t.Fatalf("canceled: %#v", err)
	}
	if failed(context.Background(), nil) != nil {
		t.Fatal("nil is not a failure")
	}
}
