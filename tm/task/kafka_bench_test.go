package task

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/testutil"
)

// BenchmarkKafkaSource reads the same records of a 2-partition kfake
// topic with the kafka source (parallelism 1, into a blackhole sink, no
// guest) and with franz-go's own poll loop, alternating which goes first;
// it reports the median of the source's throughput over the loop's.
func BenchmarkKafkaSource(b *testing.B) {
	const n = 200_000
	k := testutil.StartKafka(b, 2, "bids")
	for from := 0; from < n; from += 20_000 {
		k.Produce(b, "bids", -1, from, from+20_000)
	}
	loop := func() time.Duration {
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bids": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		start := time.Now()
		for got := 0; got < n; {
			fs := cl.PollFetches(context.Background())
			got += fs.NumRecords()
		}
		return time.Since(start)
	}
	source := func() time.Duration {
		ctx, cancel := context.WithCancel(context.Background())
		met := NewMetrics()
		start := time.Now()
		run := startBench(ctx, k.Brokers, met)
		for met.Sample().RecordsOut < n {
			time.Sleep(time.Millisecond)
		}
		d := time.Since(start)
		cancel()
		<-run
		return d
	}
	var ratios []float64
	var srcRate, loopRate []float64
	for i := 0; i < b.N; i++ {
		var s, l time.Duration
		if i%2 == 0 {
			s, l = source(), loop()
		} else {
			l, s = loop(), source()
		}
		ratios = append(ratios, l.Seconds()/s.Seconds())
		srcRate = append(srcRate, n/s.Seconds())
		loopRate = append(loopRate, n/l.Seconds())
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(median(srcRate), "source-rec/s")
	b.ReportMetric(median(loopRate), "franz-go-rec/s")
}

func startBench(ctx context.Context, brokers string, met *Metrics) chan struct{} {
	done := make(chan struct{})
	parts := newFakePartitions(1, testutil.KafkaSplits("bids", 2))
	go func() {
		defer close(done)
		_, _ = Run(ctx, Spec{
			ExecutionID: "bench", JobID: "job1", Tenant: "acme", Parallelism: 1, MaxParallelism: 128,
			Chain: []jobgraph.Vertex{
				{ID: 1, Name: "in", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorKafkaSource,
					Config: map[string]string{"brokers": brokers, "topics": "bids", "discovery-interval-ms": "0"}},
				{ID: 2, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorBlackhole},
			},
		}, Deps{Splits: parts.forSubtask(0), Metrics: met})
	}()
	return done
}
