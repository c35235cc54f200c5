//go:build !wasip1

package guest

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// ExampleKeyedStream_Window counts each user's clicks per minute of
// processing time: an Aggregate whose accumulator is a count, emitted with
// the window's bounds when the minute is over.
func ExampleKeyedStream_Window() {
	h := newExampleHost()
	defer h.close()

	Job(func(env *Env) {
		env.TextSource("clicks", "clicks.log").
			KeyBy("user", func(r Record) []byte {
				user, _, _ := bytes.Cut(r.Value, []byte(" "))
				return user
			}).
			Window(Tumbling(time.Minute).InProcessingTime()).
			Aggregate("per-minute", Aggregator{
				Add: func(acc []byte, r Record) []byte { return PutInt64(acc, AsInt64(acc)+1) },
				Result: func(dst, key []byte, w Window, acc []byte) []byte {
					return fmt.Appendf(dst, "%s: %d clicks in [%d, %d)", key, AsInt64(acc), w.Start, w.End)
				},
			}).
			Collect("out")
	})

	clicks := h.run([]int{2}, lines("ann /home", "bob /home", "ann /cart"))
	h.open([]int{3})
	h.clock = 10_000
	h.process(clicks[0], clicks[1])
	h.clock = 70_000
	h.process(clicks[2])
	for _, now := range []int64{60_000, 120_000} {
		h.clock = now
		h.fireTimers()
		for _, r := range h.take() {
			fmt.Printf("at %d: %s\n", now, r.Value)
		}
	}
	// Output:
	// at 60000: ann: 1 clicks in [0, 60000)
	// at 60000: bob: 1 clicks in [0, 60000)
	// at 120000: ann: 1 clicks in [60000, 120000)
}

// ExampleStream_Late routes an event-time window operator's late records
// to their own sink; the plan shows the two select operators that take the
// operator's tagged output apart.
func ExampleStream_Late() {
	h := newExampleHost()
	defer h.close()

	Job(func(env *Env) {
		sums := env.Source("readings", func(*Context, int, *Collector) bool { return true }).
			WithWatermarks(BoundedOutOfOrderness(time.Second)).
			KeyBy("sensor", func(r Record) []byte { return r.Key }).
			Window(Sliding(time.Minute, 10*time.Second).WithAllowedLateness(5*time.Second)).
			Reduce("sums", func(acc, v []byte) []byte { return PutInt64(acc, AsInt64(acc)+AsInt64(v)) })
		sums.WriteFiles("out", "sums")
		sums.Late("late").WriteFiles("late-out", "late")
	})

	g, err := h.plan()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range g.Vertices {
		fmt.Println(strings.TrimSpace(fmt.Sprintf("vertex %d %s: %s %s", v.ID, v.Name, v.Kind, v.Config["window"])))
	}
	for _, e := range g.Edges {
		fmt.Printf("edge %d -> %d %s\n", e.Source, e.Target, e.Partitioner)
	}
	// Output:
	// vertex 1 readings: source
	// vertex 2 sensor: key_by
	// vertex 3 sums: process sliding 60000ms every 10000ms event time, lateness 5000ms
	// vertex 4 out: sink
	// vertex 5 late: flat_map
	// vertex 6 late-out: sink
	// vertex 7 sums.main: flat_map
	// edge 1 -> 2 forward
	// edge 2 -> 3 hash
	// edge 7 -> 4 forward
	// edge 3 -> 5 forward
	// edge 5 -> 6 forward
	// edge 3 -> 7 forward
}
