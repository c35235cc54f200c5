//go:build !wasip1

package guest

import (
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// KafkaSource and KafkaSink write the options they are given, and only
// those, as the connectors' configs, and the host reads them back as the
// same settings.
func TestPlanKafkaSourceIntoKafkaSink(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_123)
	h := withJob(t, func(env *Env) {
		o := KafkaOptions{Brokers: []string{"127.0.0.1:9092", "127.0.0.2:9092"}, SASL: "scram-sha-256", User: "sluice", PasswordSecret: "kafka"}
		src := o
		src.StartAt, src.Group, src.Discovery = start, "bids-reader", -1
		sink := o
		sink.TransactionalIDPrefix, sink.TopicHeader = "counts", "route"
		env.KafkaSource("bids", []string{"bids", "bids-eu"}, src).
			KafkaSink("counts", "counts", sink)
	})
	g := planOf(t, h)
	src, sink := g.Vertices[0], g.Vertices[1]
	conn := map[string]string{"brokers": "127.0.0.1:9092,127.0.0.2:9092", "sasl-mechanism": "scram-sha-256", "sasl-user": "sluice", "sasl-password": "secret:kafka"}
	wantSrc := map[string]string{"topics": "bids,bids-eu", "start": "timestamp:1700000000123", "group": "bids-reader", "discovery-interval-ms": "0", "headers": "true"}
	wantSink := map[string]string{"topic": "counts", "transactional-id-prefix": "counts", "topic-header": "route"}
	for k, v := range conn {
		wantSrc[k], wantSink[k] = v, v
	}
	if src.Connector != jobgraph.ConnectorKafkaSource || !reflect.DeepEqual(src.Config, wantSrc) {
		t.Fatalf("source %+v", src)
	}
	if sink.Connector != jobgraph.ConnectorKafkaSink || !reflect.DeepEqual(sink.Config, wantSink) {
		t.Fatalf("sink %+v", sink)
	}
	// The host reads them once the secret is resolved (at submit).
	src.Config["sasl-password"], sink.Config["sasl-password"] = "pw", "pw"
	set, err := src.Kafka()
	if err != nil || set.Start != jobgraph.KafkaStartTimestamp || set.StartMillis != start.UnixMilli() ||
		set.Discovery != 0 || !set.Headers || !set.ReadCommitted || set.Group != "bids-reader" {
		t.Fatalf("the host reads the source as %+v, %v", set, err)
	}
	set, err = sink.Kafka()
	if err != nil || set.Topic != "counts" || set.Delivery != jobgraph.DeliveryExactlyOnce || set.TxnPrefix != "counts" || set.TopicHeader != "route" || set.Password != "pw" {
		t.Fatalf("the host reads the sink as %+v, %v", set, err)
	}
}

// A pattern instead of topics, read_uncommitted and an at-least-once sink.
func TestPlanKafkaPatternAtLeastOnce(t *testing.T) {
	h := withJob(t, func(env *Env) {
		o := KafkaOptions{Brokers: []string{"k:9092"}}
		src := o
		src.TopicPattern, src.ReadUncommitted, src.Start = "bids-.*", true, "latest"
		sink := o
		sink.AtLeastOnce = true
		env.KafkaSource("bids", nil, src).KafkaSink("out", "out", sink)
	})
	g := planOf(t, h)
	set, err := g.Vertices[0].Kafka()
	if err != nil || set.TopicPattern.String() != regexp.MustCompile("^(?:bids-.*)$").String() || set.ReadCommitted || set.Start != jobgraph.KafkaStartLatest || set.Discovery != jobgraph.DefaultKafkaDiscovery {
		t.Fatalf("the host reads the source as %+v, %v", set, err)
	}
	if set, err := g.Vertices[1].Kafka(); err != nil || set.Delivery != jobgraph.DeliveryAtLeastOnce {
		t.Fatalf("the host reads the sink as %+v, %v", set, err)
	}
}

// A record's headers reach the guest's functions and, when they keep
// them, the next operator: a Map that passes the record on keeps them, one
// that drops them does not (the encoding's bit 2, docs/ABI.md section 2).
func TestHeadersPassThroughTheChain(t *testing.T) {
	h := withJob(t, func(env *Env) {
		env.KafkaSource("in", []string{"t"}, KafkaOptions{Brokers: []string{"k:9092"}}).
			Map("tag", func(r Record) Record {
				r.Headers = append(r.Headers, Header{Key: []byte("seen"), Value: r.Value})
				return r
			}).
			Map("strip", func(r Record) Record {
				if string(r.Value) == "strip" {
					r.Headers = nil
				}
				return r
			}).
			Blackhole("out")
	})
	g := planOf(t, h)
	open(t, h, []int{g.Vertices[1].ID, g.Vertices[2].ID})
	process(t, h,
		Record{Value: []byte("keep"), Headers: []Header{{Key: []byte("trace"), Value: []byte("t-1")}}},
		Record{Value: []byte("strip"), Headers: []Header{{Key: []byte("trace"), Value: []byte("t-2")}}},
		Record{Value: []byte("none")})
	var got []string
	for _, r := range h.emitted {
		s := string(r.Value)
		for _, hd := range r.Headers {
			s += " " + string(hd.Key) + "=" + string(hd.Value)
		}
		got = append(got, s)
	}
	if want := []string{"keep trace=t-1 seen=keep", "strip", "none seen=none"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
}
