package jobgraph

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// wordcount is the graph examples/wordcount declares.
func wordcount() *Graph {
	return &Graph{
		Name: "wordcount",
		Vertices: []Vertex{
			{ID: 1, Name: "lines", Kind: KindSource, Connector: ConnectorText},
			{ID: 2, Name: "tokenize", Kind: KindFlatMap},
			{ID: 3, Name: "word", Kind: KindKeyBy},
			{ID: 4, Name: "sum", Kind: KindReduce},
			{ID: 5, Name: "out", Kind: KindSink, Connector: ConnectorCollect},
		},
		Edges: []Edge{
			{Source: 1, Target: 2, Partitioner: Forward},
			{Source: 2, Target: 3, Partitioner: Forward},
			{Source: 3, Target: 4, Partitioner: Hash},
			{Source: 4, Target: 5, Partitioner: Forward},
		},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(g *Graph)
		want   string // substring of the error; "" = valid
	}{
		{"wordcount", func(g *Graph) {}, ""},
		{"nil-like empty", func(g *Graph) { g.Vertices, g.Edges = nil, nil }, "no operators"},
		{"duplicate id", func(g *Graph) { g.Vertices[1].ID = 1 }, `vertex 1 "tokenize": duplicate vertex id`},
		{"unknown kind", func(g *Graph) { g.Vertices[1].Kind = "join" }, `unknown kind "join"`},
		{"name too long", func(g *Graph) { g.Vertices[1].Name = strings.Repeat("n", MaxNameBytes+1) }, `vertex 2 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"... (257 bytes): the name is 257 bytes long, above the limit of 256`},
		{"longest name", func(g *Graph) { g.Vertices[1].Name = strings.Repeat("ü", MaxNameBytes/2) }, ""},
		{"terminal escape in a name", func(g *Graph) { g.Vertices[1].Name = "tok\x1b[2Jenize" }, `vertex 2 "tok\x1b[2Jenize": the name contains U+001B at byte 3, which is not printable`},
		{"newline in the job name", func(g *Graph) { g.Name = "word\ncount" }, `job name "word\ncount" contains U+000A at byte 4`},
		{"direction override in a name", func(g *Graph) { g.Vertices[0].Name = "lines\u202e" }, `contains U+202E at byte 5`},
		{"invalid UTF-8 in a name", func(g *Graph) { g.Vertices[0].Name = "li\xffnes" }, `is not valid UTF-8 (byte 2)`},
		{"escape in a config key", func(g *Graph) { g.Vertices[3].Config = map[string]string{"emit\x07": "final"} }, `config key "emit\a" contains U+0007`},
		{"any config value", func(g *Graph) { g.Vertices[3].Config = map[string]string{"emit": "final\x1b\n"} }, ""},
		{"huge unknown kind is cut in the message", func(g *Graph) { g.Vertices[1].Kind = Kind(strings.Repeat("k", 1<<20)) }, `unknown kind "kkkk`},
		{"unknown partitioner", func(g *Graph) { g.Edges[0].Partitioner = "random" }, `edge 1->2: unknown partitioner "random"`},
		{"unknown connector", func(g *Graph) { g.Vertices[0].Connector = "kafka" }, `unknown connector "kafka"`},
		{"kafka source with a watermark strategy", func(g *Graph) {
			g.Vertices[0].Connector = ConnectorKafkaSource
			g.Vertices[0].Config = map[string]string{ConfigKafkaBrokers: "127.0.0.1:9092", ConfigKafkaTopics: "bids", ConfigWatermark: "bounded", ConfigWatermarkMaxOutOfOrderness: "1s"}
		}, ""},
		{"kafka source without a topic", func(g *Graph) {
			g.Vertices[0].Connector, g.Vertices[0].Config = ConnectorKafkaSource, map[string]string{ConfigKafkaBrokers: "127.0.0.1:9092"}
		}, "kafka source: no topic"},
		{"kafka sink", func(g *Graph) {
			g.Vertices[4].Connector, g.Vertices[4].Config = ConnectorKafkaSink, map[string]string{ConfigKafkaBrokers: "127.0.0.1:9092", ConfigKafkaTopic: "out"}
		}, ""},
		{"kafka sink with a bad topic header", func(g *Graph) {
			g.Vertices[4].Connector, g.Vertices[4].Config = ConnectorKafkaSink, map[string]string{ConfigKafkaBrokers: "127.0.0.1:9092", ConfigKafkaTopic: "out", ConfigKafkaTopicHeader: ""}
		}, "kafka sink: topic-header"},
		{"nexmark source into a blackhole", func(g *Graph) {
			g.Vertices[0].Connector, g.Vertices[0].Config = ConnectorNexmark, map[string]string{ConfigNexmarkEvents: "1000", ConfigNexmarkRate: "0"}
			g.Vertices[4].Connector = ConnectorBlackhole
		}, ""},
		{"nexmark source with a bad count", func(g *Graph) {
			g.Vertices[0].Connector, g.Vertices[0].Config = ConnectorNexmark, map[string]string{ConfigNexmarkEvents: "-5"}
		}, `vertex 1 "lines": nexmark source: events "-5" is not a decimal integer from 0 to`},
		{"blackhole as a source", func(g *Graph) { g.Vertices[0].Connector = ConnectorBlackhole }, `connector "blackhole" is a sink, not a source`},
		{"connector on wrong kind", func(g *Graph) { g.Vertices[4].Connector = ConnectorText }, `connector "text" is a source, not a sink`},
		{"dangling edge target", func(g *Graph) { g.Edges = append(g.Edges, Edge{Source: 4, Target: 9, Partitioner: Forward}) }, "edge 4->9: no vertex 9"},
		{"dangling edge source", func(g *Graph) { g.Edges = append(g.Edges, Edge{Source: 9, Target: 5, Partitioner: Forward}) }, "edge 9->5: no vertex 9"},
		{"self loop", func(g *Graph) { g.Edges = append(g.Edges, Edge{Source: 2, Target: 2, Partitioner: Forward}) }, "cannot feed itself"},
		{"duplicate edge", func(g *Graph) { g.Edges = append(g.Edges, g.Edges[0]) }, "edge 1->2: duplicate edge"},
		{"cycle", func(g *Graph) {
			g.Edges = append(g.Edges, Edge{Source: 4, Target: 2, Partitioner: Rebalance})
			g.Vertices[1].Kind = KindMap
		}, "cycle through vertices"},
		{"negative parallelism", func(g *Graph) { g.Vertices[1].Parallelism = -1 }, "parallelism -1 is negative"},
		{"parallelism above max", func(g *Graph) { g.MaxParallelism = 4; g.Vertices[3].Parallelism = 8 }, "parallelism 8 is above the max parallelism 4"},
		{"max parallelism negative", func(g *Graph) { g.MaxParallelism = -3 }, "max parallelism -3"},
		{"max parallelism above limit", func(g *Graph) { g.MaxParallelism = 1 << 20 }, "above the cluster's limit"},
		{"forward with different parallelism", func(g *Graph) { g.Vertices[1].Parallelism = 3 }, "forward edge between parallelism 3 and 2"},
		{"reduce not fed by hash", func(g *Graph) { g.Edges[2].Partitioner = Rebalance }, "keyed (reduce) but fed by a rebalance edge"},
		{"source with input", func(g *Graph) {
			g.Vertices = append(g.Vertices, Vertex{ID: 6, Kind: KindSource})
			g.Edges = append(g.Edges, Edge{Source: 6, Target: 1, Partitioner: Forward})
		}, `vertex 1 "lines": a source cannot have inputs`},
		{"sink with output", func(g *Graph) {
			g.Vertices = append(g.Vertices, Vertex{ID: 6, Kind: KindSink})
			g.Edges = append(g.Edges, Edge{Source: 5, Target: 6, Partitioner: Forward})
		}, `vertex 5 "out": a sink cannot have outputs`},
		{"dead end", func(g *Graph) { g.Edges = g.Edges[:3] }, `vertex 4 "sum": has no outputs`},
		{"orphan map", func(g *Graph) { g.Vertices = append(g.Vertices, Vertex{ID: 7, Kind: KindMap}) }, "vertex 7: has no inputs"},
		{"explicit default parallelism ok", func(g *Graph) {
			for i := range g.Vertices {
				g.Vertices[i].Parallelism = 2
			}
		}, ""},
		{"fan out and union", func(g *Graph) {
			g.Vertices = append(g.Vertices, Vertex{ID: 6, Name: "copy", Kind: KindSink, Connector: ConnectorFile, Config: map[string]string{"path": "out/copy"}})
			g.Edges = append(g.Edges, Edge{Source: 4, Target: 6, Partitioner: Broadcast})
		}, ""},
		{"file sink without path", func(g *Graph) { g.Vertices[4].Connector = ConnectorFile }, `file sink path "" is empty`},
		{"file sink absolute path", func(g *Graph) {
			g.Vertices[4].Connector, g.Vertices[4].Config = ConnectorFile, map[string]string{"path": "/etc/out"}
		}, "is absolute"},
		{"file sink escaping path", func(g *Graph) {
			g.Vertices[4].Connector, g.Vertices[4].Config = ConnectorFile, map[string]string{"path": "out/../../b"}
		}, `has a ".." segment`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := wordcount()
			tt.mutate(g)
			err := Validate(g, 2, 1024)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted the graph; want an error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidGraph) {
				t.Errorf("error %v does not wrap ErrInvalidGraph", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if err := Validate(nil, 1, 0); !errors.Is(err, ErrInvalidGraph) {
		t.Errorf("Validate(nil) = %v", err)
	}
}

func TestChains(t *testing.T) {
	tests := []struct {
		name string
		g    func() *Graph
		want []Chain
	}{
		{"wordcount", wordcount, []Chain{{Vertices: []int{1, 2, 3}, Parallelism: 2}, {Vertices: []int{4, 5}, Parallelism: 2}}},
		{"parallelism breaks a chain", func() *Graph {
			g := wordcount()
			g.Vertices[4].Parallelism = 1
			g.Edges[3].Partitioner = Rebalance
			return g
		}, []Chain{{Vertices: []int{1, 2, 3}, Parallelism: 2}, {Vertices: []int{4}, Parallelism: 2}, {Vertices: []int{5}, Parallelism: 1}}},
		{"fan out breaks a chain", func() *Graph {
			g := wordcount()
			g.Vertices = append(g.Vertices, Vertex{ID: 6, Kind: KindSink, Connector: ConnectorFile, Config: map[string]string{"path": "out"}})
			g.Edges = append(g.Edges, Edge{Source: 2, Target: 6, Partitioner: Forward})
			return g
		}, []Chain{{Vertices: []int{1, 2}, Parallelism: 2}, {Vertices: []int{3}, Parallelism: 2}, {Vertices: []int{4, 5}, Parallelism: 2}, {Vertices: []int{6}, Parallelism: 2}}},
		{"union breaks a chain", func() *Graph {
			return &Graph{
				Vertices: []Vertex{
					{ID: 10, Kind: KindSource}, {ID: 20, Kind: KindSource}, {ID: 30, Kind: KindMap}, {ID: 40, Kind: KindSink},
				},
				Edges: []Edge{
					{Source: 10, Target: 30, Partitioner: Forward},
					{Source: 20, Target: 30, Partitioner: Forward},
					{Source: 30, Target: 40, Partitioner: Forward},
				},
			}
		}, []Chain{{Vertices: []int{10}, Parallelism: 2}, {Vertices: []int{20}, Parallelism: 2}, {Vertices: []int{30, 40}, Parallelism: 2}}},
		{"declaration order does not matter", func() *Graph {
			g := wordcount()
			g.Vertices[0], g.Vertices[4] = g.Vertices[4], g.Vertices[0]
			g.Vertices[1], g.Vertices[3] = g.Vertices[3], g.Vertices[1]
			return g
		}, []Chain{{Vertices: []int{1, 2, 3}, Parallelism: 2}, {Vertices: []int{4, 5}, Parallelism: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.g()
			if err := Validate(g, 2, 0); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := Chains(g, 2)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Chains = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestChainsCycleStillPlacesEveryVertex(t *testing.T) {
	g := wordcount()
	g.Edges = append(g.Edges, Edge{Source: 4, Target: 2, Partitioner: Rebalance})
	n := 0
	for _, c := range Chains(g, 1) {
		n += len(c.Vertices)
	}
	if n != len(g.Vertices) {
		t.Errorf("chains hold %d vertices, want %d", n, len(g.Vertices))
	}
}

// FuzzValidateGraph feeds arbitrary JSON graphs to Validate and Chains: neither
// may panic, and a valid graph's chains hold every vertex exactly once.
func FuzzValidateGraph(f *testing.F) {
	b, _ := json.Marshal(wordcount())
	f.Add(b)
	f.Add([]byte(`{"vertices":[{"id":1,"kind":"source"},{"id":1,"kind":"sink"}],"edges":[{"source":1,"target":1,"partitioner":"forward"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g Graph
		if json.Unmarshal(b, &g) != nil {
			return
		}
		err := Validate(&g, 2, 4096)
		chains := Chains(&g, 2)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, c := range chains {
			for _, id := range c.Vertices {
				if seen[id] {
					t.Fatalf("vertex %d in two chains", id)
				}
				seen[id] = true
			}
		}
		if len(seen) != len(g.Vertices) {
			t.Fatalf("chains hold %d vertices, want %d", len(seen), len(g.Vertices))
		}
	})
}

func TestValidateRefusesHugeGraphs(t *testing.T) {
	g := &Graph{}
	for i := range MaxVertices + 1 {
		g.Vertices = append(g.Vertices, Vertex{ID: i + 1, Name: "v", Kind: KindMap})
	}
	if err := Validate(g, 1, 0); !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), "at most 1024") {
		t.Fatalf("%d vertices: %v", len(g.Vertices), err)
	}
	g = &Graph{Vertices: []Vertex{{ID: 1, Kind: KindSource, Connector: ConnectorText}}, Edges: make([]Edge, MaxEdges+1)}
	if err := Validate(g, 1, 0); !errors.Is(err, ErrInvalidGraph) || !strings.Contains(err.Error(), "4097 edges") {
		t.Fatalf("%d edges: %v", len(g.Edges), err)
	}
}
