package jobgraph

import (
	"strings"
	"testing"
	"time"
)

func TestKafkaSettings(t *testing.T) {
	src := func(c map[string]string) *Vertex {
		return &Vertex{ID: 1, Name: "in", Kind: KindSource, Connector: ConnectorKafkaSource, Config: c}
	}
	sink := func(c map[string]string) *Vertex {
		return &Vertex{ID: 2, Name: "out", Kind: KindSink, Connector: ConnectorKafkaSink, Config: c}
	}
	long := strings.Repeat("t", 250)
	for _, tc := range []struct {
		name string
		v    *Vertex
		want string // "" means valid
	}{
		{"source", src(map[string]string{"brokers": "127.0.0.1:9092", "topics": "bids"}), ""},
		{"source many", src(map[string]string{"brokers": "a:1, [::1]:2", "topics": "a,b.c_d-e", "start": "timestamp:1700000000000", "group": "g", "isolation": "read_uncommitted", "idle-timeout-ms": "500"}), ""},
		{"pattern", src(map[string]string{"brokers": "h:1", "topic-pattern": "bids-.*"}), ""},
		{"no brokers", src(map[string]string{"topics": "bids"}), "no broker"},
		{"scheme", src(map[string]string{"brokers": "kafka://h:9092", "topics": "bids"}), "has a scheme"},
		{"no port", src(map[string]string{"brokers": "h", "topics": "bids"}), "is not host:port"},
		{"bad port", src(map[string]string{"brokers": "h:70000", "topics": "bids"}), "not from 1 to 65535"},
		{"empty broker", src(map[string]string{"brokers": "h:1,", "topics": "bids"}), "is empty"},
		{"no topic", src(map[string]string{"brokers": "h:1"}), "no topic"},
		{"both", src(map[string]string{"brokers": "h:1", "topics": "a", "topic-pattern": "a.*"}), "not both"},
		{"bad topic", src(map[string]string{"brokers": "h:1", "topics": "a b"}), "has ' ' at byte 1"},
		{"dot topic", src(map[string]string{"brokers": "h:1", "topics": ".."}), "which Kafka refuses"},
		{"long topic", src(map[string]string{"brokers": "h:1", "topics": long}), "above Kafka's limit of 249"},
		{"bad pattern", src(map[string]string{"brokers": "h:1", "topic-pattern": "("}), "not a regular expression"},
		{"bad start", src(map[string]string{"brokers": "h:1", "topics": "a", "start": "first"}), "want earliest, latest"},
		{"bad timestamp", src(map[string]string{"brokers": "h:1", "topics": "a", "start": "timestamp:x"}), "want timestamp:MS"},
		{"group start without group", src(map[string]string{"brokers": "h:1", "topics": "a", "start": "group"}), "needs \"group\""},
		{"bad isolation", src(map[string]string{"brokers": "h:1", "topics": "a", "isolation": "serializable"}), "want read_committed"},
		{"sink key on source", src(map[string]string{"brokers": "h:1", "topics": "a", "delivery": "at-least-once"}), "unknown config key \"delivery\""},
		{"sasl", src(map[string]string{"brokers": "h:1", "topics": "a", "sasl-mechanism": "scram-sha-512", "sasl-user": "u", "sasl-password": "hunter2", "tls": "true"}), ""},
		{"sasl without password", src(map[string]string{"brokers": "h:1", "topics": "a", "sasl-mechanism": "plain", "sasl-user": "u"}), "needs \"sasl-user\" and \"sasl-password\""},
		{"password without sasl", src(map[string]string{"brokers": "h:1", "topics": "a", "sasl-user": "u", "sasl-password": "hunter2"}), "without \"sasl-mechanism\""},
		{"bad mechanism", src(map[string]string{"brokers": "h:1", "topics": "a", "sasl-mechanism": "gssapi", "sasl-user": "u", "sasl-password": "hunter2"}), "want plain"},
		{"bad tls", src(map[string]string{"brokers": "h:1", "topics": "a", "tls": "yes please"}), "want true or false"},
		{"sink", sink(map[string]string{"brokers": "h:1", "topic": "out", "delivery": "at-least-once"}), ""},
		{"sink prefix", sink(map[string]string{"brokers": "h:1", "topic": "out", "transactional-id-prefix": "bids-job"}), ""},
		{"sink no topic", sink(map[string]string{"brokers": "h:1"}), "no topic"},
		{"sink bad topic", sink(map[string]string{"brokers": "h:1", "topic": "out/1"}), "has '/' at byte 3"},
		{"sink bad delivery", sink(map[string]string{"brokers": "h:1", "topic": "o", "delivery": "twice"}), "want \"exactly-once\""},
		{"sink source key", sink(map[string]string{"brokers": "h:1", "topic": "o", "topics": "a"}), "unknown config key \"topics\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.v.Kafka()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Kafka(): %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Kafka(): %v, want an error containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// The defaults are Flink's: earliest, read_committed, exactly once.
func TestKafkaDefaults(t *testing.T) {
	s, err := (&Vertex{Connector: ConnectorKafkaSource, Config: map[string]string{"brokers": "h:1", "topic-pattern": "a|b"}}).Kafka()
	if err != nil {
		t.Fatal(err)
	}
	if s.Start != KafkaStartEarliest || !s.ReadCommitted || s.Discovery != DefaultKafkaDiscovery || s.IdleTimeout != 0 {
		t.Errorf("source defaults %+v", s)
	}
	// The pattern matches whole names.
	if !s.TopicPattern.MatchString("a") || s.TopicPattern.MatchString("ab") {
		t.Errorf("pattern %v matches part of a name", s.TopicPattern)
	}
	k, err := (&Vertex{Connector: ConnectorKafkaSink, Config: map[string]string{"brokers": "h:1", "topic": "o"}}).Kafka()
	if err != nil {
		t.Fatal(err)
	}
	if k.Delivery != DeliveryExactlyOnce || k.TxnPrefix != "" {
		t.Errorf("sink defaults %+v", k)
	}
	s, _ = (&Vertex{Connector: ConnectorKafkaSource, Config: map[string]string{"brokers": "h:1", "topics": "a", "discovery-interval-ms": "0", "idle-timeout-ms": "1500"}}).Kafka()
	if s.Discovery != 0 || s.IdleTimeout != 1500*time.Millisecond {
		t.Errorf("durations %+v", s)
	}
}

// The SASL password is a secret key of both connectors.
func TestKafkaSecretKeys(t *testing.T) {
	for _, c := range []string{ConnectorKafkaSource, ConnectorKafkaSink} {
		if !SecretKey(c, ConfigKafkaPassword) || SecretKey(c, ConfigKafkaUser) {
			t.Errorf("%s: the secret keys are not just %s", c, ConfigKafkaPassword)
		}
	}
}
