package exchange

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitBlockedOnCredit waits until w has spent every channel's credits and
// a goroutine waits in acquire for more: the state a test that releases a
// blocked writer starts from.
func waitBlockedOnCredit(t *testing.T, w *ResultWriter) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		for _, oc := range w.all {
			oc.cmu.Lock()
			n := oc.credits
			oc.cmu.Unlock()
			if n > 0 {
				return fmt.Errorf("the channel to consumer %d still has %d credits", oc.consumer, n)
			}
		}
		return inStack("exchange.(*outputChannel).acquire")
	})
}

// waitInStack waits until some goroutine is inside fn, a function as
// runtime stacks name it: how a test knows a call has reached the point
// where it blocks.
func waitInStack(t *testing.T, fn string) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error { return inStack(fn) })
}

func inStack(fn string) error {
	buf := make([]byte, 1<<20)
	if !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(fn)) {
		return fmt.Errorf("no goroutine is in %s yet", fn)
	}
	return nil
}

func newManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	m, err := NewManager(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// topology places consumers and producers on Managers: "local" puts all on
// one Manager, "remote" producers on one and consumers on another, "mixed"
// spreads consumers over both so some channels are in memory and some not.
type topology struct {
	prod []*Manager // per producer subtask
	cons []*Manager // per consumer subtask
}

func newTopology(t *testing.T, mode string, p, c int, cfg Config) topology {
	a := newManager(t, cfg)
	b := a
	if mode != "local" {
		b = newManager(t, cfg)
	}
	var tp topology
	for i := 0; i < p; i++ {
		tp.prod = append(tp.prod, a)
	}
	for i := 0; i < c; i++ {
		m := b
		if mode == "mixed" && i%2 == 0 {
			m = a
		}
		tp.cons = append(tp.cons, m)
	}
	return tp
}

func (tp topology) targets() []string {
	var ts []string
	for _, m := range tp.cons {
		ts = append(ts, m.Addr())
	}
	return ts
}

type got struct {
	producer int
	key      string
	value    string
}

// drain reads a gate to io.EOF, copying records and noting events in order.
func drain(ctx context.Context, g *InputGate) ([]got, []string, error) {
	var recs []got
	var events []string
	for {
		b, err := g.Next(ctx)
		if err == io.EOF {
			return recs, events, nil
		}
		if err != nil {
			return recs, events, err
		}
		if b.IsEvent() {
			events = append(events, fmt.Sprintf("%d:%v@%d", b.Producer, b.Event, len(recs)))
			continue
		}
		for _, r := range b.Records {
			recs = append(recs, got{b.Producer, string(r.Key), string(r.Value)})
		}
	}
}

func rec(key, value string) abi.Record {
	return abi.Record{Key: []byte(key), HasKey: key != "", Value: []byte(value)}
}

func TestPartitioners(t *testing.T) {
	const n = 3000
	const maxP = 128
	for _, mode := range []string{"local", "remote", "mixed"} {
		for _, part := range []jobgraph.Partitioner{jobgraph.Forward, jobgraph.Hash, jobgraph.Rebalance, jobgraph.Broadcast} {
			t.Run(fmt.Sprintf("%s/%s", mode, part), func(t *testing.T) {
				p, c := 3, 4
				if part == jobgraph.Forward {
					c = 3
				}
				// Small buffers so many buffers and credits cycle.
				tp := newTopology(t, mode, p, c, Config{BufferSize: 512, Credits: 2})
				ctx := context.Background()
				gates := make([]*InputGate, c)
				for i := range gates {
					producers := p
					if part == jobgraph.Forward {
						producers = 1
					}
					g, err := tp.cons[i].OpenInput(ctx, control.InputSpec{ResultID: "r1", Producers: producers}, i)
					if err != nil {
						t.Fatal(err)
					}
					defer g.Close()
					gates[i] = g
				}
				results := make([][]got, c)
				var wg sync.WaitGroup
				errs := make(chan error, p+c)
				for i, g := range gates {
					wg.Add(1)
					go func() {
						defer wg.Done()
						recs, _, err := drain(ctx, g)
						results[i] = recs
						if err != nil {
							errs <- err
						}
					}()
				}
				for pi := 0; pi < p; pi++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						w, err := tp.prod[pi].OpenOutput(ctx, control.OutputSpec{ResultID: "r1", Partitioner: part, Targets: tp.targets()}, pi, maxP)
						if err != nil {
							errs <- err
							return
						}
						defer w.Close()
						batch := make([]abi.Record, 0, 100)
						for i := 0; i < n; i++ {
							batch = append(batch, rec(fmt.Sprintf("k%d", i%97), fmt.Sprintf("%d:%d", pi, i)))
							if len(batch) == cap(batch) || i == n-1 {
								if err := w.Write(ctx, batch); err != nil {
									errs <- err
									return
								}
								batch = batch[:0]
							}
						}
						if err := w.Finish(ctx); err != nil {
							errs <- err
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				total := 0
				for ci, recs := range results {
					next := map[int]int{} // per producer: records must come in write order
					for _, r := range recs {
						pi, i := parseValue(t, r.value)
						if pi != r.producer {
							t.Fatalf("consumer %d: value %s reported from producer %d", ci, r.value, r.producer)
						}
						if i < next[pi] {
							t.Fatalf("consumer %d: producer %d record %d after %d: out of order", ci, pi, i, next[pi]-1)
						}
						next[pi] = i + 1
						switch part {
						case jobgraph.Forward:
							if pi != ci {
								t.Fatalf("forward: consumer %d got a record of producer %d", ci, pi)
							}
						case jobgraph.Hash:
							if want := keygroup.Subtask(keygroup.Of([]byte(r.key), maxP), c, maxP); want != ci {
								t.Fatalf("hash: key %s at consumer %d, its key group belongs to %d", r.key, ci, want)
							}
						case jobgraph.Rebalance:
							if want := (pi + i) % c; want != ci {
								t.Fatalf("rebalance: producer %d record %d at consumer %d, want %d", pi, i, ci, want)
							}
						}
					}
					total += len(recs)
				}
				want := p * n
				if part == jobgraph.Broadcast {
					want = p * n * c
				}
				if total != want {
					t.Fatalf("received %d records, want %d", total, want)
				}
			})
		}
	}
}

func parseValue(t *testing.T, v string) (int, int) {
	t.Helper()
	a, b, ok := strings.Cut(v, ":")
	pi, err1 := strconv.Atoi(a)
	i, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("bad value %q", v)
	}
	return pi, i
}

func TestEventsInBand(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, mode, 1, 1, Config{FlushTimeout: time.Hour, Credits: 8})
			ctx := context.Background()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "ev", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			w, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "ev", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// The flush timeout is an hour: only the barrier can push the
			// first three records out before it.
			if err := w.Write(ctx, []abi.Record{rec("", "0:0"), rec("", "0:1"), rec("", "0:2")}); err != nil {
				t.Fatal(err)
			}
			if err := w.EmitBarrier(ctx, 7); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(ctx, []abi.Record{rec("", "0:3")}); err != nil {
				t.Fatal(err)
			}
			if err := w.EmitBarrier(ctx, 8); err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(ctx); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(ctx, []abi.Record{rec("", "late")}); !errors.Is(err, ErrWriterClosed) {
				t.Fatalf("Write after Finish: %v, want ErrWriterClosed", err)
			}
			recs, events, err := drain(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 4 {
				t.Fatalf("got %d records", len(recs))
			}
			want := "0:CHECKPOINT_BARRIER(7)@3 0:CHECKPOINT_BARRIER(8)@4 0:END_OF_PARTITION@4"
			if got := strings.Join(events, " "); got != want {
				t.Fatalf("events %q, want %q", got, want)
			}
		})
	}
}

func TestFlushTimeoutMovesLowRateStreams(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, mode, 1, 1, Config{FlushTimeout: 5 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "slow", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			w, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "slow", Partitioner: jobgraph.Rebalance, Targets: tp.targets()}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for i := 0; i < 3; i++ {
				if err := w.Write(ctx, []abi.Record{rec("", fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
				// Nothing else is written: only the flush timer sends it.
				b, err := g.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Records) != 1 || string(b.Records[0].Value) != fmt.Sprint(i) {
					t.Fatalf("got %+v", b)
				}
			}
		})
	}
}

// TestFlushTimerRunsOnlyWithUnsentRecords checks that the flush loop is
// disarmed (no timer) while no buffer holds records, arms again when a
// record waits in a buffer, and stays armed while a due buffer has no
// credit to be sent with.
func TestFlushTimerRunsOnlyWithUnsentRecords(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, mode, 1, 1, Config{FlushTimeout: time.Millisecond, Credits: 1})
			m := tp.prod[0]
			disarmed := func() error {
				if m.flushArmed.Load() {
					return errors.New("flush loop still armed")
				}
				return nil
			}
			testutil.CheckFor(t, 5*time.Second, time.Millisecond, disarmed)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "idle", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			w, err := m.OpenOutput(ctx, control.OutputSpec{ResultID: "idle", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			testutil.CheckFor(t, 5*time.Second, time.Millisecond, disarmed)
			// The one credit carries the first record; the second waits in
			// its buffer with no credit, so the loop must keep watching.
			for i := range 2 {
				if err := w.Write(ctx, []abi.Record{rec("", fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
						w.mu.Lock()
						defer w.mu.Unlock()
						if w.chans[0].count != 0 {
							return errors.New("first record not sent yet")
						}
						return nil
					})
				}
			}
			if !m.flushArmed.Load() {
				t.Fatal("flush loop disarmed while a record waits for credit")
			}
			for i := range 2 {
				b, err := g.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Records) != 1 || string(b.Records[0].Value) != fmt.Sprint(i) {
					t.Fatalf("batch %d: got %+v", i, b)
				}
			}
			testutil.CheckFor(t, 5*time.Second, time.Millisecond, disarmed)
		})
	}
}

func TestBackPressureKeepsMemoryBounded(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			const credits, n = 3, 4000
			tp := newTopology(t, mode, 2, 1, Config{BufferSize: 256, Credits: credits})
			ctx := context.Background()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "bp", Producers: 2}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			var written [2]int64
			var mu sync.Mutex
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for pi := 0; pi < 2; pi++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w, err := tp.prod[pi].OpenOutput(ctx, control.OutputSpec{ResultID: "bp", Partitioner: jobgraph.Rebalance, Targets: tp.targets()}, pi, 0)
					if err != nil {
						errs <- err
						return
					}
					defer w.Close()
					for i := 0; i < n; i++ {
						if err := w.Write(ctx, []abi.Record{rec("", fmt.Sprintf("%d:%d", pi, i))}); err != nil {
							errs <- err
							return
						}
						mu.Lock()
						written[pi]++
						mu.Unlock()
					}
					errs <- w.Finish(ctx)
				}()
			}
			// A slow consumer: while it lags, the producers must be held
			// back by credits, not buffer without bound.
			next := [2]int{}
			consumed := 0
			recsPerBuf := 256 / abi.RecordSize(&abi.Record{Value: []byte("0:0000")})
			for {
				b, err := g.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if consumed < 400 {
					time.Sleep(time.Millisecond) // behaviour under test: a slow consumer
				}
				for _, r := range b.Records {
					pi, i := parseValue(t, string(r.Value))
					if i != next[pi] {
						t.Fatalf("producer %d: got record %d, want %d (lost or reordered)", pi, i, next[pi])
					}
					next[pi]++
					consumed++
				}
				mu.Lock()
				ahead := written[0] + written[1] - int64(consumed)
				mu.Unlock()
				// In flight per producer: its credits' worth of full
				// buffers plus the one it is filling (and the batch being
				// decoded here).
				if limit := int64(2 * (credits + 2) * (recsPerBuf + 1)); ahead > limit {
					t.Fatalf("producers are %d records ahead of the consumer, bound %d", ahead, limit)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if next != [2]int{n, n} {
				t.Fatalf("received %v, want %d from each", next, n)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, ic := range g.chans {
				if ic.maxQueued > credits {
					t.Fatalf("channel of producer %d queued %d buffers, credits %d", ic.producer, ic.maxQueued, credits)
				}
			}
		})
	}
}

func TestCancellationReleasesBlockedCalls(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, mode, 1, 1, Config{BufferSize: 128, Credits: 1})
			ctx := context.Background()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "c", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			w, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "c", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			big := make([]abi.Record, 100)
			for i := range big {
				big[i] = rec("", "0123456789012345678901234567890123456789")
			}
			// Nobody reads: the writer blocks on credit until ctx ends.
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- w.Write(cctx, big) }()
			select {
			case err := <-done:
				t.Fatalf("Write returned %v without credit", err)
			case <-time.After(20 * time.Millisecond):
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Write: %v, want context.Canceled", err)
			}

			// A second writer blocked on credit is released by Close.
			octx, ocancel := context.WithTimeout(ctx, 30*time.Millisecond)
			defer ocancel()
			_, err = tp.prod[0].OpenOutput(octx, control.OutputSpec{ResultID: "c2", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("OpenOutput for an input nobody opened: %v, want DeadlineExceeded", err)
			}
			g2, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "c2", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g2.Close()
			w2, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "c2", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			go func() { done <- w2.Write(ctx, big) }()
			waitBlockedOnCredit(t, w2)
			w2.Close()
			if err := <-done; !errors.Is(err, ErrWriterClosed) {
				t.Fatalf("Write after Close: %v, want ErrWriterClosed", err)
			}
			// The consumer of an aborted producer fails.
			for {
				_, err := g2.Next(ctx)
				if err != nil {
					if !errors.Is(err, ErrProducerAborted) {
						t.Fatalf("Next after producer abort: %v, want ErrProducerAborted", err)
					}
					break
				}
			}

			// A blocked Next is released by ctx and by Close.
			nctx, ncancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer ncancel()
			g3, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "c3", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g3.Next(nctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next: %v, want DeadlineExceeded", err)
			}
			go func() { _, err := g3.Next(ctx); done <- err }()
			waitInStack(t, "exchange.(*InputGate).Next")
			g3.Close()
			if err := <-done; !errors.Is(err, ErrGateClosed) {
				t.Fatalf("Next after Close: %v, want ErrGateClosed", err)
			}
		})
	}
}

func TestConsumerCloseFailsProducer(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, mode, 1, 1, Config{BufferSize: 128, Credits: 1})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "cc", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			w, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "cc", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			done := make(chan error)
			go func() {
				for {
					if err := w.Write(ctx, []abi.Record{rec("", "0123456789012345678901234567890123456789")}); err != nil {
						done <- err
						return
					}
				}
			}()
			waitBlockedOnCredit(t, w)
			g.Close()
			if err := <-done; !errors.Is(err, ErrChannelClosed) {
				t.Fatalf("Write after consumer closed: %v, want ErrChannelClosed", err)
			}
		})
	}
}

func TestProducerWaitsForConsumerRegistration(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, mode, 1, 1, Config{RegistrationTimeout: 5 * time.Second})
			ctx := context.Background()
			type res struct {
				w   *ResultWriter
				err error
			}
			done := make(chan res)
			go func() {
				w, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "late", Partitioner: jobgraph.Broadcast, Targets: tp.targets()}, 0, 0)
				done <- res{w, err}
			}()
			// The producer is waiting for its consumer before the consumer
			// registers.
			waitInStack(t, "exchange.(*Manager).connectChannel")
			g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "late", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.w.Close()
			if err := r.w.Write(ctx, []abi.Record{rec("", "x")}); err != nil {
				t.Fatal(err)
			}
			if err := r.w.Finish(ctx); err != nil {
				t.Fatal(err)
			}
			recs, _, err := drain(ctx, g)
			if err != nil || len(recs) != 1 {
				t.Fatalf("got %v, %v", recs, err)
			}
		})
	}
}

func TestRegistrationTimeout(t *testing.T) {
	m := newManager(t, Config{RegistrationTimeout: 100 * time.Millisecond})
	peer := newManager(t, Config{})
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for name, target := range map[string]string{"local": m.Addr(), "remote": peer.Addr(), "unreachable": dead} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := m.OpenOutput(context.Background(), control.OutputSpec{ResultID: "nobody", Partitioner: jobgraph.Rebalance, Targets: []string{target}}, 0, 0)
			if !errors.Is(err, ErrConsumerNotFound) {
				t.Fatalf("err = %v, want ErrConsumerNotFound", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("gave up after %v", d)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	consumer := newManager(t, Config{Authenticate: func(tok []byte) error {
		if string(tok) != "s3cret" {
			return errors.New("bad cluster secret")
		}
		return nil
	}})
	ctx := context.Background()
	g, err := consumer.OpenInput(ctx, control.InputSpec{ResultID: "auth", Producers: 2}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bad := newManager(t, Config{Token: []byte("guess")})
	_, err = bad.OpenOutput(ctx, control.OutputSpec{ResultID: "auth", Partitioner: jobgraph.Rebalance, Targets: []string{consumer.Addr()}}, 0, 0)
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "bad cluster secret") {
		t.Fatalf("wrong token: %v, want ErrHandshake mentioning the cause", err)
	}
	good := newManager(t, Config{Token: []byte("s3cret")})
	w, err := good.OpenOutput(ctx, control.OutputSpec{ResultID: "auth", Partitioner: jobgraph.Rebalance, Targets: []string{consumer.Addr()}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
}

func TestHashRejectsRecordWithoutKey(t *testing.T) {
	m := newManager(t, Config{})
	ctx := context.Background()
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "h", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := m.OpenOutput(ctx, control.OutputSpec{ResultID: "h", Partitioner: jobgraph.Hash, Targets: []string{m.Addr()}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, []abi.Record{rec("", "no key")}); !errors.Is(err, ErrNoKey) {
		t.Fatalf("err = %v, want ErrNoKey", err)
	}
}

func TestRecordSizes(t *testing.T) {
	tp := newTopology(t, "remote", 1, 1, Config{BufferSize: 1024, MaxBufferSize: 8192})
	ctx := context.Background()
	g, err := tp.cons[0].OpenInput(ctx, control.InputSpec{ResultID: "big", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := tp.prod[0].OpenOutput(ctx, control.OutputSpec{ResultID: "big", Partitioner: jobgraph.Forward, Targets: tp.targets()}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	large := strings.Repeat("x", 5000) // above BufferSize, below MaxBufferSize
	if err := w.Write(ctx, []abi.Record{rec("", "a"), rec("", large), rec("", "b")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, []abi.Record{rec("", strings.Repeat("y", 9000))}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("err = %v, want ErrRecordTooLarge", err)
	}
	if err := w.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _, err := drain(ctx, g)
	if err != nil || len(recs) != 3 || recs[1].value != large {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
}

func TestDuplicateInputAndProducer(t *testing.T) {
	m := newManager(t, Config{RegistrationTimeout: time.Second})
	ctx := context.Background()
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "d", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := m.OpenInput(ctx, control.InputSpec{ResultID: "d", Producers: 1}, 0); !errors.Is(err, ErrInputExists) {
		t.Fatalf("second OpenInput: %v", err)
	}
	w, err := m.OpenOutput(ctx, control.OutputSpec{ResultID: "d", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := m.OpenOutput(ctx, control.OutputSpec{ResultID: "d", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}, 0, 0); err == nil {
		t.Fatal("a second channel from the same producer was accepted")
	}
}

func TestManagerCloseFailsOpenEnds(t *testing.T) {
	a := newManager(t, Config{BufferSize: 128, Credits: 1})
	b := newManager(t, Config{})
	ctx := context.Background()
	g, err := b.OpenInput(ctx, control.InputSpec{ResultID: "mc", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := a.OpenOutput(ctx, control.OutputSpec{ResultID: "mc", Partitioner: jobgraph.Forward, Targets: []string{b.Addr()}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error)
	go func() {
		for {
			if err := w.Write(ctx, []abi.Record{rec("", "0123456789012345678901234567890123456789")}); err != nil {
				done <- err
				return
			}
		}
	}()
	waitBlockedOnCredit(t, w)
	a.Close() // the producer's TaskManager goes away
	if err := <-done; !errors.Is(err, ErrManagerClosed) {
		t.Fatalf("Write: %v, want ErrManagerClosed", err)
	}
	for {
		_, err := g.Next(ctx)
		if err != nil {
			if !errors.Is(err, ErrConnectionLost) {
				t.Fatalf("Next: %v, want ErrConnectionLost", err)
			}
			break
		}
	}
}

// rawProducer speaks the protocol by hand, to send what a Manager never
// would.
type rawProducer struct {
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawProducer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := &rawProducer{nc: nc, br: bufio.NewReader(nc)}
	r.send(t, frameHello, 0, hello{version: protocolVersion}.payload())
	if typ, _, p := r.read(t); typ != frameHelloOK {
		t.Fatalf("handshake answer %s %q", frameName(typ), p)
	}
	return r
}

func (r *rawProducer) send(t *testing.T, typ byte, ch uint32, p []byte) {
	t.Helper()
	if _, err := r.nc.Write(appendFrame(nil, typ, ch, p)); err != nil {
		t.Fatal(err)
	}
}

func (r *rawProducer) read(t *testing.T) (byte, uint32, []byte) {
	t.Helper()
	var hb [headerSize]byte
	h, err := readHeader(r.br, &hb, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, h.length)
	if _, err := io.ReadFull(r.br, p); err != nil {
		t.Fatal(err)
	}
	return h.typ, h.channel, p
}

func TestFrameSizeLimitClosesConnection(t *testing.T) {
	m := newManager(t, Config{BufferSize: 1024, MaxBufferSize: 8192})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "fs", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := dialRaw(t, m.Addr())
	r.send(t, frameOpen, 1, open{producer: 0, consumer: 0, resultID: "fs"}.payload())
	if typ, ch, p := r.read(t); typ != frameCredit || ch != 1 {
		t.Fatalf("OPEN answered %s %q", frameName(typ), p)
	}
	// A frame within the limit goes through.
	r.send(t, frameBuffer, 1, abi.AppendBatch(nil, []abi.Record{rec("", "ok")}))
	b, err := g.Next(ctx)
	if err != nil || len(b.Records) != 1 {
		t.Fatalf("Next: %+v %v", b, err)
	}
	// A header declaring more than the limit: the payload is never read.
	var hb [headerSize]byte
	putHeader(hb[:], header{frameBuffer, 1, 1 << 30})
	if _, err := r.nc.Write(hb[:]); err != nil {
		t.Fatal(err)
	}
	typ, _, p := r.read(t)
	if typ != frameError || !strings.Contains(string(p), "exceeds the size limit") {
		t.Fatalf("got %s %q, want ERROR about the size limit", frameName(typ), p)
	}
	if _, err := r.br.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open after ERROR: %v", err)
	}
	if _, err := g.Next(ctx); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("gate: %v, want ErrFrameTooLarge", err)
	}
}

func TestProtocolViolations(t *testing.T) {
	m := newManager(t, Config{Credits: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cases := map[string]func(t *testing.T, r *rawProducer){
		"data without credit": func(t *testing.T, r *rawProducer) {
			r.send(t, frameOpen, 1, open{resultID: "pv"}.payload())
			r.read(t) // CREDIT 1
			batch := abi.AppendBatch(nil, []abi.Record{rec("", "x")})
			r.send(t, frameBuffer, 1, batch)
			r.send(t, frameBuffer, 1, batch)
		},
		"unknown frame type": func(t *testing.T, r *rawProducer) {
			r.send(t, 42, 0, nil)
		},
		"credit on the consumer side": func(t *testing.T, r *rawProducer) {
			r.send(t, frameCredit, 1, creditPayload(3))
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "pv", Producers: 1}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			r := dialRaw(t, m.Addr())
			f(t, r)
			for {
				typ, _, p := r.read(t)
				if typ == frameError {
					if !strings.Contains(string(p), "protocol") {
						t.Fatalf("ERROR %q", p)
					}
					break
				}
			}
			if _, err := r.br.ReadByte(); err != io.EOF {
				t.Fatalf("connection still open: %v", err)
			}
		})
	}
	// A stranger that does not say HELLO.
	nc, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	b, _ := io.ReadAll(nc)
	if !strings.Contains(string(b), "exceeds") && !strings.Contains(string(b), "protocol") {
		t.Fatalf("HTTP request answered %q", b)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{BufferSize: 10},
		{BufferSize: 1 << 20, MaxBufferSize: 1 << 16},
		{Credits: -1},
		{FlushTimeout: -1},
		{Token: make([]byte, 5000)},
	} {
		if m, err := NewManager(context.Background(), cfg); err == nil {
			m.Close()
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestManyProducersEventuallyDeliver(t *testing.T) {
	// Producers on two Managers sharing connections, consumers on a third.
	a, b, c := newManager(t, Config{}), newManager(t, Config{}), newManager(t, Config{})
	ctx := context.Background()
	const p, cn = 6, 3
	var gates []*InputGate
	var targets []string
	for i := 0; i < cn; i++ {
		g, err := c.OpenInput(ctx, control.InputSpec{ResultID: "many", Producers: p}, i)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		gates = append(gates, g)
		targets = append(targets, c.Addr())
	}
	var counts [cn]int
	var wg sync.WaitGroup
	for i, g := range gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, _, err := drain(ctx, g)
			if err != nil {
				t.Error(err)
			}
			counts[i] = len(recs)
		}()
	}
	for i := 0; i < p; i++ {
		m := a
		if i%2 == 1 {
			m = b
		}
		w, err := m.OpenOutput(ctx, control.OutputSpec{ResultID: "many", Partitioner: jobgraph.Broadcast, Targets: targets}, i, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, []abi.Record{rec("", "x"), rec("", "y")}); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(ctx); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	wg.Wait()
	for i, n := range counts {
		if n != 2*p {
			t.Errorf("consumer %d got %d records, want %d", i, n, 2*p)
		}
	}
	// One connection per pair of Managers.
	testutil.CheckFor(t, time.Second, time.Millisecond, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if n := len(c.conns); n != 2 {
			return fmt.Errorf("consumer Manager has %d connections, want 2", n)
		}
		return nil
	})
}

// A producer that gave up waiting for its OPEN withdraws it; the consumer
// forgets the channel, so the producer's next attempt is accepted.
func TestWithdrawnOpenCanBeRetried(t *testing.T) {
	m := newManager(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "wd", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := dialRaw(t, m.Addr())
	r.send(t, frameOpen, 1, open{resultID: "wd"}.payload())
	if typ, _, _ := r.read(t); typ != frameCredit {
		t.Fatalf("first OPEN answered %s", frameName(typ))
	}
	r.send(t, frameClose, 1, closePayload(closeWithdraw, "gave up"))
	r.send(t, frameOpen, 2, open{resultID: "wd"}.payload())
	if typ, ch, p := r.read(t); typ != frameCredit || ch != 2 {
		t.Fatalf("OPEN after withdrawing answered %s on %d: %q", frameName(typ), ch, p)
	}
	r.send(t, frameBuffer, 2, abi.AppendBatch(nil, []abi.Record{rec("", "v")}))
	r.send(t, frameEvent, 2, eventPayload(Event{Type: EndOfPartition}))
	recs, _, err := drain(ctx, g)
	if err != nil || len(recs) != 1 {
		t.Fatalf("got %v, %v", recs, err)
	}
}
