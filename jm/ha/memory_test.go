package ha

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMemoryOneLeaderAtATime(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	a, err := m.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := m.Campaign(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second campaign while a leads: %v", err)
	}
	m.Depose()
	<-a.Lost()
	if err := a.PutJob(ctx, Job{ID: "x"}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed write: %v", err)
	}
	b, err := m.Campaign(ctx)
	if err != nil || b.Session() <= a.Session() {
		t.Fatalf("b %v, %v", b, err)
	}
	if err := b.PutCheckpoint(ctx, "x", "x/1", 3); err != nil || m.Checkpoint("x") != "x/1" {
		t.Fatalf("checkpoint pointer: %v %q", err, m.Checkpoint("x"))
	}
}
