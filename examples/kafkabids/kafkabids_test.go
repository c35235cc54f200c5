//go:build !wasip1

// The example's test runs it on an embedded cluster against franz-go's
// in-process test broker: JSON bids in, a count per auction and window out,
// exactly once, with the bad records counted and dropped.
package main_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

const (
	partitions = 3
	windowMs   = 10_000
	base       = int64(1_700_000_000_000) // a window's start
)

// produce sends bids round-robin over the partitions (so an auction's bids
// are in several, out of order between them): bid i of auction i%auctions
// at base + i*step ms. It returns the counts the job must produce, and
// adds bad records and, last, a bid far ahead on every partition, so that
// event time passes every window of the bids.
func produce(t *testing.T, brokers string, n, auctions int, step int64) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic("bids"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	counts := map[[2]int64]int{}
	var recs []*kgo.Record
	for i := range n {
		a, ts := int64(i%auctions), base+int64(i)*step
		counts[[2]int64{a, ts - ts%windowMs}]++
		recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Timestamp: time.UnixMilli(ts),
			Value: fmt.Appendf(nil, `{"auction":%d,"bidder":%d,"price":%d}`, a, i, 100+i%50)})
	}
	end := base + int64(n)*step
	for _, bad := range []string{"not json", `{"bidder":3}`, `{"auction":"x"}`} {
		recs = append(recs, &kgo.Record{Partition: 0, Timestamp: time.UnixMilli(end), Value: []byte(bad)})
	}
	for p := range partitions {
		recs = append(recs, &kgo.Record{Partition: int32(p), Timestamp: time.UnixMilli(end + 10*windowMs), Value: []byte(`{"auction":-1}`)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k, c := range counts {
		want = append(want, fmt.Sprintf(`{"auction":%d,"start":%d,"end":%d,"bids":%d}`, k[0], k[1], k[1]+windowMs, c))
	}
	sort.Strings(want)
	return want
}

func TestWindowedCountsExactlyOnce(t *testing.T) {
	k := testutil.StartKafka(t, partitions, "bids", "bid-counts")
	want := produce(t, k.Brokers, 6000, 7, 13)
	c := localtest.Start(t, local.Config{Slots: 4})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, localtest.Guest(t, "examples/kafkabids"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Parallelism: 2,
		Args:   []string{"--brokers", k.Brokers},
		Config: map[string]string{jobconfig.KeyCheckpointInterval: "200ms"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.CancelJob(ctx, id) })
	localtest.KafkaWaitTopic(t, k.Brokers, "bid-counts", len(want), 2*time.Minute)
	// Stopped for good: the drain fires the windows of the bids far ahead
	// too, and the job ends FINISHED with its accumulators.
	if _, err := cl.StopWithDrain(ctx, id, time.Minute); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := cl.WaitJob(wctx, id)
	if err != nil || res.State != client.StateFinished || res.Accumulators["bad-bids"] != 3 {
		t.Fatalf("job ended %s (%v) with bad-bids %d, want FINISHED and 3", res.State, err, res.Accumulators["bad-bids"])
	}
	var got []string
	for _, c := range localtest.KafkaRead(t, k.Brokers, "bid-counts", 2*time.Second) {
		if !strings.HasPrefix(c, `{"auction":-1,`) {
			got = append(got, c)
		}
	}
	sort.Strings(got)
	if d := localtest.Diff(want, got); d != "" {
		t.Fatalf("bid-counts is not each window's count exactly once:\n%s", d)
	}
}
