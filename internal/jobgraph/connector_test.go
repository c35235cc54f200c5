package jobgraph

import (
	"slices"
	"strings"
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

func TestNexmarkConfig(t *testing.T) {
	for _, tt := range []struct {
		config map[string]string
		want   NexmarkSettings
		err    string
	}{
		{nil, NexmarkSettings{OutOfOrderGroup: 1}, ""},
		{map[string]string{"events": "100", "rate": "5000", "seed": "18446744073709551615", "base-time": "1700000000000", "out-of-order-group": "8"},
			NexmarkSettings{Events: 100, Rate: 5000, Seed: 1<<64 - 1, BaseTime: 1700000000000, OutOfOrderGroup: 8}, ""},
		{map[string]string{"events": "ten"}, NexmarkSettings{}, `events "ten" is not a decimal integer`},
		{map[string]string{"rate": "-1"}, NexmarkSettings{}, `rate "-1"`},
		{map[string]string{"rate": "1000000001"}, NexmarkSettings{}, `rate "1000000001"`},
		{map[string]string{"seed": "-1"}, NexmarkSettings{}, `seed "-1" is not an unsigned`},
		{map[string]string{"out-of-order-group": "0"}, NexmarkSettings{}, `out-of-order-group "0" is not a decimal integer from 1`},
		{map[string]string{"evnets": "1"}, NexmarkSettings{}, `unknown config key "evnets" (known: events, rate, seed, base-time, out-of-order-group)`},
	} {
		v := Vertex{Connector: ConnectorNexmark, Config: tt.config}
		got, err := v.Nexmark()
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%v: %+v, %v; want %+v", tt.config, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%v: error %v, want %q", tt.config, err, tt.err)
		}
	}
}
