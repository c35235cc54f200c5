package jobgraph_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

func TestChainPoisonPolicy(t *testing.T) {
	op := func(p string) jobgraph.Vertex {
		v := jobgraph.Vertex{Kind: jobgraph.KindMap}
		if p != "" {
			v.Config = map[string]string{jobgraph.ConfigPoisonRecords: p}
		}
		return v
	}
	tests := []struct {
		chain []jobgraph.Vertex
		job   jobgraph.PoisonPolicy
		want  jobgraph.PoisonPolicy
	}{
		{nil, "", jobgraph.PoisonFail},
		{[]jobgraph.Vertex{op("")}, jobgraph.PoisonSkip, jobgraph.PoisonSkip},
		{[]jobgraph.Vertex{op("skip")}, jobgraph.PoisonFail, jobgraph.PoisonSkip},
		{[]jobgraph.Vertex{op("skip"), op("dead-letter")}, jobgraph.PoisonFail, jobgraph.PoisonDeadLetter},
		{[]jobgraph.Vertex{op("skip"), op("FAIL")}, jobgraph.PoisonSkip, jobgraph.PoisonFail},
		{[]jobgraph.Vertex{op(""), op("skip")}, jobgraph.PoisonDeadLetter, jobgraph.PoisonSkip},
	}
	for i, tt := range tests {
		if got := jobgraph.ChainPoisonPolicy(tt.chain, tt.job); got != tt.want {
			t.Errorf("%d: ChainPoisonPolicy = %s, want %s", i, got, tt.want)
		}
	}
}

func TestValidateRefusesABadPoisonPolicy(t *testing.T) {
	g := &jobgraph.Graph{
		Vertices: []jobgraph.Vertex{
			{ID: 1, Name: "lines", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{jobgraph.ConfigPaths: `["a"]`}},
			{ID: 2, Name: "parse", Kind: jobgraph.KindMap, Config: map[string]string{jobgraph.ConfigPoisonRecords: "ignore"}},
			{ID: 3, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorCollect},
		},
		Edges: []jobgraph.Edge{{Source: 1, Target: 2, Partitioner: jobgraph.Forward}, {Source: 2, Target: 3, Partitioner: jobgraph.Forward}},
	}
	err := jobgraph.Validate(g, 1, 128)
	if !errors.Is(err, jobgraph.ErrInvalidGraph) || !strings.Contains(err.Error(), `poison-records="ignore": want fail, skip or dead-letter`) {
		t.Fatalf("Validate = %v", err)
	}
	g.Vertices[1].Config[jobgraph.ConfigPoisonRecords] = "skip"
	if err := jobgraph.Validate(g, 1, 128); err != nil {
		t.Fatalf("Validate with skip = %v", err)
	}
}
