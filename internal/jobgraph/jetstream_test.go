package jobgraph

import (
	"strings"
	"testing"
)

func TestJetStreamSettings(t *testing.T) {
	src := func(c map[string]string) *Vertex {
		return &Vertex{ID: 1, Name: "in", Kind: KindSource, Connector: ConnectorJetStreamSource, Config: c}
	}
	sink := func(c map[string]string) *Vertex {
		return &Vertex{ID: 2, Name: "out", Kind: KindSink, Connector: ConnectorJetStreamSink, Config: c}
	}
	for _, tc := range []struct {
		name string
		v    *Vertex
		want string // "" means valid
	}{
		{"source", src(map[string]string{"url": "nats://127.0.0.1:4222", "stream": "IN"}), ""},
		{"source filter and seq", src(map[string]string{"url": "127.0.0.1:4222, tls://h:1", "stream": "IN", "subject": "in.*.x.>", "start": "seq:5"}), ""},
		{"start time", src(map[string]string{"url": "nats://h", "stream": "IN", "start": "time:2026-12-02T15:04:05Z"}), ""},
		{"no url", src(map[string]string{"stream": "IN"}), "no server"},
		{"bad scheme", src(map[string]string{"url": "http://h:1", "stream": "IN"}), "scheme \"http\""},
		{"bad port", src(map[string]string{"url": "nats://h:0", "stream": "IN"}), "port \"0\""},
		{"credentials in url", src(map[string]string{"url": "nats://u:hunter2@h:1", "stream": "IN"}), "credentials in the URL"},
		{"no stream", src(map[string]string{"url": "nats://h:1"}), "stream \"\" is empty"},
		{"bad stream", src(map[string]string{"url": "nats://h:1", "stream": "a.b"}), "which a stream name cannot hold"},
		{"bad start", src(map[string]string{"url": "nats://h:1", "stream": "IN", "start": "seq:0"}), "want seq:N"},
		{"bad filter", src(map[string]string{"url": "nats://h:1", "stream": "IN", "subject": "a.>.b"}), "wildcard"},
		{"unknown key", src(map[string]string{"url": "nats://h:1", "stream": "IN", "delivery": "at-least-once"}), "unknown config key \"delivery\""},
		{"token and user", src(map[string]string{"url": "nats://h:1", "stream": "IN", "token": "t", "user": "u"}), "not both"},
		{"sink", sink(map[string]string{"url": "nats://h:1", "subject": "out.x", "delivery": "at-least-once"}), ""},
		{"sink no subject", sink(map[string]string{"url": "nats://h:1"}), "subject \"\" is empty"},
		{"sink wildcard", sink(map[string]string{"url": "nats://h:1", "subject": "out.>"}), "has a wildcard"},
		{"sink bad delivery", sink(map[string]string{"url": "nats://h:1", "subject": "o", "delivery": "twice"}), "want \"exactly-once\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.v.JetStream()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("JetStream(): %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("JetStream(): %v, want an error containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// A jetstream source reads with one reader: another parallelism is refused.
func TestValidateJetStreamSourceParallelism(t *testing.T) {
	g := &Graph{Vertices: []Vertex{
		{ID: 0, Name: "in", Kind: KindSource, Parallelism: 2, Connector: ConnectorJetStreamSource, Config: map[string]string{"url": "nats://h:1", "stream": "IN"}},
		{ID: 1, Name: "out", Kind: KindSink, Parallelism: 2, Connector: ConnectorBlackhole},
	}, Edges: []Edge{{Source: 0, Target: 1, Partitioner: Forward}}}
	err := Validate(g, 1, 128)
	if err == nil || !strings.Contains(err.Error(), "set its parallelism to 1") {
		t.Fatalf("Validate: %v, want the parallelism refused", err)
	}
}
