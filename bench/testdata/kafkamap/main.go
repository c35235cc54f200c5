// Command kafkamap is the Kafka benchmark's job: it reads a topic,
// upper-cases each record's value (keeping its key and time) and produces
// it to another topic, exactly once unless --at-least-once.
package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() {
	guest.Job(func(env *guest.Env) {
		fs := flag.NewFlagSet("kafkamap", flag.ContinueOnError)
		brokers := fs.String("brokers", "", "seed brokers")
		in := fs.String("in", "", "input topic")
		out := fs.String("out", "", "output topic")
		alo := fs.Bool("at-least-once", false, "at-least-once sink")
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
		var buf []byte
		env.KafkaSource("in", []string{*in}, o).
			Map("upper", func(r guest.Record) guest.Record {
				buf = append(buf[:0], r.Value...)
				upper(buf)
				r.Value = buf
				return r
			}).
			KafkaSink("out", *out, sink)
	})
}

// upper upper-cases ASCII letters in place.
func upper(b []byte) {
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
}

func main() {}
