package jobgraph

import (
	"strings"
	"testing"
	"time"
)

func TestVertexWatermarks(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]string
		want Watermarks
		err  string // substring; "" = valid
	}{
		{"none", nil, Watermarks{Interval: DefaultWatermarkInterval}, ""},
		{"bounded", map[string]string{"watermark": "bounded", "watermark.max-out-of-orderness": "5s"},
			Watermarks{Kind: WatermarkBounded, MaxOutOfOrderness: 5 * time.Second, Interval: DefaultWatermarkInterval}, ""},
		{"bounded without a bound is 0", map[string]string{"watermark": "bounded"},
			Watermarks{Kind: WatermarkBounded, Interval: DefaultWatermarkInterval}, ""},
		{"monotonous, idle, interval", map[string]string{"watermark": "monotonous", "watermark.idle-timeout": "1m", "watermark.interval": "50ms"},
			Watermarks{Kind: WatermarkMonotonous, IdleTimeout: time.Minute, Interval: 50 * time.Millisecond}, ""},
		{"guest", map[string]string{"watermark": "guest"}, Watermarks{Kind: WatermarkGuest, Interval: DefaultWatermarkInterval}, ""},
		{"unknown strategy", map[string]string{"watermark": "punctuated"}, Watermarks{}, `watermark "punctuated" is not a strategy: use "bounded", "monotonous" or "guest"`},
		{"empty strategy", map[string]string{"watermark": ""}, Watermarks{}, `watermark is empty`},
		{"negative bound", map[string]string{"watermark": "bounded", "watermark.max-out-of-orderness": "-1s"}, Watermarks{}, "watermark.max-out-of-orderness -1s is negative"},
		{"unparsable bound", map[string]string{"watermark": "bounded", "watermark.max-out-of-orderness": "5"}, Watermarks{}, `watermark.max-out-of-orderness "5" is not a duration`},
		{"huge bound", map[string]string{"watermark": "bounded", "watermark.max-out-of-orderness": "100000h"}, Watermarks{}, "above the limit"},
		{"negative idle timeout", map[string]string{"watermark": "monotonous", "watermark.idle-timeout": "-5s"}, Watermarks{}, "watermark.idle-timeout -5s is negative"},
		{"zero interval", map[string]string{"watermark": "monotonous", "watermark.interval": "0s"}, Watermarks{}, "watermark.interval 0s must be above 0"},
		{"bound on monotonous", map[string]string{"watermark": "monotonous", "watermark.max-out-of-orderness": "1s"}, Watermarks{}, `it belongs to "bounded" only`},
		{"key without strategy", map[string]string{"watermark.idle-timeout": "1s"}, Watermarks{}, "watermark.idle-timeout is set but watermark is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Vertex{ID: 1, Kind: KindSource, Config: tt.cfg}
			got, err := v.Watermarks()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			// SetWatermarks is the inverse.
			var w Vertex
			w.SetWatermarks(got)
			back, err := w.Watermarks()
			if err != nil || back != got {
				t.Fatalf("round trip: %+v, %v; want %+v", back, err, got)
			}
		})
	}
}

func TestValidateWatermarks(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(g *Graph)
		want   string
	}{
		{"on a host source", func(g *Graph) {
			g.Vertices[0].SetWatermarks(Watermarks{Kind: WatermarkBounded, MaxOutOfOrderness: time.Second})
		}, ""},
		{"on a map", func(g *Graph) {
			g.Vertices[1].SetWatermarks(Watermarks{Kind: WatermarkMonotonous})
		}, `vertex 2 "tokenize": a watermark strategy is set on a flat_map: only sources generate watermarks`},
		{"a lone key on a sink", func(g *Graph) {
			g.Vertices[4].Config = map[string]string{ConfigWatermarkIdleTimeout: "1s"}
		}, `vertex 5 "out": a watermark strategy is set on a sink`},
		{"guest strategy on a host connector", func(g *Graph) {
			g.Vertices[0].SetWatermarks(Watermarks{Kind: WatermarkGuest})
		}, `vertex 1 "lines": the "guest" watermark strategy needs a guest source`},
		{"negative out-of-orderness", func(g *Graph) {
			g.Vertices[0].Config = map[string]string{ConfigWatermark: "bounded", ConfigWatermarkMaxOutOfOrderness: "-2s"}
		}, `vertex 1 "lines": watermark.max-out-of-orderness -2s is negative`},
		{"unknown strategy", func(g *Graph) {
			g.Vertices[0].Config = map[string]string{ConfigWatermark: "eventually"}
		}, `vertex 1 "lines": watermark "eventually" is not a strategy`},
		{"guest source", func(g *Graph) {
			g.Vertices[0].Connector = ""
			g.Vertices[0].SetWatermarks(Watermarks{Kind: WatermarkGuest, IdleTimeout: time.Second})
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := wordcount()
			tt.mutate(g)
			err := Validate(g, 2, 0)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
