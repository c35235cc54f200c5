// Command kafka reads "key seq" records from a Kafka topic, counts them per
// key in keyed state and produces "key seq count" for each to another
// topic, for the Kafka connector tests: with exactly-once output every
// input record has one output and its count is its rank among its key's
// records (a key's records are in one partition, so in order).
//
//	--brokers B          the seed brokers (required)
//	--in T, --out T      the topics (required)
//	--at-least-once      produce at once instead of when the checkpoint completes
//	--barrier-delay D    keep each barrier hook of the count busy for D (needs -C sandbox.clock=wall)
package main

import (
	"bytes"
	"flag"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() {
	guest.Job(func(env *guest.Env) {
		fs := flag.NewFlagSet("kafka", flag.ContinueOnError)
		brokers := fs.String("brokers", "", "seed brokers")
		in := fs.String("in", "", "input topic")
		out := fs.String("out", "", "output topic")
		alo := fs.Bool("at-least-once", false, "at-least-once sink")
		delay := fs.Duration("barrier-delay", 0, "busy time per barrier")
		if err := fs.Parse(env.Args()); err != nil {
			env.Fail(err)
			return
		}
		if *brokers == "" || *in == "" || *out == "" {
			env.Fail(fmt.Errorf("--brokers, --in and --out are required"))
			return
		}
		o := guest.KafkaOptions{Brokers: strings.Split(*brokers, ",")}
		sink := o
		sink.AtLeastOnce = *alo
		counts := env.KafkaSource("in", []string{*in}, o).
			KeyBy("key", func(r guest.Record) []byte {
				k, _, _ := bytes.Cut(r.Value, []byte(" "))
				return k
			}).
			Process("count", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
				n, _ := ctx.GetInt64("n")
				n++
				ctx.PutInt64("n", n)
				out.Emit(guest.Record{Value: fmt.Appendf(nil, "%s %d", r.Value, n)})
			})
		if *delay > 0 {
			counts.OnBarrier(func(ctx *guest.Context, _ int64) {
				for start := ctx.Now(); ctx.Now()-start < delay.Milliseconds(); {
				}
			})
		}
		counts.KafkaSink("out", *out, sink)
	})
}

func main() {}
