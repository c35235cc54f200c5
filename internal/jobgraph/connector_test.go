package jobgraph

import (
	"slices"
	"testing"
)

func TestConnectorConfig(t *testing.T) {
	for _, tt := range []struct {
		paths string
		want  []string
	}{
		{`["a.txt","b/"]`, []string{"a.txt", "b/"}},
		{`[]`, nil},
		{``, nil},
		{`"a.txt"`, nil},
		{`[1]`, nil},
	} {
		v := Vertex{Config: map[string]string{ConfigPaths: tt.paths}}
		got, err := v.SourcePaths()
		if (err == nil) != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("SourcePaths(%q) = %q, %v; want %q", tt.paths, got, err, tt.want)
		}
	}
	v := Vertex{Config: map[string]string{ConfigPath: "results/wc"}}
	if v.SinkPath() != "results/wc" || (&Vertex{}).SinkPath() != "" {
		t.Error("SinkPath")
	}
}
