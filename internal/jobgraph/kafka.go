package jobgraph

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Host connectors for Kafka. Their settings are parsed and checked at
// submission (kafkaconn.Check), but the TaskManager does not run them yet,
// so ConnectorKind does not know them and Validate refuses a graph that
// uses them as having an unknown connector.
const (
	// ConnectorKafkaSource reads the partitions of Kafka topics; the
	// offsets are the source's position in the checkpoint.
	ConnectorKafkaSource = "kafka-source"
	// ConnectorKafkaSink produces each record to a topic, exactly once
	// through Kafka transactions that commit when the checkpoint
	// completes (or at least once, flushed at every barrier).
	ConnectorKafkaSink = "kafka-sink"
)

// Vertex config keys of the Kafka connectors. The SASL password is a
// secret: never echoed by the errors below.
const (
	// ConfigKafkaBrokers is a comma-separated list of seed brokers,
	// host:port each.
	ConfigKafkaBrokers = "brokers"
	// ConfigKafkaTopics is a source's comma-separated topics.
	ConfigKafkaTopics = "topics"
	// ConfigKafkaTopicPattern is a source's regular expression over topic
	// names (instead of topics), matched whole.
	ConfigKafkaTopicPattern = "topic-pattern"
	// ConfigKafkaStart is where a source without a checkpoint starts:
	// "earliest" (the default), "latest", "timestamp:MS" (milliseconds
	// since the Unix epoch) or "group" (the group's committed offsets,
	// earliest where it has none).
	ConfigKafkaStart = "start"
	// ConfigKafkaGroup is a source's consumer group: its committed offsets
	// for start "group", and where offsets are committed as a courtesy
	// after each completed checkpoint.
	ConfigKafkaGroup = "group"
	// ConfigKafkaIsolation is a source's isolation level: "read_committed"
	// (the default) or "read_uncommitted".
	ConfigKafkaIsolation = "isolation"
	// ConfigKafkaIdleTimeout is how long, in ms, a partition without
	// records may hold the source's watermark back (default 0: forever).
	ConfigKafkaIdleTimeout = "idle-timeout-ms"
	// ConfigKafkaDiscovery is how often, in ms, a source looks for new
	// partitions and topics (default 10000; 0 turns it off).
	ConfigKafkaDiscovery = "discovery-interval-ms"
	// ConfigKafkaTopic is a sink's topic.
	ConfigKafkaTopic = "topic"
	// ConfigKafkaDelivery is a sink's guarantee: DeliveryExactlyOnce (the
	// default) or DeliveryAtLeastOnce.
	ConfigKafkaDelivery = "delivery"
	// ConfigKafkaTxnPrefix is an exactly-once sink's transactional-id
	// prefix (default "sluice-<job>-v<vertex>"); the subtask is appended.
	ConfigKafkaTxnPrefix = "transactional-id-prefix"
	// ConfigKafkaSASL is the SASL mechanism: "plain", "scram-sha-256" or
	// "scram-sha-512" (unset: no SASL).
	ConfigKafkaSASL = "sasl-mechanism"
	// ConfigKafkaUser and ConfigKafkaPassword are the SASL credentials
	// (the password is a secret).
	ConfigKafkaUser     = "sasl-user"
	ConfigKafkaPassword = "sasl-password"
	// ConfigKafkaTLS is "true" to connect with TLS (the system's roots).
	ConfigKafkaTLS = "tls"
)

// Kafka start modes (ConfigKafkaStart).
const (
	KafkaStartEarliest  = "earliest"
	KafkaStartLatest    = "latest"
	KafkaStartTimestamp = "timestamp"
	KafkaStartGroup     = "group"
)

// DefaultKafkaDiscovery is how often a source looks for new partitions
// when its config does not say.
const DefaultKafkaDiscovery = 10 * time.Second

// maxKafkaTopicBytes is Kafka's limit on a topic name.
const maxKafkaTopicBytes = 249

// KafkaSettings are a Kafka connector's settings, from its config.
type KafkaSettings struct {
	Brokers []string
	// Sources.
	Topics        []string
	TopicPattern  *regexp.Regexp
	Start         string // a KafkaStart* constant
	StartMillis   int64  // Start KafkaStartTimestamp
	Group         string
	ReadCommitted bool
	IdleTimeout   time.Duration
	Discovery     time.Duration
	// Sinks.
	Topic     string
	Delivery  string // DeliveryExactlyOnce or DeliveryAtLeastOnce
	TxnPrefix string // "" until the task sets the default
	// Connection.
	SASL     string
	User     string
	Password string
	TLS      bool
}

// String shows the settings without their secrets.
func (s KafkaSettings) String() string {
	what := strings.Join(s.Topics, ",")
	if s.TopicPattern != nil {
		what = "/" + s.TopicPattern.String() + "/"
	}
	if s.Topic != "" {
		what = s.Topic
	}
	return fmt.Sprintf("brokers=%s topics=%s", strings.Join(s.Brokers, ","), what)
}

// Kafka returns a Kafka connector's settings from its config.
//
// # Errors
//
// An error naming the key (never the password) when the broker list is
// missing or an address is not host:port, a topic name breaks Kafka's
// rules, the topic pattern does not compile, a source names both or
// neither of topics and a pattern, start "group" has no group, a value is
// not one of its forms, or the config has a key the connector does not
// know.
func (v *Vertex) Kafka() (KafkaSettings, error) {
	sink := v.Connector == ConnectorKafkaSink
	what := "kafka source"
	if sink {
		what = "kafka sink"
	}
	s := KafkaSettings{Start: KafkaStartEarliest, ReadCommitted: true, Discovery: DefaultKafkaDiscovery, Delivery: DeliveryExactlyOnce}
	bad := func(k, format string, a ...any) (KafkaSettings, error) {
		return KafkaSettings{}, fmt.Errorf("%s: %s: %s", what, k, fmt.Sprintf(format, a...))
	}
	for _, k := range sortedConfigKeys(v.Config) {
		val := v.Config[k]
		switch {
		case k == ConfigKafkaBrokers:
			for _, b := range strings.Split(val, ",") {
				b = strings.TrimSpace(b)
				if why := badBrokerAddress(b); why != "" {
					return bad(k, "%q %s", b, why)
				}
				s.Brokers = append(s.Brokers, b)
			}
		case k == ConfigKafkaSASL:
			switch val {
			case "plain", "scram-sha-256", "scram-sha-512":
				s.SASL = val
			default:
				return bad(k, "%q: want plain, scram-sha-256 or scram-sha-512", val)
			}
		case k == ConfigKafkaUser:
			s.User = val
		case k == ConfigKafkaPassword:
			s.Password = val
		case k == ConfigKafkaTLS:
			b, err := strconv.ParseBool(val)
			if err != nil {
				return bad(k, "%q: want true or false", val)
			}
			s.TLS = b
		case k == ConfigKafkaTopics && !sink:
			for _, tp := range strings.Split(val, ",") {
				tp = strings.TrimSpace(tp)
				if why := BadKafkaTopic(tp); why != "" {
					return bad(k, "topic %q %s", tp, why)
				}
				s.Topics = append(s.Topics, tp)
			}
		case k == ConfigKafkaTopicPattern && !sink:
			re, err := regexp.Compile("^(?:" + val + ")$")
			if err != nil || val == "" {
				return bad(k, "%q is not a regular expression (RE2 syntax, e.g. \"orders-.*\")", val)
			}
			s.TopicPattern = re
		case k == ConfigKafkaStart && !sink:
			switch {
			case val == KafkaStartEarliest || val == KafkaStartLatest || val == KafkaStartGroup:
				s.Start = val
			case strings.HasPrefix(val, KafkaStartTimestamp+":"):
				ms, err := strconv.ParseInt(val[len(KafkaStartTimestamp)+1:], 10, 64)
				if err != nil || ms < 0 {
					return bad(k, "%q: want timestamp:MS, MS the milliseconds since the Unix epoch", val)
				}
				s.Start, s.StartMillis = KafkaStartTimestamp, ms
			default:
				return bad(k, "%q: want earliest, latest, timestamp:MS or group", val)
			}
		case k == ConfigKafkaGroup && !sink:
			if strings.TrimSpace(val) == "" || len(val) > maxKafkaTopicBytes {
				return bad(k, "%q: want a group id of 1 to %d bytes", val, maxKafkaTopicBytes)
			}
			s.Group = val
		case k == ConfigKafkaIsolation && !sink:
			switch val {
			case "read_committed":
				s.ReadCommitted = true
			case "read_uncommitted":
				s.ReadCommitted = false
			default:
				return bad(k, "%q: want read_committed or read_uncommitted", val)
			}
		case (k == ConfigKafkaIdleTimeout || k == ConfigKafkaDiscovery) && !sink:
			ms, err := strconv.ParseInt(val, 10, 64)
			if err != nil || ms < 0 || ms > int64(24*time.Hour/time.Millisecond) {
				return bad(k, "%q: want milliseconds, a decimal integer from 0 to 86400000", val)
			}
			if k == ConfigKafkaIdleTimeout {
				s.IdleTimeout = time.Duration(ms) * time.Millisecond
			} else {
				s.Discovery = time.Duration(ms) * time.Millisecond
			}
		case k == ConfigKafkaTopic && sink:
			if why := BadKafkaTopic(val); why != "" {
				return bad(k, "topic %q %s", val, why)
			}
			s.Topic = val
		case k == ConfigKafkaDelivery && sink:
			if val != DeliveryExactlyOnce && val != DeliveryAtLeastOnce {
				return bad(k, "%q: want %q or %q", val, DeliveryExactlyOnce, DeliveryAtLeastOnce)
			}
			s.Delivery = val
		case k == ConfigKafkaTxnPrefix && sink:
			if val == "" || len(val) > 200 || strings.ContainsAny(val, " \t\r\n") {
				return bad(k, "%q: want 1 to 200 bytes without whitespace", val)
			}
			s.TxnPrefix = val
		case k == ConfigPoisonRecords:
		default:
			return KafkaSettings{}, fmt.Errorf("%s: unknown config key %q", what, k)
		}
	}
	switch {
	case len(s.Brokers) == 0:
		return KafkaSettings{}, fmt.Errorf("%s: no broker: set %q to host:port, e.g. 127.0.0.1:9092", what, ConfigKafkaBrokers)
	case s.SASL != "" && (s.User == "" || s.Password == ""):
		return KafkaSettings{}, fmt.Errorf("%s: %s %s needs %q and %q", what, ConfigKafkaSASL, s.SASL, ConfigKafkaUser, ConfigKafkaPassword)
	case s.SASL == "" && (s.User != "" || s.Password != ""):
		return KafkaSettings{}, fmt.Errorf("%s: %q or %q without %q: set it to plain, scram-sha-256 or scram-sha-512", what, ConfigKafkaUser, ConfigKafkaPassword, ConfigKafkaSASL)
	}
	if sink {
		if s.Topic == "" {
			return KafkaSettings{}, fmt.Errorf("%s: no topic: set %q", what, ConfigKafkaTopic)
		}
		return s, nil
	}
	switch {
	case len(s.Topics) == 0 && s.TopicPattern == nil:
		return KafkaSettings{}, fmt.Errorf("%s: no topic: set %q (comma-separated) or %q", what, ConfigKafkaTopics, ConfigKafkaTopicPattern)
	case len(s.Topics) > 0 && s.TopicPattern != nil:
		return KafkaSettings{}, fmt.Errorf("%s: set either %q or %q, not both", what, ConfigKafkaTopics, ConfigKafkaTopicPattern)
	case s.Start == KafkaStartGroup && s.Group == "":
		return KafkaSettings{}, fmt.Errorf("%s: start %q needs %q, the consumer group whose offsets to start from", what, KafkaStartGroup, ConfigKafkaGroup)
	}
	return s, nil
}

// BadKafkaTopic says what is wrong with a topic name by Kafka's rules, ""
// if nothing: 1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-', and not "." or
// "..".
func BadKafkaTopic(n string) string {
	switch {
	case n == "":
		return "is empty"
	case n == "." || n == "..":
		return "is \".\" or \"..\", which Kafka refuses"
	case len(n) > maxKafkaTopicBytes:
		return fmt.Sprintf("is %d bytes long, above Kafka's limit of %d", len(n), maxKafkaTopicBytes)
	}
	if i := badNameByte(n); i >= 0 {
		return fmt.Sprintf("has %q at byte %d: a topic name holds only letters, digits, '.', '_' and '-'", n[i], i)
	}
	return ""
}

// badBrokerAddress says what is wrong with a seed broker's address, "" if
// nothing.
func badBrokerAddress(b string) string {
	if b == "" {
		return "is empty: use host:port"
	}
	if strings.Contains(b, "://") {
		return "has a scheme: use host:port (set tls=true for TLS)"
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil {
		return "is not host:port"
	}
	if host == "" {
		return "has no host: use host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("has port %q, not from 1 to 65535", port)
	}
	return ""
}
