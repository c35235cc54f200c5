package exchange

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/watermark"
)

// Watermarks travel in-band to every consumer subtask, after the records
// written before them; fed into a watermark.Valve per consumer (as a task
// does), the consumer's watermark is the minimum over its channels, and an
// idle channel holds it back no more.
func TestWatermarksReachEveryConsumerInBand(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			const producers, consumers = 2, 2
			tp := newTopology(t, mode, producers, consumers, Config{BufferSize: 256, Credits: 4, FlushTimeout: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			gates := make([]*InputGate, consumers)
			for c := range gates {
				g, err := tp.cons[c].OpenInput(ctx, control.InputSpec{ResultID: "wm", Producers: producers}, c)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				gates[c] = g
			}
			release := make(chan struct{})
			reached := make(chan struct{}, consumers)
			go func() {
				for range consumers {
					select {
					case <-reached:
					case <-ctx.Done():
						return
					}
				}
				close(release)
			}()
			// Producer 0: records at 10..19, watermark 15, records, watermark
			// 30, then it goes idle. Producer 1: records, watermark 20, then
			// watermark 40 after producer 0 went idle.
			script := [producers][]func(w *ResultWriter) error{
				{
					writeTimes(0, 10, 20), emitWM(15), writeTimes(0, 20, 35), emitWM(30),
					emitStatus(true), func(*ResultWriter) error { <-release; return nil },
				},
				// Both end only once both consumers reached 40, so 40 must
				// come from the minimum with producer 0 idle, not from an
				// end.
				{writeTimes(1, 0, 25), emitWM(20), emitWM(40), func(*ResultWriter) error { <-release; return nil }},
			}
			errs := make(chan error, producers)
			for p := range producers {
				w, err := tp.prod[p].OpenOutput(ctx, control.OutputSpec{ResultID: "wm", Partitioner: jobgraph.Hash, Targets: tp.targets()}, p, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				go func() {
					for _, step := range script[p] {
						if err := step(w); err != nil {
							errs <- err
							return
						}
					}
					errs <- w.Finish(ctx)
				}()
			}
			results := make(chan error, consumers)
			for c, g := range gates {
				go func() { results <- readWatermarks(ctx, c, g, producers, reached) }()
			}
			for range consumers {
				if err := <-results; err != nil {
					t.Fatal(err)
				}
			}
			for range producers {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// readWatermarks reads g to the end through a valve and checks what must
// hold whatever the interleaving of the two channels.
func readWatermarks(ctx context.Context, c int, g *InputGate, producers int, reached chan<- struct{}) error {
	v := watermark.NewValve(producers)
	var out []int64
	newest := map[int]int64{} // per producer: the newest record time so far
	// The newest record time each producer wrote before each watermark.
	before := map[int64]int64{15: 19, 30: 34, 20: 24, 40: 24}
	for {
		b, err := g.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		var u watermark.Update
		switch b.Event.Type {
		case 0:
			for _, r := range b.Records {
				newest[b.Producer] = max(newest[b.Producer], r.Time)
			}
			continue
		case Watermark:
			// In-band: every record before it has arrived.
			if want := before[b.Event.Timestamp]; newest[b.Producer] != want {
				return fmt.Errorf("consumer %d: watermark %d of producer %d after records up to %d, want %d", c, b.Event.Timestamp, b.Producer, newest[b.Producer], want)
			}
			u = v.Watermark(b.Producer, b.Event.Timestamp)
		case WatermarkStatus:
			u = v.Status(b.Producer, b.Event.Idle)
		case EndOfPartition:
			u = v.End(b.Producer)
		}
		if u.Advanced {
			out = append(out, u.Watermark)
			if u.Watermark == 40 {
				reached <- struct{}{}
			}
		}
	}
	// Producer 0's 15 and 30 are held back by producer 1's lower or
	// missing watermark until it sends 20 and 40; 40 passes once producer
	// 0 is idle, and Max once both ended. The interleaving of the channels
	// varies, so only what must hold is checked: the watermark increases,
	// takes only values a channel sent, and ends with 40, Max.
	for i := 1; i < len(out); i++ {
		if out[i] <= out[i-1] {
			return fmt.Errorf("consumer %d: watermarks %v do not increase", c, out)
		}
	}
	for _, w := range out {
		if w != 15 && w != 20 && w != 30 && w != 40 && w != watermark.Max {
			return fmt.Errorf("consumer %d: watermark %d is not one a channel sent (%v)", c, w, out)
		}
	}
	if n := len(out); n < 2 || out[n-2] != 40 || out[n-1] != watermark.Max {
		return fmt.Errorf("consumer %d: watermarks %v, want them to end with 40 and %d", c, out, watermark.Max)
	}
	return nil
}

func writeTimes(p int, from, to int64) func(w *ResultWriter) error {
	return func(w *ResultWriter) error {
		var recs []abi.Record
		for ts := from; ts < to; ts++ {
			// Two keys per time, so each consumer sees every time.
			for k := range 8 {
				recs = append(recs, abi.Record{Key: []byte(fmt.Sprintf("k%d", k)), HasKey: true, Value: []byte(fmt.Sprintf("%d:%d", p, ts)), Time: ts, HasTime: true})
			}
		}
		return w.Write(context.Background(), recs)
	}
}

func emitWM(ts int64) func(w *ResultWriter) error {
	return func(w *ResultWriter) error {
		return w.EmitEvent(context.Background(), Event{Type: Watermark, Timestamp: ts})
	}
}

func emitStatus(idle bool) func(w *ResultWriter) error {
	return func(w *ResultWriter) error {
		return w.EmitEvent(context.Background(), Event{Type: WatermarkStatus, Idle: idle})
	}
}

// A watermark on a channel blocked for barrier alignment waits behind the
// barrier with the channel's records.
func TestWatermarkWaitsBehindABlockedChannel(t *testing.T) {
	tp := newTopology(t, "local", 2, 1, Config{BufferSize: 256, Credits: 4, FlushTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "wb", Producers: 2}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ws := make([]*ResultWriter, 2)
	for p := range ws {
		if ws[p], err = tp.prod[p].OpenOutput(ctx, control.OutputSpec{ResultID: "wb", Partitioner: jobgraph.Rebalance, Targets: tp.targets()}, p, 0); err != nil {
			t.Fatal(err)
		}
		defer ws[p].Close()
	}
	if err := ws[0].EmitBarrier(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := ws[0].EmitEvent(ctx, Event{Type: Watermark, Timestamp: 100}); err != nil {
		t.Fatal(err)
	}
	b, err := g.Next(ctx)
	if err != nil || b.Event.Type != CheckpointBarrier {
		t.Fatalf("got %v, %v; want the barrier", b.Event, err)
	}
	if err := g.Block(0); err != nil {
		t.Fatal(err)
	}
	if err := ws[1].EmitEvent(ctx, Event{Type: Watermark, Timestamp: 50}); err != nil {
		t.Fatal(err)
	}
	if b, err = g.Next(ctx); err != nil || b.Producer != 1 || b.Event.Timestamp != 50 {
		t.Fatalf("got %d:%v, %v; want producer 1's watermark 50 while 0 is blocked", b.Producer, b.Event, err)
	}
	g.UnblockAll()
	if b, err = g.Next(ctx); err != nil || b.Producer != 0 || b.Event.Type != Watermark || b.Event.Timestamp != 100 {
		t.Fatalf("got %d:%v, %v; want producer 0's watermark 100 after the unblock", b.Producer, b.Event, err)
	}
}
