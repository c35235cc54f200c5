package jobconfig_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
)

func TestDefaultCheckpoints(t *testing.T) {
	c := jobconfig.DefaultCheckpoints()
	want := jobconfig.Checkpoints{Timeout: time.Minute, MaxConcurrent: 1, TolerableFailures: -1, Retained: 1, Retention: jobconfig.DeleteOnCancellation}
	if c != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", c, want)
	}
	if c.Enabled() {
		t.Error("checkpointing is on by default")
	}
	if c.KeepOnCancel() || (jobconfig.Checkpoints{}).KeepOnCancel() {
		t.Error("a canceled job keeps its checkpoints by default")
	}
	for _, conf := range []map[string]string{nil, {}} {
		got, err := parseCheckpoints(conf)
		if err != nil || got != want {
			t.Errorf("Parse(%v) = %+v, %v; want the defaults", conf, got, err)
		}
	}
}

func TestParseCheckpoints(t *testing.T) {
	with := func(f func(*jobconfig.Checkpoints)) jobconfig.Checkpoints {
		c := jobconfig.DefaultCheckpoints()
		f(&c)
		return c
	}
	tests := []struct {
		name string
		conf map[string]string
		want jobconfig.Checkpoints
	}{
		{"interval", map[string]string{jobconfig.KeyCheckpointInterval: "5s"},
			with(func(c *jobconfig.Checkpoints) { c.Interval = 5 * time.Second })},
		{"interval min", map[string]string{jobconfig.KeyCheckpointInterval: "10ms"},
			with(func(c *jobconfig.Checkpoints) { c.Interval = 10 * time.Millisecond })},
		{"interval max", map[string]string{jobconfig.KeyCheckpointInterval: "24h"},
			with(func(c *jobconfig.Checkpoints) { c.Interval = 24 * time.Hour })},
		{"interval 0 is off", map[string]string{jobconfig.KeyCheckpointInterval: "0"}, jobconfig.DefaultCheckpoints()},
		{"interval 0s is off", map[string]string{jobconfig.KeyCheckpointInterval: "0s"}, jobconfig.DefaultCheckpoints()},
		{"timeout", map[string]string{jobconfig.KeyCheckpointTimeout: "90s"},
			with(func(c *jobconfig.Checkpoints) { c.Timeout = 90 * time.Second })},
		{"timeout min", map[string]string{jobconfig.KeyCheckpointTimeout: "10ms"},
			with(func(c *jobconfig.Checkpoints) { c.Timeout = 10 * time.Millisecond })},
		{"min pause", map[string]string{jobconfig.KeyCheckpointMinPause: "500ms"},
			with(func(c *jobconfig.Checkpoints) { c.MinPause = 500 * time.Millisecond })},
		{"min pause 0", map[string]string{jobconfig.KeyCheckpointMinPause: "0"}, jobconfig.DefaultCheckpoints()},
		{"max concurrent", map[string]string{jobconfig.KeyCheckpointMaxConcurrent: "16"},
			with(func(c *jobconfig.Checkpoints) { c.MaxConcurrent = 16 })},
		{"tolerable 0", map[string]string{jobconfig.KeyCheckpointTolerable: "0"},
			with(func(c *jobconfig.Checkpoints) { c.TolerableFailures = 0 })},
		{"tolerable max", map[string]string{jobconfig.KeyCheckpointTolerable: "1000000"},
			with(func(c *jobconfig.Checkpoints) { c.TolerableFailures = 1_000_000 })},
		{"retained", map[string]string{jobconfig.KeyCheckpointsRetained: "100"},
			with(func(c *jobconfig.Checkpoints) { c.Retained = 100 })},
		{"retain on cancellation", map[string]string{jobconfig.KeyCheckpointRetention: "RETAIN_ON_CANCELLATION"},
			with(func(c *jobconfig.Checkpoints) { c.Retention = jobconfig.RetainOnCancellation })},
		{"retention in lower case", map[string]string{jobconfig.KeyCheckpointRetention: "retain_on_cancellation"},
			with(func(c *jobconfig.Checkpoints) { c.Retention = jobconfig.RetainOnCancellation })},
		{"delete on cancellation", map[string]string{jobconfig.KeyCheckpointRetention: "DELETE_ON_CANCELLATION"}, jobconfig.DefaultCheckpoints()},
		{"all", map[string]string{
			jobconfig.KeyCheckpointInterval:      "1s",
			jobconfig.KeyCheckpointTimeout:       "2s",
			jobconfig.KeyCheckpointMinPause:      "3s",
			jobconfig.KeyCheckpointMaxConcurrent: "4",
			jobconfig.KeyCheckpointTolerable:     "5",
			jobconfig.KeyCheckpointsRetained:     "6",
			jobconfig.KeyCheckpointRetention:     "RETAIN_ON_CANCELLATION",
		}, jobconfig.Checkpoints{
			Interval: time.Second, Timeout: 2 * time.Second, MinPause: 3 * time.Second,
			MaxConcurrent: 4, TolerableFailures: 5, Retained: 6, Retention: jobconfig.RetainOnCancellation,
		}},
		{"interval off, others parsed", map[string]string{
			jobconfig.KeyCheckpointInterval:  "0",
			jobconfig.KeyCheckpointsRetained: "3",
		}, with(func(c *jobconfig.Checkpoints) { c.Retained = 3 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.conf)
			got, err := parseCheckpoints(tt.conf)
			if err != nil {
				t.Fatalf("Parse(%v): %v", tt.conf, err)
			}
			if got != tt.want {
				t.Errorf("Parse(%v) = %+v, want %+v", tt.conf, got, tt.want)
			}
			if got.Enabled() != (tt.want.Interval > 0) {
				t.Errorf("Enabled() = %v with interval %v", got.Enabled(), got.Interval)
			}
			if !maps.Equal(tt.conf, before) {
				t.Errorf("Parse changed its input to %v", tt.conf)
			}
		})
	}
}

func TestParseCheckpointsRejects(t *testing.T) {
	tests := []struct {
		key   string
		value string
	}{
		{jobconfig.KeyCheckpointInterval, "5ms"},
		{jobconfig.KeyCheckpointInterval, "25h"},
		{jobconfig.KeyCheckpointInterval, "-1s"},
		{jobconfig.KeyCheckpointInterval, "5"},
		{jobconfig.KeyCheckpointInterval, "soon"},
		{jobconfig.KeyCheckpointInterval, ""},
		{jobconfig.KeyCheckpointTimeout, "0"},
		{jobconfig.KeyCheckpointTimeout, "1ms"},
		{jobconfig.KeyCheckpointTimeout, "25h"},
		{jobconfig.KeyCheckpointTimeout, "1m30"},
		{jobconfig.KeyCheckpointMinPause, "-1ms"},
		{jobconfig.KeyCheckpointMinPause, "25h"},
		{jobconfig.KeyCheckpointMinPause, "x"},
		{jobconfig.KeyCheckpointMaxConcurrent, "0"},
		{jobconfig.KeyCheckpointMaxConcurrent, "17"},
		{jobconfig.KeyCheckpointMaxConcurrent, "1.5"},
		{jobconfig.KeyCheckpointMaxConcurrent, "two"},
		{jobconfig.KeyCheckpointMaxConcurrent, ""},
		{jobconfig.KeyCheckpointTolerable, "-1"},
		{jobconfig.KeyCheckpointTolerable, "1000001"},
		{jobconfig.KeyCheckpointTolerable, "many"},
		{jobconfig.KeyCheckpointsRetained, "0"},
		{jobconfig.KeyCheckpointsRetained, "101"},
		{jobconfig.KeyCheckpointsRetained, " 1"},
		{jobconfig.KeyCheckpointRetention, "RETAIN"},
		{jobconfig.KeyCheckpointRetention, "NO_EXTERNALIZED_CHECKPOINTS"},
		{jobconfig.KeyCheckpointRetention, ""},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			conf := map[string]string{tt.key: tt.value}
			_, err := parseCheckpoints(conf)
			if err == nil {
				t.Fatalf("Parse(%v) succeeded", conf)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the key %s", err, tt.key)
			}
			if !strings.Contains(err.Error(), `"`+tt.value+`"`) {
				t.Errorf("error %q does not quote the value %q", err, tt.value)
			}
			if len(conf) != 1 || conf[tt.key] != tt.value {
				t.Errorf("Parse changed its input to %v", conf)
			}
		})
	}
}

func TestParseNamesTheBadKey(t *testing.T) {
	// With one bad key among good ones, the error names the bad one.
	conf := map[string]string{
		jobconfig.KeyCheckpointInterval:      "1s",
		jobconfig.KeyCheckpointTimeout:       "1m",
		jobconfig.KeyCheckpointMaxConcurrent: "2",
		jobconfig.KeyCheckpointsRetained:     "500",
	}
	_, err := parseCheckpoints(conf)
	if err == nil || !strings.Contains(err.Error(), jobconfig.KeyCheckpointsRetained) {
		t.Fatalf("err = %v, want one naming %s", err, jobconfig.KeyCheckpointsRetained)
	}
	for _, k := range []string{jobconfig.KeyCheckpointInterval, jobconfig.KeyCheckpointTimeout, jobconfig.KeyCheckpointMaxConcurrent} {
		if strings.Contains(err.Error(), k) {
			t.Errorf("error %q names the good key %s", err, k)
		}
	}
}

// parseCheckpoints is the checkpoint part of Parse.
func parseCheckpoints(conf map[string]string) (jobconfig.Checkpoints, error) {
	c, err := jobconfig.Parse(conf)
	return c.Checkpoints, err
}
