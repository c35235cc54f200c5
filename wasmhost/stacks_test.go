package wasmhost

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// hasFrame reports whether a frame of s contains name.
func hasFrame(s Stack, name string) bool {
	for _, f := range s.Frames {
		if strings.Contains(f, name) {
			return true
		}
	}
	return false
}

func TestStackOfALoopingGuestNamesItsFunction(t *testing.T) {
	tt := openTask(t, []string{"hostile", "loop"}, []int{2}, TaskConfig{Limits: Limits{CallTimeout: 5 * time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tt.in.Process(ctx, textRecords("x")) }()
	defer func() {
		cancel()
		<-done
	}()

	// Idle before the loop starts, or caught in it: poll until caught.
	var one StackProfile
	testutil.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		p, err := tt.in.SampleStacks(context.Background(), 0, 0)
		if err != nil {
			return err
		}
		if p.Total != 1 || len(p.Stacks) != 1 || !hasFrame(p.Stacks[0], "main.plan.hostile") {
			return fmt.Errorf("stack %+v: want one stack in main.plan.hostile", p)
		}
		one = p
		return nil
	})
	fs := one.Stacks[0].Frames
	if fs[len(fs)-1] == "" || strings.Contains(fs[len(fs)-1], "tick") {
		t.Errorf("innermost frame %q: want the guest's function, not the tick", fs[len(fs)-1])
	}
	t.Logf("stack: %s", strings.Join(fs, " <- "))

	p, err := tt.in.SampleStacks(context.Background(), 300*time.Millisecond, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var hot int64
	for _, s := range p.Stacks {
		if hasFrame(s, "main.plan.hostile") {
			hot += s.Count
		}
	}
	if p.Total < 2 || hot*2 <= p.Total {
		t.Fatalf("%d of %d samples in the looping function; want most: %+v", hot, p.Total, p.Stacks)
	}
	// A second sampler waits its turn.
	if _, err := tt.in.SampleStacks(context.Background(), 0, 0); err != nil {
		t.Fatalf("after a sample: %v", err)
	}
}

func TestStackOfAnIdleGuestIsEmpty(t *testing.T) {
	tt := openTask(t, []string{"identity"}, []int{2}, TaskConfig{})
	p, err := tt.in.SampleStacks(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 0 || len(p.Stacks) != 0 {
		t.Fatalf("an idle guest has stacks: %+v", p)
	}
}
