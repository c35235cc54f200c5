package admit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

func TestPerKeyBoundDoesNotHoldUpOtherKeys(t *testing.T) {
	ctx := context.Background()
	g := New(3, 2, 4)
	var rels []func()
	for i := 0; i < 2; i++ {
		rel, err := g.Acquire(ctx, "hostile")
		if err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	// A third of the same key waits...
	admitted := make(chan func(), 1)
	go func() {
		rel, err := g.Acquire(ctx, "hostile")
		if err != nil {
			t.Error(err)
		}
		admitted <- rel
	}()
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.waiting["hostile"] != 1 {
			return errors.New("not waiting yet")
		}
		return nil
	})
	// ...while another key goes at once, past the waiter.
	rel, err := g.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if k, all := g.Held("other"); k != 1 || all != 3 {
		t.Fatalf("held %d of %d", k, all)
	}
	select {
	case <-admitted:
		t.Fatal("the hostile key's third caller got past its bound")
	default:
	}
	rels[0]()
	rels[0]() // twice is harmless
	(<-admitted)()
	rel()
	rels[1]()
	if k, all := g.Held("hostile"); k != 0 || all != 0 {
		t.Fatalf("after release: %d of %d", k, all)
	}
}

func TestQueueFullIsBusy(t *testing.T) {
	ctx := context.Background()
	g := New(1, 1, 0)
	rel, err := g.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	if _, err := g.Acquire(ctx, "a"); !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy, got %v", err)
	}
}

func TestCanceledWaiterLeaves(t *testing.T) {
	g := New(1, 1, 1)
	rel, err := g.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Acquire(ctx, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("want canceled, got %v", err)
	}
	rel()
	rel2, err := g.Acquire(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	rel2()
	if _, all := g.Held(""); all != 0 {
		t.Fatalf("%d held", all)
	}
}
