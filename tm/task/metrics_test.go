package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tm/exchange"
)

// sum adds up one figure over a chain's subtasks.
func sum(ss []Sample, f func(Sample) int64) (n int64) {
	for _, s := range ss {
		n += f(s)
	}
	return n
}

// The word count's records and bytes, counted per task, match what the
// input holds: lines into the source chain, words out of it and into the
// count, distinct words out; bytes sent equal bytes received.
func TestMetricsCountTheWordCount(t *testing.T) {
	mod := testGuest(t)
	store := openStore(t)
	var b strings.Builder
	distinct := map[string]bool{}
	words, lineBytes := 0, 0
	const lines = 2000
	for i := range lines {
		line := fmt.Sprintf("w%d common w%d", i%37, i%5)
		distinct[fmt.Sprint("w", i%37)], distinct[fmt.Sprint("w", i%5)], distinct["common"] = true, true, true
		words += 3
		lineBytes += len(line)
		b.WriteString(line + "\n")
	}
	data := b.String()
	put(t, store, "in/words.txt", []byte(data))
	j := job{
		g: plan(t, mod, "wordcount"), mod: mod, args: []string{"wordcount"}, p: 2,
		mgrs: []*exchange.Manager{newManager(t), newManager(t)}, store: store,
		splits: cut("in/words.txt", int64(len(data)), 4096),
	}
	res := j.run(t, context.Background())
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	src, count := res.metrics[0], res.metrics[1]
	if len(src) != 2 || len(count) != 2 {
		t.Fatalf("metrics of %d and %d subtasks, want 2 and 2", len(src), len(count))
	}
	in := func(s Sample) int64 { return s.RecordsIn }
	out := func(s Sample) int64 { return s.RecordsOut }
	if got := sum(src, in); got != lines {
		t.Errorf("source chain records in = %d, want %d lines", got, lines)
	}
	if got := sum(src, out); got != int64(words) {
		t.Errorf("source chain records out = %d, want %d words", got, words)
	}
	if got := sum(count, in); got != int64(words) {
		t.Errorf("count chain records in = %d, want %d words", got, words)
	}
	if got := sum(count, out); got != int64(len(distinct)) {
		t.Errorf("count chain records out = %d, want %d distinct words", got, len(distinct))
	}
	if got := sum(src, func(s Sample) int64 { return s.BytesIn }); got != int64(lineBytes) {
		t.Errorf("source chain bytes in = %d, want the %d bytes of the lines", got, lineBytes)
	}
	sent, received := sum(src, func(s Sample) int64 { return s.BytesOut }), sum(count, func(s Sample) int64 { return s.BytesIn })
	if sent == 0 || sent != received {
		t.Errorf("bytes sent %d, received %d: want equal and positive", sent, received)
	}
	for _, s := range append(src, count...) {
		if s.MemoryPages <= 0 || s.Fuel <= 0 {
			t.Errorf("guest memory %d pages, fuel %d: want both positive", s.MemoryPages, s.Fuel)
		}
		if s.Busy()+s.Idle+s.BackPressured > s.Elapsed {
			t.Errorf("busy %v + idle %v + back-pressured %v exceed the elapsed %v", s.Busy(), s.Idle, s.BackPressured, s.Elapsed)
		}
	}
}

// A task whose output nobody reads is back-pressured, with its output
// buffers all in use; one that waits for input is idle.
func TestMetricsBackPressureAndIdle(t *testing.T) {
	store := openStore(t)
	data := strings.Repeat("some line of text that fills buffers\n", 100000)
	put(t, store, "in/big.txt", []byte(data))
	m := newManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := m.OpenInput(ctx, control.InputSpec{ResultID: "stuck", Producers: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	producer, consumer := NewMetrics(), NewMetrics()
	done := make(chan error, 2)
	go func() {
		_, err := Run(ctx, Spec{
			ExecutionID: "bp", Parallelism: 1,
			Chain:   []jobgraph.Vertex{{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText}},
			Outputs: []control.OutputSpec{{ResultID: "stuck", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}},
		}, Deps{Blob: store, Exchange: m, Splits: &splitQueue{sps: cut("in/big.txt", int64(len(data)), 1<<20)}, Metrics: producer})
		done <- err
	}()
	go func() {
		_, err := Run(ctx, Spec{
			ExecutionID: "idle", Parallelism: 1,
			Chain:  []jobgraph.Vertex{{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}},
			Inputs: []control.InputSpec{{ResultID: "never", Producers: 1}},
		}, Deps{Exchange: m, Metrics: consumer})
		done <- err
	}()
	testutil.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		p, c := producer.Sample(), consumer.Sample()
		switch {
		case p.BackPressured < 20*time.Millisecond || p.OutputBufferUsage != 1:
			return fmt.Errorf("producer back-pressured %v, buffer usage %v", p.BackPressured, p.OutputBufferUsage)
		case c.Idle < 20*time.Millisecond:
			return fmt.Errorf("consumer idle %v", c.Idle)
		case p.RecordsOut == 0 || p.BytesOut == 0:
			return fmt.Errorf("producer sent %d records, %d bytes", p.RecordsOut, p.BytesOut)
		}
		return nil
	})
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	}
}

// BenchmarkTaskMetricsWordCount runs the word count's two chains at p=2
// across two exchange Managers in one process (no JobManager, no RPC: the
// task runtime alone), with the task metrics on and off, alternating which
// goes first. x_metrics is the throughput with metrics as a fraction of
// the throughput without, over all iterations and as the median of the
// iterations' ratios.
func BenchmarkTaskMetricsWordCount(b *testing.B) {
	mod := testGuest(b)
	store := openStore(b)
	var sb strings.Builder
	for i := 0; sb.Len() < 8<<20; i++ {
		fmt.Fprintf(&sb, "the quick w%d brown fox w%d jumps over w%d the lazy dog\n", i%1000, i%37, i%5003)
	}
	data := sb.String()
	put(b, store, "in/words.txt", []byte(data))
	j := job{
		g: plan(b, mod, "wordcount"), mod: mod, args: []string{"wordcount"}, p: 2,
		mgrs: []*exchange.Manager{newManager(b), newManager(b)}, store: store,
		splits: cut("in/words.txt", int64(len(data)), 1<<20),
	}
	run := func(noMetrics bool) time.Duration {
		j := j
		j.noMetrics = noMetrics
		t0 := time.Now()
		if res := j.run(b, context.Background()); len(res.errs) > 0 {
			b.Fatal(res.errs)
		}
		return time.Since(t0)
	}
	run(false) // warm up
	var on, off time.Duration
	var ratios []float64
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var a, z time.Duration
		if i%2 == 0 {
			z, a = run(true), run(false)
		} else {
			a, z = run(false), run(true)
		}
		on, off = on+a, off+z
		ratios = append(ratios, float64(z)/float64(a))
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(off)/float64(on), "x_metrics")
	b.ReportMetric(ratios[len(ratios)/2], "x_metrics_median")
}
