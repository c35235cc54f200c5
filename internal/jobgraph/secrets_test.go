package jobgraph_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

func TestResolveSecrets(t *testing.T) {
	graph := func(sourceConfig, guestConfig map[string]string) *jobgraph.Graph {
		return &jobgraph.Graph{Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "in", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorJetStreamSource, Config: sourceConfig},
			{ID: 2, Name: "count", Kind: jobgraph.KindMap, Config: guestConfig},
		}}
	}
	secrets := map[string]string{"nats": "hunter2"}

	g := graph(map[string]string{"url": "nats://h:4222", "user": "me", "password": "secret:nats"}, nil)
	if err := jobgraph.ResolveSecrets(g, secrets); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"url": "nats://h:4222", "user": "me", "password": "hunter2"}; !maps.Equal(g.Vertices[0].Config, want) {
		t.Fatalf("config %v, want %v", g.Vertices[0].Config, want)
	}

	for _, tc := range []struct {
		name          string
		source, guest map[string]string
		want          string
	}{
		{"a literal password", map[string]string{"password": "hunter2"}, nil, `config "password" holds a secret literally`},
		{"a literal token", map[string]string{"token": "hunter2"}, nil, `config "token" holds a secret literally`},
		{"an unknown secret", map[string]string{"password": "secret:kafka"}, nil, `names secret "kafka", which the job config does not hold: pass it as secret.kafka`},
		{"a bad name", map[string]string{"password": "secret:a b"}, nil, `names secret "a b", which has ' '`},
		{"a guest operator", nil, map[string]string{"key": "secret:nats"}, `operator 2 (count): config "key" names a secret, but only host connectors read secrets`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph(tc.source, tc.guest)
			before := maps.Clone(g.Vertices[0].Config)
			err := jobgraph.ResolveSecrets(g, secrets)
			switch {
			case err == nil || !errors.Is(err, jobgraph.ErrInvalidGraph) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("ResolveSecrets: %v, want an error containing %q", err, tc.want)
			case strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows the secret: %v", err)
			case !maps.Equal(g.Vertices[0].Config, before):
				t.Fatalf("the graph changed on an error: %v", g.Vertices[0].Config)
			}
		})
	}
}
