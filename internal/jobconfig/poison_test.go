package jobconfig_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

func TestParsePoison(t *testing.T) {
	c, err := jobconfig.Parse(map[string]string{jobconfig.KeyPoisonRecords: "SKIP"})
	if err != nil || c.Poison.Policy != jobgraph.PoisonSkip || c.Poison.MaxPerMillion != jobconfig.DefaultPoisonMaxPerMillion {
		t.Fatalf("Parse(skip) = %+v, %v", c.Poison, err)
	}
	for _, tt := range []struct {
		conf map[string]string
		want string
	}{
		{map[string]string{jobconfig.KeyPoisonRecords: "drop"}, "want fail, skip or dead-letter"},
		{map[string]string{jobconfig.KeyPoisonRecords: "dead-letter"}, "needs pipeline.dead-letter.path"},
		{map[string]string{jobconfig.KeyDeadLetterPath: "/abs"}, "is absolute"},
		{map[string]string{jobconfig.KeyDeadLetterPath: "a/../b"}, `has a ".." segment`},
		{map[string]string{jobconfig.KeyPoisonMaxPerMillion: "0"}, "from 1 to 1000000"},
		{map[string]string{jobconfig.KeyPoisonMaxCount: "-1"}, "from 0 to 1000000000"},
	} {
		if _, err := jobconfig.Parse(tt.conf); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%v) = %v, want an error containing %q", tt.conf, err, tt.want)
		}
	}
}

func TestPoisonAllowed(t *testing.T) {
	one := 1
	tests := []struct {
		p           jobconfig.Poison
		dropped, in int64
		want        bool
	}{
		{jobconfig.Poison{}, 1, 1, true}, // the first is always allowed
		{jobconfig.Poison{}, 2, 1, false},
		{jobconfig.Poison{MaxPerMillion: 10}, 1, 100_000, true},
		{jobconfig.Poison{MaxPerMillion: 10}, 2, 100_000, false},
		{jobconfig.Poison{MaxPerMillion: 10}, 2, 100_001, true}, // rounded up
		{jobconfig.Poison{MaxPerMillion: 1_000_000}, 5, 5, true},
		{jobconfig.Poison{MaxPerMillion: 1_000_000, MaxCount: &one}, 2, 5, false},
	}
	for _, tt := range tests {
		if got := tt.p.Allowed(tt.dropped, tt.in); got != tt.want {
			t.Errorf("%+v.Allowed(%d, %d) = %v, want %v", tt.p, tt.dropped, tt.in, got, tt.want)
		}
	}
}

func TestCheckGraphNeedsDeadLetterPath(t *testing.T) {
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{{ID: 3, Name: "parse", Kind: jobgraph.KindMap,
		Config: map[string]string{jobgraph.ConfigPoisonRecords: "dead-letter"}}}}
	err := jobconfig.Default().CheckGraph(g)
	if err == nil || !strings.Contains(err.Error(), "operator 3 (parse)") || !strings.Contains(err.Error(), jobconfig.KeyDeadLetterPath) {
		t.Fatalf("CheckGraph = %v", err)
	}
	c, err := jobconfig.Parse(map[string]string{jobconfig.KeyDeadLetterPath: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckGraph(g); err != nil {
		t.Fatalf("with a path: %v", err)
	}
}
