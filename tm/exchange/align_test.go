package exchange

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
)

// Barrier alignment: a blocked channel's elements stay queued, its producer
// runs out of credit, the other channel flows on, and UnblockAll (called
// while another goroutine waits in Next, as the task's gate readers do)
// lets everything through in order.
func TestBlockHoldsBackAChannel(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			const credits, post = 2, 300
			tp := newTopology(t, mode, 2, 1, Config{BufferSize: 256, Credits: credits, FlushTimeout: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "al", Producers: 2}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if err := g.Block(0); err == nil {
				t.Fatal("Block of a producer without a channel: no error")
			}

			var fastWritten atomic.Int64
			fastDone := make(chan error, 1)
			release := make(chan struct{})
			slowDone := make(chan error, 1)
			open := func(p int) *ResultWriter {
				w, err := tp.prod[p].OpenOutput(ctx, control.OutputSpec{ResultID: "al", Partitioner: jobgraph.Rebalance, Targets: tp.targets()}, p, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { w.Close() })
				return w
			}
			fast, slow := open(0), open(1)
			go func() { // producer 0: a record, the barrier, then many records
				err := fast.Write(ctx, []abi.Record{rec("", "0:pre")})
				if err == nil {
					err = fast.EmitBarrier(ctx, 1)
				}
				for i := 0; err == nil && i < post; i++ {
					err = fast.Write(ctx, []abi.Record{rec("", fmt.Sprintf("0:%04d", i))})
					fastWritten.Add(1)
				}
				if err == nil {
					err = fast.Finish(ctx)
				}
				fastDone <- err
			}()
			go func() { // producer 1: a record, then the barrier only when released
				err := slow.Write(ctx, []abi.Record{rec("", "1:pre")})
				if err == nil {
					err = slow.Flush(ctx)
				}
				if err == nil {
					<-release
					err = slow.EmitBarrier(ctx, 1)
				}
				if err == nil {
					err = slow.Write(ctx, []abi.Record{rec("", "1:post")})
				}
				if err == nil {
					err = slow.Finish(ctx)
				}
				slowDone <- err
			}()

			var seen []string
			read := func() Batch {
				t.Helper()
				b, err := g.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if b.IsEvent() {
					seen = append(seen, fmt.Sprintf("%d:%v", b.Producer, b.Event))
				}
				for _, r := range b.Records {
					seen = append(seen, string(r.Value))
				}
				return b
			}
			// Up to the fast producer's barrier, then block its channel.
			for {
				if b := read(); b.Producer == 0 && b.Event.Type == CheckpointBarrier {
					break
				}
			}
			if err := g.Block(0); err != nil {
				t.Fatal(err)
			}
			if got := g.Blocked(); len(got) != 1 || got[0] != 0 {
				t.Fatalf("Blocked() = %v, want [0]", got)
			}
			// The slow producer's record still comes through.
			for !contains(seen, "1:pre") {
				if b := read(); b.Producer == 0 {
					t.Fatalf("an element of the blocked channel came through: %v", seen)
				}
			}
			// The fast producer fills its credits and then waits.
			testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
				if n := queued(g, 0); n != credits {
					return fmt.Errorf("the blocked channel queued %d buffers, want its %d credits", n, credits)
				}
				return nil
			})
			if n := fastWritten.Load(); n >= post {
				t.Fatalf("the blocked producer wrote all %d records", n)
			}
			select {
			case err := <-fastDone:
				t.Fatalf("the blocked producer finished (%v)", err)
			default:
			}

			// The slow barrier arrives; block that channel too: both wait.
			close(release)
			b := read()
			if b.Producer != 1 || b.Event != (Event{Type: CheckpointBarrier, CheckpointID: 1}) {
				t.Fatalf("got %+v, want the slow producer's barrier", b)
			}
			if err := g.Block(1); err != nil {
				t.Fatal(err)
			}
			// A reader waiting in Next is woken by UnblockAll.
			type res struct {
				b   Batch
				err error
				rec string
			}
			next := make(chan res, 1)
			go func() {
				b, err := g.Next(ctx)
				r := res{b: b, err: err}
				if len(b.Records) > 0 {
					r.rec = string(b.Records[0].Value)
				}
				next <- r
			}()
			g.UnblockAll()
			r := <-next
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(g.Blocked()) != 0 {
				t.Fatalf("still blocked: %v", g.Blocked())
			}
			if r.rec != "" {
				seen = append(seen, r.rec)
				for _, rr := range r.b.Records[1:] {
					seen = append(seen, string(rr.Value))
				}
			}
			for {
				b, err := g.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range b.Records {
					seen = append(seen, string(r.Value))
				}
			}
			if err := <-fastDone; err != nil {
				t.Fatal(err)
			}
			if err := <-slowDone; err != nil {
				t.Fatal(err)
			}
			// Every record once, each producer's in order.
			want := 0
			for _, s := range seen {
				if len(s) == 6 && s[:2] == "0:" && s != "0:pre" {
					if s != fmt.Sprintf("0:%04d", want) {
						t.Fatalf("got %s, want 0:%04d", s, want)
					}
					want++
				}
			}
			if want != post || !contains(seen, "1:post") {
				t.Fatalf("got %d records of the fast producer (want %d), 1:post: %v", want, post, contains(seen, "1:post"))
			}
		})
	}
}

func queued(g *InputGate, producer int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ic := g.byProd[producer]; ic != nil {
		return len(ic.q) - ic.qHead
	}
	return 0
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
