package kafkaconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// DialTimeout bounds one connection attempt to a broker.
const DialTimeout = 5 * time.Second

// Options are the client options for a connector's settings: its seed
// brokers, SASL and TLS, a bounded dial and the client id name.
func Options(s jobgraph.KafkaSettings, name string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.Brokers...),
		kgo.ClientID(name),
		kgo.DialTimeout(DialTimeout),
	}
	if s.TLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	switch s.SASL {
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()))
	}
	return opts
}

// Check connects with a Kafka vertex's settings and checks what it names:
// a source's topics exist (a pattern must match at least one), a sink's
// topic exists; then it disconnects. ctx bounds the whole check.
//
// # Errors
//
// An error saying what is wrong and what to do: no broker answers, a topic
// does not exist, a pattern matches none.
func Check(ctx context.Context, v *jobgraph.Vertex) error {
	s, err := v.Kafka()
	if err != nil {
		return err
	}
	what := "kafka source"
	if v.Connector == jobgraph.ConnectorKafkaSink {
		what = "kafka sink"
	}
	cl, err := kgo.NewClient(append(Options(s, "sluice-submit-check"),
		// One attempt per request, so an unreachable broker is reported
		// within ctx rather than retried past it.
		kgo.RequestRetries(0))...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, redact(err, s))
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	brokers := strings.Join(s.Brokers, ",")
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: no broker at %s answered: check that Kafka runs and the address is right", what, brokers)
		}
		return fmt.Errorf("%s: list the topics at %s: %w; check that Kafka runs and the address is right", what, brokers, redact(err, s))
	}
	want := s.Topics
	if v.Connector == jobgraph.ConnectorKafkaSink {
		want = []string{s.Topic}
	}
	for _, tp := range want {
		if !topics.Has(tp) {
			return fmt.Errorf("%s: topic %q does not exist at %s: create it, or name an existing topic", what, tp, brokers)
		}
	}
	if s.TopicPattern != nil {
		for _, tp := range topics.Names() {
			if s.TopicPattern.MatchString(tp) {
				return nil
			}
		}
		return fmt.Errorf("%s: no topic at %s matches %s %q: create one, or fix the pattern", what, brokers, jobgraph.ConfigKafkaTopicPattern, s.TopicPattern.String())
	}
	return nil
}

// redactedErr is an error whose text has had the password cut out,
// keeping the original for errors.Is.
type redactedErr struct {
	msg string
	err error
}

func (e *redactedErr) Error() string { return e.msg }
func (e *redactedErr) Unwrap() error { return e.err }

func redact(err error, s jobgraph.KafkaSettings) error {
	msg := err.Error()
	if s.Password != "" {
		msg = strings.ReplaceAll(msg, s.Password, "[redacted]")
	}
	return &redactedErr{msg: msg, err: err}
}
