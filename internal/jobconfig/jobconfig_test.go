package jobconfig_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

func ptr[T any](v T) *T { return &v }

func TestParseDefaults(t *testing.T) {
	for _, conf := range []map[string]string{nil, {}} {
		c, err := jobconfig.Parse(conf)
		if err != nil || !reflect.DeepEqual(c, jobconfig.Default()) {
			t.Errorf("Parse(%v) = %+v, %v; want the defaults", conf, c, err)
		}
	}
	if c := jobconfig.Default(); c.Clock != jobconfig.ClockVirtual || c.Inputs != nil || c.Restart != (jobconfig.Restart{}) {
		t.Errorf("Default() = %+v", c)
	}
}

func TestParse(t *testing.T) {
	with := func(f func(*jobconfig.Config)) jobconfig.Config {
		c := jobconfig.Default()
		f(&c)
		return c
	}
	tests := []struct {
		name string
		conf map[string]string
		want jobconfig.Config
	}{
		{"off", map[string]string{"restart-strategy": "off"}, with(func(c *jobconfig.Config) { c.Restart.Strategy = jobconfig.RestartNone })},
		{"disable", map[string]string{"restart-strategy": "disable"}, with(func(c *jobconfig.Config) { c.Restart.Strategy = jobconfig.RestartNone })},
		{"fixeddelay", map[string]string{"restart-strategy": "fixeddelay", "restart-strategy.fixed-delay.attempts": "2", "restart-strategy.fixed-delay.delay": "250ms"},
			with(func(c *jobconfig.Config) {
				c.Restart = jobconfig.Restart{Strategy: jobconfig.RestartFixedDelay, Attempts: ptr(2), Delay: ptr(250 * time.Millisecond)}
			})},
		{"exponential keys", map[string]string{
			"restart-strategy": "exponentialdelay",
			"restart-strategy.exponential-delay.initial-backoff":               "100ms",
			"restart-strategy.exponential-delay.max-backoff":                   "1m",
			"restart-strategy.exponential-delay.backoff-multiplier":            "1.5",
			"restart-strategy.exponential-delay.reset-backoff-threshold":       "10m",
			"restart-strategy.exponential-delay.jitter-factor":                 "0",
			"restart-strategy.exponential-delay.attempts-before-reset-backoff": "7",
		}, with(func(c *jobconfig.Config) {
			c.Restart = jobconfig.Restart{Strategy: jobconfig.RestartExponentialDelay, InitialBackoff: ptr(100 * time.Millisecond), MaxBackoff: ptr(time.Minute),
				BackoffMultiplier: ptr(1.5), ResetBackoffThreshold: ptr(10 * time.Minute), JitterFactor: ptr(0.0), AttemptsBeforeReset: ptr(7)}
		})},
		{"failure-rate keys", map[string]string{
			"restart-strategy": "failurerate",
			"restart-strategy.failure-rate.max-failures-per-interval": "3",
			"restart-strategy.failure-rate.failure-rate-interval":     "5m",
			"restart-strategy.failure-rate.delay":                     "0s",
		}, with(func(c *jobconfig.Config) {
			c.Restart = jobconfig.Restart{Strategy: jobconfig.RestartFailureRate, MaxFailuresPerInterval: ptr(3), FailureRateInterval: ptr(5 * time.Minute), FailureRateDelay: ptr(time.Duration(0))}
		})},
		{"wall clock", map[string]string{"sandbox.clock": "wall"}, with(func(c *jobconfig.Config) { c.Clock = jobconfig.ClockWall })},
		{"call fuel", map[string]string{"sandbox.call-fuel": "5000000"}, with(func(c *jobconfig.Config) { c.CallFuel = 5_000_000 })},
		{"virtual clock", map[string]string{"sandbox.clock": "virtual"}, jobconfig.Default()},
		{"inputs", map[string]string{"inputs": `{"a.txt": "tenants/t/uploads/1/a.txt", "dir": "tenants/t/uploads/1/dir/"}`},
			with(func(c *jobconfig.Config) {
				c.Inputs = map[string]string{"a.txt": "tenants/t/uploads/1/a.txt", "dir": "tenants/t/uploads/1/dir/"}
			})},
		{"empty inputs", map[string]string{"inputs": `{}`}, jobconfig.Default()},
		{"null inputs", map[string]string{"inputs": `null`}, jobconfig.Default()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.conf)
			got, err := jobconfig.Parse(tt.conf)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%v) = %+v, %v\nwant %+v", tt.conf, got, err, tt.want)
			}
			if !maps.Equal(tt.conf, before) {
				t.Errorf("Parse changed its input to %v", tt.conf)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]string
		err  string
	}{
		{"unknown strategy", map[string]string{"restart-strategy": "sometimes"}, `config restart-strategy="sometimes": want none, fixed-delay, exponential-delay or failure-rate`},
		{"bad call fuel", map[string]string{"sandbox.call-fuel": "0"}, `sandbox.call-fuel="0": want a whole number of fuel checks from 1 to`},
		{"call fuel not a number", map[string]string{"sandbox.call-fuel": "1e6"}, `sandbox.call-fuel="1e6"`},
		{"bad attempts", map[string]string{"restart-strategy.fixed-delay.attempts": "-1"}, `restart-strategy.fixed-delay.attempts="-1": want a whole number from 0 to 1000000`},
		{"bad delay", map[string]string{"restart-strategy.fixed-delay.delay": "soon"}, `restart-strategy.fixed-delay.delay="soon"`},
		{"bad initial backoff", map[string]string{"restart-strategy.exponential-delay.initial-backoff": "0s"}, `restart-strategy.exponential-delay.initial-backoff="0s": want a duration from 1ms to 24h0m0s`},
		{"bad max backoff", map[string]string{"restart-strategy.exponential-delay.max-backoff": "forever"}, `max-backoff="forever"`},
		{"max below initial", map[string]string{"restart-strategy.exponential-delay.initial-backoff": "1m", "restart-strategy.exponential-delay.max-backoff": "1s"}, "max-backoff=1s is below restart-strategy.exponential-delay.initial-backoff=1m0s"},
		{"bad multiplier", map[string]string{"restart-strategy.exponential-delay.backoff-multiplier": "0.5"}, `backoff-multiplier="0.5": want a number from 1 to 100`},
		{"NaN multiplier", map[string]string{"restart-strategy.exponential-delay.backoff-multiplier": "NaN"}, `backoff-multiplier="NaN"`},
		{"bad threshold", map[string]string{"restart-strategy.exponential-delay.reset-backoff-threshold": "-1h"}, `reset-backoff-threshold="-1h"`},
		{"bad jitter", map[string]string{"restart-strategy.exponential-delay.jitter-factor": "1.5"}, `jitter-factor="1.5": want a number from 0 to 1`},
		{"bad attempts before reset", map[string]string{"restart-strategy.exponential-delay.attempts-before-reset-backoff": "0"}, `attempts-before-reset-backoff="0": want a whole number from 1 to 1000000`},
		{"bad max failures", map[string]string{"restart-strategy.failure-rate.max-failures-per-interval": "x"}, `max-failures-per-interval="x"`},
		{"bad interval", map[string]string{"restart-strategy.failure-rate.failure-rate-interval": "0s"}, `failure-rate-interval="0s"`},
		{"bad failure-rate delay", map[string]string{"restart-strategy": "failure-rate", "restart-strategy.failure-rate.delay": "48h"}, `restart-strategy.failure-rate.delay="48h": want a duration from 0s to 24h0m0s`},
		{"bad clock", map[string]string{"sandbox.clock": "fast"}, `config sandbox.clock="fast": want "virtual" (the default: time advances only with timers) or "wall"`},
		{"inputs not JSON", map[string]string{"inputs": `{"a":`}, "config inputs: want a JSON object of path to blob key"},
		{"inputs not strings", map[string]string{"inputs": `{"a": 1}`}, "config inputs: want a JSON object of path to blob key"},
		{"inputs a list", map[string]string{"inputs": `["a"]`}, "config inputs: want a JSON object of path to blob key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := jobconfig.Parse(tt.conf)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err %v, want %q", err, tt.err)
			}
			if !reflect.DeepEqual(c, jobconfig.Default()) {
				t.Errorf("a failed Parse returned %+v, want the defaults", c)
			}
		})
	}
}

func TestParseUnknownKeySuggests(t *testing.T) {
	tests := []struct{ key, want string }{
		{"execution.checkpointing.intervall", "execution.checkpointing.interval"},
		{"execution.checkpointing.timout", "execution.checkpointing.timeout"},
		{"restart-strategy.fixed-delay.attempt", "restart-strategy.fixed-delay.attempts"},
		{"restart-stratgy", "restart-strategy"},
		{"sandbox.clocks", "sandbox.clock"},
		{"input", "inputs"},
		{"state.checkpoints.num-retain", "state.checkpoints.num-retained"},
	}
	for _, tt := range tests {
		// A good key beside the bad one changes nothing.
		_, err := jobconfig.Parse(map[string]string{tt.key: "1", jobconfig.KeyClock: "wall"})
		want := `unknown config key "` + tt.key + `": did you mean "` + tt.want + `"?`
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%q): %v, want %s", tt.key, err, want)
		}
	}
	// A huge unknown key still gets an answer, quickly.
	if _, err := jobconfig.Parse(map[string]string{strings.Repeat("x", 1<<20): ""}); err == nil || !strings.Contains(err.Error(), "did you mean") {
		t.Errorf("huge key: %v", err)
	}
}

func TestMapRoundTrips(t *testing.T) {
	full := map[string]string{
		"restart-strategy":                                                 "exponential-delay",
		"restart-strategy.fixed-delay.attempts":                            "0",
		"restart-strategy.fixed-delay.delay":                               "1.5s",
		"restart-strategy.exponential-delay.initial-backoff":               "100ms",
		"restart-strategy.exponential-delay.max-backoff":                   "1m0s",
		"restart-strategy.exponential-delay.backoff-multiplier":            "1.25",
		"restart-strategy.exponential-delay.reset-backoff-threshold":       "10m0s",
		"restart-strategy.exponential-delay.jitter-factor":                 "0",
		"restart-strategy.exponential-delay.attempts-before-reset-backoff": "7",
		"restart-strategy.failure-rate.max-failures-per-interval":          "3",
		"restart-strategy.failure-rate.failure-rate-interval":              "5m0s",
		"restart-strategy.failure-rate.delay":                              "0s",
		"execution.checkpointing.interval":                                 "1s",
		"execution.checkpointing.timeout":                                  "2s",
		"execution.checkpointing.min-pause":                                "3s",
		"execution.checkpointing.max-concurrent-checkpoints":               "4",
		"execution.checkpointing.tolerable-failed-checkpoints":             "0",
		"state.checkpoints.num-retained":                                   "6",
		"execution.checkpointing.externalized-checkpoint-retention":        "RETAIN_ON_CANCELLATION",
		"inputs":                  `{"a.txt":"tenants/t/a.txt","b":"tenants/t/b/"}`,
		"sandbox.clock":           "wall",
		"pipeline.poison-records": "dead-letter",
		"pipeline.poison-records.max-per-million": "50",
		"pipeline.poison-records.max-count":       "0",
		"pipeline.dead-letter.path":               "dead/orders",
		"sandbox.call-fuel":                       "123456789",
	}
	// Keys ends with the secrets' key pattern (TestSecrets).
	if len(full) != len(jobconfig.Keys())-1 {
		t.Fatalf("the test sets %d keys, the table has %d", len(full), len(jobconfig.Keys())-1)
	}
	for _, conf := range []map[string]string{
		nil,
		full,
		{"restart-strategy": "off", "execution.checkpointing.interval": "0", "sandbox.clock": "virtual", "inputs": "{}"},
		{"restart-strategy.fixed-delay.attempts": "+3", "execution.checkpointing.timeout": "60s", "state.checkpoints.num-retained": "1"},
		{"execution.checkpointing.externalized-checkpoint-retention": "delete_on_cancellation"},
	} {
		c, err := jobconfig.Parse(conf)
		if err != nil {
			t.Fatalf("Parse(%v): %v", conf, err)
		}
		m := c.Map()
		back, err := jobconfig.Parse(m)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("Parse(%v.Map() = %v) = %+v, %v\nwant %+v", conf, m, back, err, c)
		}
		if !maps.Equal(back.Map(), m) {
			t.Errorf("Map is not canonical: %v then %v", m, back.Map())
		}
	}
	// Every key the full config sets comes back, spelled as the table does.
	c, _ := jobconfig.Parse(full)
	if m := c.Map(); !maps.Equal(m, full) {
		t.Errorf("Map() = %v\nwant %v", m, full)
	}
	// Defaults are left out.
	if m := jobconfig.Default().Map(); len(m) != 0 {
		t.Errorf("Default().Map() = %v, want empty", m)
	}
	// The zero Config (a JobMaster built without a parsed config) still
	// writes a map Parse accepts.
	if _, err := jobconfig.Parse(jobconfig.Config{}.Map()); err != nil {
		t.Errorf("Parse(Config{}.Map()): %v", err)
	}
}

func TestKeysTable(t *testing.T) {
	keys := jobconfig.Keys()
	seen := map[string]bool{}
	for _, k := range keys {
		switch {
		case seen[k.Name]:
			t.Errorf("key %s is in the table twice", k.Name)
		case k.Doc == "" || k.Default == "":
			t.Errorf("key %s has no documentation or default: %+v", k.Name, k)
		}
		seen[k.Name] = true
	}
	for _, k := range []string{
		jobconfig.KeyInputs, jobconfig.KeyClock, jobconfig.KeyCallFuel,
		jobconfig.KeyCheckpointInterval, jobconfig.KeyCheckpointTimeout, jobconfig.KeyCheckpointMinPause,
		jobconfig.KeyCheckpointMaxConcurrent, jobconfig.KeyCheckpointTolerable, jobconfig.KeyCheckpointsRetained,
		jobconfig.KeyCheckpointRetention, jobconfig.KeyRestartStrategy, jobconfig.KeyFixedDelayAttempts, jobconfig.KeyFixedDelayDelay,
		jobconfig.KeyExpInitialBackoff, jobconfig.KeyExpMaxBackoff, jobconfig.KeyExpMultiplier,
		jobconfig.KeyExpResetThreshold, jobconfig.KeyExpJitter, jobconfig.KeyExpAttemptsBeforeReset,
		jobconfig.KeyFailureRateMaxFailures, jobconfig.KeyFailureRateInterval, jobconfig.KeyFailureRateDelay,
		jobconfig.KeyPoisonRecords, jobconfig.KeyPoisonMaxPerMillion, jobconfig.KeyPoisonMaxCount, jobconfig.KeyDeadLetterPath,
		jobconfig.KeySecretPrefix + "<name>",
	} {
		if !seen[k] {
			t.Errorf("key constant %s is not in the table", k)
		}
		delete(seen, k)
	}
	if len(seen) != 0 {
		t.Errorf("table keys without a constant: %v", slices.Sorted(maps.Keys(seen)))
	}
}

// FuzzParse feeds Parse configs as "key=value" lines: it must never panic,
// and whatever it accepts must come back from Map unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"execution.checkpointing.interval=1s\nstate.checkpoints.num-retained=3",
		"restart-strategy=exponentialdelay\nrestart-strategy.exponential-delay.backoff-multiplier=1.5e0",
		"restart-strategy.exponential-delay.initial-backoff=1m\nrestart-strategy.exponential-delay.max-backoff=1s",
		"inputs={\"a\":\"tenants/t/a\",\"b\\u00e9\":\"x\"}",
		"inputs={\"a\":\"\xff\"}",
		"sandbox.clock=wall\nexecution.checkpointing.tolerable-failed-checkpoints=0",
		"execution.checkpointing.intervall=1s",
		"execution.checkpointing.externalized-checkpoint-retention=Retain_On_Cancellation",
		"secret.nats-password=hunter2\nsecret.=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		conf := map[string]string{}
		for line := range strings.SplitSeq(s, "\n") {
			k, v, _ := strings.Cut(line, "=")
			conf[k] = v
		}
		if s == "" {
			conf = nil
		}
		c, err := jobconfig.Parse(conf)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		m := c.Map()
		back, err := jobconfig.Parse(m)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, but its Map %v does not parse: %v", s, c, m, err)
		}
		if c.Secrets = nil; !reflect.DeepEqual(back, c) { // Map leaves the secrets out
			t.Fatalf("Parse(%q) = %+v\nParse(Map) = %+v", s, c, back)
		}
	})
}

// Secrets come from the secret.NAME keys, are never in Map (the wire
// form to the tasks), and a bad name is refused without the value.
func TestSecrets(t *testing.T) {
	c, err := jobconfig.Parse(map[string]string{"secret.nats-password": "hunter2", "secret.kafka.sasl": "s3cret", "sandbox.clock": "wall"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"nats-password": "hunter2", "kafka.sasl": "s3cret"}; !maps.Equal(c.Secrets, want) {
		t.Fatalf("Secrets = %v, want %v", c.Secrets, want)
	}
	if m := c.Map(); !maps.Equal(m, map[string]string{"sandbox.clock": "wall"}) {
		t.Fatalf("Map() = %v: want no secrets in it", m)
	}
	for _, k := range []string{"secret.", "secret.a b", "secret." + strings.Repeat("x", jobgraph.MaxSecretNameBytes+1)} {
		_, err := jobconfig.Parse(map[string]string{k: "hunter2"})
		if err == nil || !strings.Contains(err.Error(), "the secret's name") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Parse(%q): %v: want an error about the name, without the value", k, err)
		}
	}
	if keys := jobconfig.Keys(); keys[len(keys)-1].Name != jobconfig.KeySecretPrefix+"<name>" {
		t.Errorf("Keys() ends with %q, want the secrets' pattern", keys[len(keys)-1].Name)
	}
}
