package guest

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// KafkaOptions configure a KafkaSource or a KafkaSink; the keys they set
// are those of docs/ABI.md section 5.
type KafkaOptions struct {
	// Brokers are the seed brokers, host:port each. Required.
	Brokers []string
	// SASL is the mechanism ("plain", "scram-sha-256" or
	// "scram-sha-512"; empty: none), with User and PasswordSecret. The
	// secret is named, not held: PasswordSecret "kafka" is the value of
	// the job config key secret.kafka, which the job's submitter sets
	// (sluice run --job-secret kafka=FILE).
	SASL, User, PasswordSecret string
	// TLS connects with TLS, verified against the system's roots.
	TLS bool

	// TopicPattern is a source's regular expression over topic names
	// (RE2, matched whole) instead of a list of topics.
	TopicPattern string
	// Start is where a source without a checkpoint starts: "earliest"
	// (the default), "latest", "group" (Group's committed offsets) or
	// StartAt.
	Start string
	// StartAt, when not zero, starts a source at the first record of
	// each partition at or after that time.
	StartAt time.Time
	// Group is a source's consumer group: its offsets for Start "group",
	// and where offsets are committed (as a courtesy, for monitoring)
	// after each completed checkpoint. The checkpoint, not the group, is
	// the source's position.
	Group string
	// ReadUncommitted makes a source read records of open and aborted
	// transactions too (the default is read_committed).
	ReadUncommitted bool
	// Discovery is how often a source looks for new partitions and, with
	// TopicPattern, new topics (0: every 10 s); a negative value turns
	// discovery off.
	Discovery time.Duration

	// AtLeastOnce makes a sink produce at once and flush at every
	// checkpoint rather than commit a transaction when the checkpoint
	// completes: lower latency, duplicates after a restore.
	AtLeastOnce bool
	// TransactionalIDPrefix is an exactly-once sink's transactional-id
	// prefix (default sluice-<job>-v<vertex>); the subtask is appended.
	TransactionalIDPrefix string
	// TopicHeader, when set, routes a sink's record that has a header
	// with this key to the topic the header's value names (the header is
	// not produced); records without it go to the sink's topic. A
	// routed topic must exist, or the task fails saying so.
	TopicHeader string
}

func (o KafkaOptions) config() map[string]string {
	c := map[string]string{jobgraph.ConfigKafkaBrokers: strings.Join(o.Brokers, ",")}
	for k, v := range map[string]string{jobgraph.ConfigKafkaSASL: o.SASL, jobgraph.ConfigKafkaUser: o.User} {
		if v != "" {
			c[k] = v
		}
	}
	if o.PasswordSecret != "" {
		c[jobgraph.ConfigKafkaPassword] = jobgraph.SecretRef + o.PasswordSecret
	}
	if o.TLS {
		c[jobgraph.ConfigKafkaTLS] = "true"
	}
	return c
}

// millis is d in whole milliseconds, as the connectors' configs take it.
func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// KafkaSource reads Kafka topics with the host's "kafka-source"
// connector: each record's Kafka key is the record's Key, its value the
// Value, its timestamp the Time, its headers the Headers. Name the topics,
// or set o.TopicPattern and no topics. The partitions are the source's splits: the JobMaster
// hands each to one subtask and finds new ones while the job runs. The
// offsets are kept in each checkpoint, so a restore resumes exactly there.
// With WithWatermarks each partition has its own watermark (and idleness)
// and the source's is the least of those that are not idle. It is
// unbounded.
func (e *Env) KafkaSource(name string, topics []string, o KafkaOptions) *Stream {
	op := e.add(name, jobgraph.KindSource, false)
	op.connector = jobgraph.ConnectorKafkaSource
	op.config = o.config()
	if len(topics) > 0 {
		op.config[jobgraph.ConfigKafkaTopics] = strings.Join(topics, ",")
	}
	// This SDK reads headers (Record.Headers).
	op.config[jobgraph.ConfigKafkaHeaders] = "true"
	set := func(k, v string) {
		if v != "" {
			op.config[k] = v
		}
	}
	set(jobgraph.ConfigKafkaTopicPattern, o.TopicPattern)
	set(jobgraph.ConfigKafkaStart, o.Start)
	if !o.StartAt.IsZero() {
		op.config[jobgraph.ConfigKafkaStart] = jobgraph.KafkaStartTimestamp + ":" + strconv.FormatInt(o.StartAt.UnixMilli(), 10)
	}
	set(jobgraph.ConfigKafkaGroup, o.Group)
	if o.ReadUncommitted {
		op.config[jobgraph.ConfigKafkaIsolation] = "read_uncommitted"
	}
	switch {
	case o.Discovery < 0:
		op.config[jobgraph.ConfigKafkaDiscovery] = "0"
	case o.Discovery > 0:
		op.config[jobgraph.ConfigKafkaDiscovery] = millis(max(o.Discovery, time.Millisecond))
	}
	return &Stream{env: e, op: op}
}

// KafkaSink ends the stream in the host's "kafka-sink" connector: each
// record is produced to topic (or the one its o.TopicHeader names), its
// Key as the Kafka key, its Value as the value, its Time as the timestamp
// and its Headers as the headers. Exactly once by default: each
// subtask holds a checkpoint's records and produces them in one Kafka
// transaction that commits when the checkpoint completes, so
// read_committed consumers see each record once across failures and the
// job needs checkpoints. o.AtLeastOnce produces at once instead.
func (s *Stream) KafkaSink(name, topic string, o KafkaOptions) *Stream {
	op := s.then(name, jobgraph.KindSink, false)
	op.connector = jobgraph.ConnectorKafkaSink
	op.config = o.config()
	op.config[jobgraph.ConfigKafkaTopic] = topic
	if o.AtLeastOnce {
		op.config[jobgraph.ConfigKafkaDelivery] = jobgraph.DeliveryAtLeastOnce
	}
	if o.TransactionalIDPrefix != "" {
		op.config[jobgraph.ConfigKafkaTxnPrefix] = o.TransactionalIDPrefix
	}
	if o.TopicHeader != "" {
		op.config[jobgraph.ConfigKafkaTopicHeader] = o.TopicHeader
	}
	return &Stream{env: s.env, op: op}
}
