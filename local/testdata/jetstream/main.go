// Command jetstream reads "key seq" records from a NATS JetStream stream,
// counts them per key in keyed state and publishes "key seq count" for
// each to a subject, for the JetStream connector tests: with exactly-once
// output every input record has one output and its count is its rank
// among its key's records.
//
//	--url U           the server (required)
//	--stream S        the stream to read (required)
//	--subject S       the subject to publish to (required)
//	--user U          authenticate as U, with the password of
//	--password-secret S  the job secret S (job config secret.S)
//	--at-least-once   publish at once instead of after the checkpoint
//	--p N             the keyed step's and the sink's parallelism (default 2); the
//	                  source and its KeyBy run at 1, so each key's records keep their order
package main

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() {
	guest.Job(func(env *guest.Env) {
		var url, stream, subject, user, password string
		alo, p := false, 2
		args := env.Args()
		for i := 0; i < len(args); i++ {
			next := func() string {
				i++
				if i >= len(args) {
					env.Fail(fmt.Errorf("%s needs a value", args[i-1]))
					return ""
				}
				return args[i]
			}
			switch args[i] {
			case "--url":
				url = next()
			case "--stream":
				stream = next()
			case "--subject":
				subject = next()
			case "--user":
				user = next()
			case "--password-secret":
				password = next()
			case "--at-least-once":
				alo = true
			case "--p":
				n, err := strconv.Atoi(next())
				if err != nil {
					env.Fail(err)
				}
				p = n
			default:
				env.Fail(fmt.Errorf("unknown argument %q", args[i]))
			}
		}
		in := guest.JetStreamOptions{URL: url, User: user, PasswordSecret: password}
		sink := in
		sink.AtLeastOnce = alo
		env.JetStreamSource("in", stream, in).
			KeyBy("key", func(r guest.Record) []byte {
				k, _, _ := bytes.Cut(r.Value, []byte(" "))
				return k
			}).
			Process("count", func(ctx *guest.KeyedContext, r guest.Record, out *guest.Collector) {
				n, _ := ctx.GetInt64("n")
				n++
				ctx.PutInt64("n", n)
				out.Emit(guest.Record{Value: fmt.Appendf(nil, "%s %d", r.Value, n)})
			}).SetParallelism(p).
			JetStreamSink("out", subject, sink).SetParallelism(p)
	})
}

func main() {}
