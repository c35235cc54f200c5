package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
	"github.com/sluicehq/sluice/sdk/nexmark"
	"github.com/sluicehq/sluice/sdk/nexmark/reference"
)

// nexmarkEvents is each Nexmark job's stream: enough that a job's fixed
// cost (submit, deploy, finish) is a small share of its time.
const nexmarkEvents = 2_000_000

// flinkPerCore are the Nexmark repository's published Flink throughputs,
// in events per second per core (its README's results table).
var flinkPerCore = map[string]float64{"q0": 155_000, "q1": 158_000, "q2": 175_000, "q5": 22_000, "q7": 12_000, "q8": 146_000}

// nativeNexmark is the baseline: one goroutine runs the same generator
// over the same timelines (one per source subtask of the p=2 job) and the
// query on the generated structs, and "sinks" each result by encoding it
// into a reused buffer and counting it, as a blackhole would. It returns
// the results and their bytes. The windowed queries (q5, q7, q8) keep the
// bids (q8: the persons' ids, names and times, the auctions' sellers and
// times) and run sdk/nexmark/reference's query over them at the end.
func nativeNexmark(query string, events int64, timelines int) (records, size int64) {
	rs, err := nexmark.Split(events, timelines)
	if err != nil {
		panic(err)
	}
	var e nexmark.Event
	var buf []byte
	var kept []nexmark.Event // q5's and q7's bids, q8's persons and auctions
	for _, r := range rs {
		g, err := nexmark.NewGenerator(nexmark.Config{}, r, timelines, r.Start)
		if err != nil {
			panic(err)
		}
		for g.Next(&e) {
			if e.Type != nexmark.BidEvent || query == "q8" {
				if query == "q8" && e.Type != nexmark.BidEvent {
					kept = append(kept, nexmark.Event{Type: e.Type,
						Person:  nexmark.Person{ID: e.Person.ID, Name: append([]byte(nil), e.Person.Name...), DateTime: e.Person.DateTime},
						Auction: nexmark.Auction{Seller: e.Auction.Seller, DateTime: e.Auction.DateTime}})
				}
				continue
			}
			switch query {
			case "q0":
				buf = nexmark.AppendBid(buf[:0], &e.Bid)
			case "q1":
				e.Bid.Price = reference.Q1Price(e.Bid.Price)
				buf = nexmark.AppendBid(buf[:0], &e.Bid)
			case "q2":
				if e.Bid.Auction%reference.Q2Modulus != 0 {
					continue
				}
				buf = appendInt64s(buf[:0], e.Bid.Auction, e.Bid.Price)
			case "q5", "q7":
				kept = append(kept, nexmark.Event{Type: nexmark.BidEvent, Bid: reference.CloneBid(e.Bid)})
				continue
			}
			records++
			size += int64(len(buf))
		}
	}
	switch query {
	case "q5":
		for _, h := range reference.Q5(kept) {
			buf = appendInt64s(buf[:0], h.Auction, h.Start, h.End, h.Num)
			records++
			size += int64(len(buf))
		}
	case "q7":
		for _, b := range reference.Q7(kept) {
			buf = nexmark.AppendBid(buf[:0], &b)
			records++
			size += int64(len(buf))
		}
	case "q8":
		for _, u := range reference.Q8(kept) {
			buf = append(appendInt64s(buf[:0], u.ID, u.Start), u.Name...)
			records++
			size += int64(len(buf))
		}
	}
	return records, size
}

func appendInt64s(dst []byte, vs ...int64) []byte {
	for _, v := range vs {
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
	}
	return dst
}

// BenchmarkNexmarkP2 runs Nexmark q0, q1, q2, q5, q7 and q8 (examples/nexmark, a typed
// Go guest) at parallelism 2 on an embedded cluster over nexmarkEvents
// generated events into the blackhole sink and, in the same run, alternating
// which goes first, the single-goroutine native Go query over the same
// generator. Per core means per CPU-second of the whole process (cluster
// and client) while the job ran, which load from elsewhere on the machine
// disturbs far less than wall time:
//
//   - events/s/core: the cluster's (the target is ≥ 1,000,000 for q0-q2,
//     5× Flink's for q5, q7 and q8);
//   - native_events/s/core: the native query's;
//   - x_native: the cluster's per-core throughput over native Go's;
//   - x_flink: the cluster's over Flink's published per-core figure;
//   - events/s: the cluster's, by wall time (both subtasks together).
func BenchmarkNexmarkP2(b *testing.B) {
	wasm := localtest.Guest(b, "examples/nexmark")
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	ctx := context.Background()
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{"q0", "q1", "q2", "q5", "q7", "q8"} {
		b.Run(q, func(b *testing.B) {
			spec := client.JobSpec{ModuleDigest: digest, Parallelism: 2, Args: []string{
				"--query", q, "--sink", "blackhole", "--events", fmt.Sprint(nexmarkEvents),
			}}
			runJob(b, cl, spec) // warm up: compile, and check it finishes
			var native, clustered, nativeCPU, clusteredCPU time.Duration
			b.ResetTimer()
			i := 0
			for b.Loop() {
				runNative := func() {
					b.StopTimer()
					t0, c0 := time.Now(), processCPU(b)
					if n, _ := nativeNexmark(q, nexmarkEvents, 2); n == 0 {
						b.Fatal("the native query gave nothing")
					}
					native += time.Since(t0)
					nativeCPU += processCPU(b) - c0
					b.StartTimer()
				}
				if i%2 == 0 {
					runNative()
				}
				t1, c1 := time.Now(), processCPU(b)
				runJob(b, cl, spec)
				clustered += time.Since(t1)
				clusteredCPU += processCPU(b) - c1
				if i%2 == 1 {
					runNative()
				}
				i++
			}
			events := float64(nexmarkEvents) * float64(b.N)
			perCore := events / clusteredCPU.Seconds()
			nativePerCore := events / nativeCPU.Seconds()
			b.ReportMetric(perCore, "events/s/core")
			b.ReportMetric(nativePerCore, "native_events/s/core")
			b.ReportMetric(perCore/nativePerCore, "x_native")
			b.ReportMetric(perCore/flinkPerCore[q], "x_flink")
			b.ReportMetric(events/clustered.Seconds(), "events/s")
		})
	}
}

// The native baseline computes what the reference does: the same number
// of rows over a stream the reference also reads.
func TestNativeNexmarkMatchesReference(t *testing.T) {
	const events = 30_000
	rs, _ := nexmark.Split(events, 2)
	var evs []nexmark.Event
	for _, r := range rs {
		g, _ := nexmark.NewGenerator(nexmark.Config{}, r, 2, r.Start)
		var e nexmark.Event
		for g.Next(&e) {
			var d nexmark.Event
			if err := nexmark.DecodeEvent(nexmark.AppendEvent(nil, &e), &d); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, d)
		}
	}
	for q, want := range map[string]int{"q0": len(reference.Q0(evs)), "q1": len(reference.Q1(evs)), "q2": len(reference.Q2(evs)),
		"q5": len(reference.Q5(evs)), "q7": len(reference.Q7(evs)), "q8": len(reference.Q8(evs))} {
		if got, size := nativeNexmark(q, events, 2); got != int64(want) || size == 0 {
			t.Errorf("%s: native %d rows (%d bytes), reference %d", q, got, size, want)
		}
	}
}

// BenchmarkCheckpointsNexmarkQ5 runs Nexmark q5 (sliding windows: the
// window state is every auction's count in five overlapping windows) at
// parallelism 2 over nexmarkEvents events with checkpoints every second
// and, in the same run, without, alternating which goes first;
// x_checkpointed is the throughput with checkpoints as a fraction of the
// throughput without (target ≥ 0.95), as in BenchmarkCheckpointsWordCount.
func BenchmarkCheckpointsNexmarkQ5(b *testing.B) {
	wasm := localtest.Guest(b, "examples/nexmark")
	c := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2})
	cl := c.Client()
	args := []string{"--query", "q5", "--sink", "blackhole", "--events", fmt.Sprint(nexmarkEvents)}
	plain := jobSpec(b, c, cl, wasm, args, nil)
	checkpointed := jobSpec(b, c, cl, wasm, args, map[string]string{jobconfig.KeyCheckpointInterval: "1s"})
	runJob(b, cl, plain) // warm-up: compile the module
	b.ResetTimer()
	cmp := compareCheckpoints(b, cl, plain, checkpointed, nil)
	cmp.report(b)
	b.ReportMetric(float64(cmp.stateBytes)/1e6, "max_state_MB")
}
