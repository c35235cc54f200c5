package checkpoint_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/checkpoint"
)

func TestDefaultConfig(t *testing.T) {
	c := checkpoint.DefaultConfig()
	want := checkpoint.Config{Timeout: time.Minute, MaxConcurrent: 1, TolerableFailures: -1, Retained: 1}
	if c != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", c, want)
	}
	if c.Enabled() {
		t.Error("checkpointing is on by default")
	}
	for _, conf := range []map[string]string{nil, {}, {"parallelism.default": "4"}} {
		got, err := checkpoint.ParseConfig(conf)
		if err != nil || got != want {
			t.Errorf("ParseConfig(%v) = %+v, %v; want the defaults", conf, got, err)
		}
	}
}

func TestParseConfig(t *testing.T) {
	with := func(f func(*checkpoint.Config)) checkpoint.Config {
		c := checkpoint.DefaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name string
		conf map[string]string
		want checkpoint.Config
	}{
		{"interval", map[string]string{checkpoint.KeyInterval: "5s"},
			with(func(c *checkpoint.Config) { c.Interval = 5 * time.Second })},
		{"interval min", map[string]string{checkpoint.KeyInterval: "10ms"},
			with(func(c *checkpoint.Config) { c.Interval = 10 * time.Millisecond })},
		{"interval max", map[string]string{checkpoint.KeyInterval: "24h"},
			with(func(c *checkpoint.Config) { c.Interval = 24 * time.Hour })},
		{"interval 0 is off", map[string]string{checkpoint.KeyInterval: "0"}, checkpoint.DefaultConfig()},
		{"interval 0s is off", map[string]string{checkpoint.KeyInterval: "0s"}, checkpoint.DefaultConfig()},
		{"timeout", map[string]string{checkpoint.KeyTimeout: "90s"},
			with(func(c *checkpoint.Config) { c.Timeout = 90 * time.Second })},
		{"timeout min", map[string]string{checkpoint.KeyTimeout: "10ms"},
			with(func(c *checkpoint.Config) { c.Timeout = 10 * time.Millisecond })},
		{"min pause", map[string]string{checkpoint.KeyMinPause: "500ms"},
			with(func(c *checkpoint.Config) { c.MinPause = 500 * time.Millisecond })},
		{"min pause 0", map[string]string{checkpoint.KeyMinPause: "0"}, checkpoint.DefaultConfig()},
		{"max concurrent", map[string]string{checkpoint.KeyMaxConcurrent: "16"},
			with(func(c *checkpoint.Config) { c.MaxConcurrent = 16 })},
		{"tolerable 0", map[string]string{checkpoint.KeyTolerable: "0"},
			with(func(c *checkpoint.Config) { c.TolerableFailures = 0 })},
		{"tolerable max", map[string]string{checkpoint.KeyTolerable: "1000000"},
			with(func(c *checkpoint.Config) { c.TolerableFailures = 1_000_000 })},
		{"retained", map[string]string{checkpoint.KeyRetained: "100"},
			with(func(c *checkpoint.Config) { c.Retained = 100 })},
		{"all", map[string]string{
			checkpoint.KeyInterval:      "1s",
			checkpoint.KeyTimeout:       "2s",
			checkpoint.KeyMinPause:      "3s",
			checkpoint.KeyMaxConcurrent: "4",
			checkpoint.KeyTolerable:     "5",
			checkpoint.KeyRetained:      "6",
		}, checkpoint.Config{
			Interval: time.Second, Timeout: 2 * time.Second, MinPause: 3 * time.Second,
			MaxConcurrent: 4, TolerableFailures: 5, Retained: 6,
		}},
		{"interval off, others parsed", map[string]string{
			checkpoint.KeyInterval: "0",
			checkpoint.KeyRetained: "3",
		}, with(func(c *checkpoint.Config) { c.Retained = 3 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.conf)
			got, err := checkpoint.ParseConfig(tt.conf)
			if err != nil {
				t.Fatalf("ParseConfig(%v): %v", tt.conf, err)
			}
			if got != tt.want {
				t.Errorf("ParseConfig(%v) = %+v, want %+v", tt.conf, got, tt.want)
			}
			if got.Enabled() != (tt.want.Interval > 0) {
				t.Errorf("Enabled() = %v with interval %v", got.Enabled(), got.Interval)
			}
			if !maps.Equal(tt.conf, before) {
				t.Errorf("ParseConfig changed its input to %v", tt.conf)
			}
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	tests := []struct {
		key   string
		value string
	}{
		{checkpoint.KeyInterval, "5ms"},
		{checkpoint.KeyInterval, "25h"},
		{checkpoint.KeyInterval, "-1s"},
		{checkpoint.KeyInterval, "5"},
		{checkpoint.KeyInterval, "soon"},
		{checkpoint.KeyInterval, ""},
		{checkpoint.KeyTimeout, "0"},
		{checkpoint.KeyTimeout, "1ms"},
		{checkpoint.KeyTimeout, "25h"},
		{checkpoint.KeyTimeout, "1m30"},
		{checkpoint.KeyMinPause, "-1ms"},
		{checkpoint.KeyMinPause, "25h"},
		{checkpoint.KeyMinPause, "x"},
		{checkpoint.KeyMaxConcurrent, "0"},
		{checkpoint.KeyMaxConcurrent, "17"},
		{checkpoint.KeyMaxConcurrent, "1.5"},
		{checkpoint.KeyMaxConcurrent, "two"},
		{checkpoint.KeyMaxConcurrent, ""},
		{checkpoint.KeyTolerable, "-1"},
		{checkpoint.KeyTolerable, "1000001"},
		{checkpoint.KeyTolerable, "many"},
		{checkpoint.KeyRetained, "0"},
		{checkpoint.KeyRetained, "101"},
		{checkpoint.KeyRetained, " 1"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			conf := map[string]string{tt.key: tt.value}
			_, err := checkpoint.ParseConfig(conf)
			if err == nil {
				t.Fatalf("ParseConfig(%v) succeeded", conf)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the key %s", err, tt.key)
			}
			if !strings.Contains(err.Error(), `"`+tt.value+`"`) {
				t.Errorf("error %q does not quote the value %q", err, tt.value)
			}
			if len(conf) != 1 || conf[tt.key] != tt.value {
				t.Errorf("ParseConfig changed its input to %v", conf)
			}
		})
	}
}

func TestParseConfigNamesTheBadKey(t *testing.T) {
	// With one bad key among good ones, the error names the bad one.
	conf := map[string]string{
		checkpoint.KeyInterval:      "1s",
		checkpoint.KeyTimeout:       "1m",
		checkpoint.KeyMaxConcurrent: "2",
		checkpoint.KeyRetained:      "500",
	}
	_, err := checkpoint.ParseConfig(conf)
	if err == nil || !strings.Contains(err.Error(), checkpoint.KeyRetained) {
		t.Fatalf("err = %v, want one naming %s", err, checkpoint.KeyRetained)
	}
	for _, k := range []string{checkpoint.KeyInterval, checkpoint.KeyTimeout, checkpoint.KeyMaxConcurrent} {
		if strings.Contains(err.Error(), k) {
			t.Errorf("error %q names the good key %s", err, k)
		}
	}
}
