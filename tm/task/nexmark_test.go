package task

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/tm/exchange"
)

// nexmarkSplits cuts a stream as the dispatcher does.
func nexmarkSplits(t *testing.T, events int64, n int) []checkpoint.Split {
	t.Helper()
	rs, err := nexmark.Split(events, n)
	must(t, err)
	var sps []checkpoint.Split
	for _, r := range rs {
		sps = append(sps, checkpoint.Split{Key: nexmark.SplitKey(r, n), Offset: r.Start, Length: r.End - r.Start})
	}
	return sps
}

// generated is what the generator gives for splits, encoded, in order.
func generated(t *testing.T, cfg nexmark.Config, sps []checkpoint.Split) [][]byte {
	t.Helper()
	var out [][]byte
	for _, sp := range sps {
		start, n, err := nexmark.ParseSplitKey(sp.Key)
		must(t, err)
		g, err := nexmark.NewGenerator(cfg, nexmark.Range{Start: start, End: sp.Offset + sp.Length}, n, sp.Offset)
		must(t, err)
		var e nexmark.Event
		for g.Next(&e) {
			out = append(out, nexmark.AppendEvent(nil, &e))
		}
	}
	return out
}

func nexmarkVertex(config map[string]string) jobgraph.Vertex {
	return jobgraph.Vertex{ID: 1, Name: "events", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorNexmark, Config: config}
}

// Two subtasks share the splits of a stream and collect its events: each
// once, timed with its event time, the same bytes the generator gives.
func TestNexmarkToCollect(t *testing.T) {
	config := map[string]string{"events": "5000", "seed": "3", "base-time": "1000", "out-of-order-group": "4"}
	cfg := nexmark.Config{BaseTime: 1000, Seed: 3, OutOfOrderGroup: 4}
	sps := nexmarkSplits(t, 5000, 2)
	q := &splitQueue{sps: slices.Clone(sps)}
	var mu sync.Mutex
	var got [][]byte
	var wg sync.WaitGroup
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Run(context.Background(), Spec{
				ExecutionID: fmt.Sprint("e", s), JobID: "j", Tenant: "acme", Subtask: s, Parallelism: 2,
				Chain: []jobgraph.Vertex{nexmarkVertex(config), {ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect}},
			}, Deps{Splits: q})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, res.Collected...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	want := generated(t, cfg, sps)
	sort := func(b [][]byte) { slices.SortFunc(b, bytes.Compare) }
	sort(got)
	sort(want)
	if len(want) != 5000 || !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("collected %d events, want the generator's %d", len(got), len(want))
	}
}

// A blackhole keeps nothing and counts what reached it.
func TestNexmarkToBlackhole(t *testing.T) {
	met := NewMetrics()
	res, err := Run(context.Background(), Spec{
		ExecutionID: "e", JobID: "j", Tenant: "acme", Parallelism: 1,
		Chain: []jobgraph.Vertex{nexmarkVertex(map[string]string{"events": "3000"}), {ID: 2, Name: "drop", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorBlackhole}},
	}, Deps{Splits: &splitQueue{sps: nexmarkSplits(t, 3000, 1)}, Metrics: met})
	must(t, err)
	var size int64
	for _, b := range generated(t, nexmark.Config{}, nexmarkSplits(t, 3000, 1)) {
		size += int64(len(b))
	}
	m := met.Sample()
	if len(res.Collected) != 0 || m.RecordsOut != 3000 || m.BytesOut != size {
		t.Fatalf("collected %d, counted %d records and %d bytes; want none, 3000 and %d", len(res.Collected), m.RecordsOut, m.BytesOut, size)
	}
}

// A checkpoint taken while the source generates records its position: the
// records before the barrier plus what the rest of the splits generate are
// the whole stream, once each, in order. With a rate the source is paced,
// and the trigger is taken while it waits.
func TestNexmarkCheckpointPosition(t *testing.T) {
	for _, rate := range []string{"0", "20000"} {
		t.Run("rate="+rate, func(t *testing.T) {
			config := map[string]string{"events": "40000", "out-of-order-group": "16", "rate": rate}
			cfg := nexmark.Config{OutOfOrderGroup: 16, Rate: 20000}
			if rate == "0" {
				cfg.Rate = 0
			}
			splits := nexmarkSplits(t, 40000, 1)
			m := newManager(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := m.OpenInput(ctx, control.InputSpec{ResultID: "out", Producers: 1}, 0)
			must(t, err)
			defer out.Close()
			acks := &fakeAcks{}
			ctl := NewControl()
			run := start(ctx, Spec{
				ExecutionID: "nx", JobID: "job1", Tenant: "acme", Parallelism: 1,
				Chain:   []jobgraph.Vertex{nexmarkVertex(config)},
				Outputs: []control.OutputSpec{{ResultID: "out", Partitioner: jobgraph.Forward, Targets: []string{m.Addr()}}},
			}, Deps{Exchange: m, Splits: &splitQueue{sps: slices.Clone(splits)}, Control: ctl, Checkpoints: acks})
			var got [][]byte
			cutAt := -1
			for triggered := false; ; {
				bt, err := out.Next(ctx)
				if err == io.EOF {
					break
				}
				must(t, err)
				if bt.Event.Type == exchange.CheckpointBarrier {
					cutAt = len(got)
				}
				for _, r := range bt.Records {
					if !r.HasTime {
						t.Fatal("a record without its event time")
					}
					got = append(got, slices.Clone(r.Value))
				}
				if !triggered && len(got) > 1500 {
					must(t, ctl.Trigger(checkpoint.Trigger{ID: 1}))
					triggered = true
				}
			}
			run.wait(t)
			ack, ok := acks.ack(1)
			if !ok || ack.Source == nil || ack.Source.Current == nil || cutAt < 0 {
				t.Fatalf("ack %+v (barrier after %d records): want the position within the split", ack, cutAt)
			}
			want := generated(t, cfg, splits)
			rest := generated(t, cfg, checkpoint.RemainingSplits(splits, []checkpoint.SourcePosition{*ack.Source}))
			if all := append(slices.Clone(got[:cutAt]), rest...); !slices.EqualFunc(all, want, bytes.Equal) {
				t.Fatalf("%d events before the barrier + %d left = %d, want the %d once each, in order (position %+v)",
					cutAt, len(rest), len(all), len(want), ack.Source)
			}
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Fatal("the task's own output lost or repeated events")
			}
		})
	}
}
