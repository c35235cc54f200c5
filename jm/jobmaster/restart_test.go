package jobmaster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

func TestRestarter(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at    time.Duration
		delay time.Duration
		ok    bool
	}
	tests := []struct {
		name   string
		s      RestartStrategy
		random func() float64
		steps  []step
	}{
		{"zero value never restarts", RestartStrategy{}, nil, []step{{0, 0, false}}},
		{"none", RestartStrategy{Kind: RestartNone, Attempts: 5}, nil, []step{{0, 0, false}}},
		{"fixed-delay without kind", RestartStrategy{Attempts: 2, Delay: time.Second}, nil, []step{
			{0, time.Second, true}, {time.Hour, time.Second, true}, {2 * time.Hour, 0, false},
		}},
		{"fixed-delay, zero attempts", RestartStrategy{Kind: RestartFixedDelay}, nil, []step{{0, 0, false}}},
		{"exponential grows and caps", RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, BackoffMultiplier: 2, ResetBackoffThreshold: time.Minute}, nil, []step{
			{0, 1 * time.Second, true},
			{2 * time.Second, 2 * time.Second, true},
			{5 * time.Second, 4 * time.Second, true},
			{10 * time.Second, 8 * time.Second, true},
			{20 * time.Second, 10 * time.Second, true},
			{40 * time.Second, 10 * time.Second, true},
			// Ran stable for the threshold after the 10s restart: reset.
			{40*time.Second + 10*time.Second + time.Minute, 1 * time.Second, true},
			{40*time.Second + 10*time.Second + time.Minute + time.Second, 2 * time.Second, true},
		}},
		{"exponential, not quite stable", RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 3, ResetBackoffThreshold: time.Minute}, nil, []step{
			{0, time.Second, true},
			{time.Minute, 3 * time.Second, true}, // 1m < 1m + 1s: no reset
		}},
		{"exponential, attempts before reset", RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour, AttemptsBeforeReset: 2}, nil, []step{
			{0, time.Second, true}, {time.Second, 2 * time.Second, true}, {2 * time.Second, 0, false},
		}},
		{"exponential defaults", RestartStrategy{Kind: RestartExponentialDelay}, nil, []step{
			{0, jobconfig.DefaultInitialBackoff, true}, {time.Second, 2 * jobconfig.DefaultInitialBackoff, true},
		}},
		{"exponential jitter", RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: 10 * time.Second, JitterFactor: 0.1}, func() float64 { return 0.75 }, []step{
			{0, 10500 * time.Millisecond, true}, // 10s × (1 + 0.1 × (2×0.75 − 1))
		}},
		{"failure-rate window", RestartStrategy{Kind: RestartFailureRate, MaxFailuresPerInterval: 2, FailureRateInterval: time.Minute, Delay: 3 * time.Second}, nil, []step{
			{0, 3 * time.Second, true},
			{30 * time.Second, 3 * time.Second, true},
			{61 * time.Second, 3 * time.Second, true}, // the first fell out of the window
			{62 * time.Second, 0, false},              // 30s, 61s, 62s: 3 in a minute
		}},
		{"failure-rate defaults", RestartStrategy{Kind: RestartFailureRate}, nil, []step{
			{0, 0, true}, {59 * time.Second, 0, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.Validate(); err != nil {
				t.Fatal(err)
			}
			x := newRestarter(tt.s, tt.random)
			for i, st := range tt.steps {
				d, ok := x.failure(at(st.at))
				if d != st.delay || ok != st.ok {
					t.Fatalf("failure %d at +%v: (%v, %v), want (%v, %v)", i+1, st.at, d, ok, st.delay, st.ok)
				}
			}
		})
	}
}

func TestRestarterJitterStaysInBounds(t *testing.T) {
	for _, r := range []float64{0, 0.3, 0.999} {
		x := newRestarter(RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Second, JitterFactor: 1}, func() float64 { return r })
		if d, ok := x.failure(time.Now()); !ok || d < 0 || d > 2*time.Second {
			t.Fatalf("random %v: %v %v", r, d, ok)
		}
	}
}

func TestRestartFromConfigStrategies(t *testing.T) {
	fixed := RestartStrategy{Attempts: 3, Delay: time.Second}
	expDef := RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour, JitterFactor: 0.1}
	rateDef := RestartStrategy{Kind: RestartFailureRate, MaxFailuresPerInterval: 1, FailureRateInterval: time.Minute, Delay: time.Second}
	tests := []struct {
		name string
		conf map[string]string
		def  RestartStrategy
		want RestartStrategy
		err  string
	}{
		{"off", map[string]string{"restart-strategy": "off"}, fixed, RestartStrategy{}, ""},
		{"disable", map[string]string{"restart-strategy": "disable"}, fixed, RestartStrategy{}, ""},
		{"fixeddelay alias", map[string]string{"restart-strategy": "fixeddelay", "restart-strategy.fixed-delay.attempts": "2"}, RestartStrategy{}, RestartStrategy{Attempts: 2}, ""},
		{"fixed-delay keys turn a none default on", map[string]string{"restart-strategy.fixed-delay.attempts": "4"}, RestartStrategy{}, RestartStrategy{Attempts: 4}, ""},
		{"exponential defaults", map[string]string{"restart-strategy": "exponential-delay"}, fixed, expDef, ""},
		{"exponential keys", map[string]string{
			"restart-strategy": "exponentialdelay",
			"restart-strategy.exponential-delay.initial-backoff":               "100ms",
			"restart-strategy.exponential-delay.max-backoff":                   "1m",
			"restart-strategy.exponential-delay.backoff-multiplier":            "1.5",
			"restart-strategy.exponential-delay.reset-backoff-threshold":       "10m",
			"restart-strategy.exponential-delay.jitter-factor":                 "0",
			"restart-strategy.exponential-delay.attempts-before-reset-backoff": "7",
		}, fixed, RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Minute, BackoffMultiplier: 1.5, ResetBackoffThreshold: 10 * time.Minute, AttemptsBeforeReset: 7}, ""},
		{"exponential default keeps its kind", map[string]string{"restart-strategy.exponential-delay.max-backoff": "10s"}, expDef,
			RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour, JitterFactor: 0.1}, ""},
		{"failure-rate defaults", map[string]string{"restart-strategy": "failure-rate"}, fixed, rateDef, ""},
		{"failure-rate keys", map[string]string{
			"restart-strategy": "failurerate",
			"restart-strategy.failure-rate.max-failures-per-interval": "3",
			"restart-strategy.failure-rate.failure-rate-interval":     "5m",
			"restart-strategy.failure-rate.delay":                     "0s",
		}, fixed, RestartStrategy{Kind: RestartFailureRate, MaxFailuresPerInterval: 3, FailureRateInterval: 5 * time.Minute}, ""},

		{"unknown", map[string]string{"restart-strategy": "sometimes"}, fixed, fixed, `restart-strategy="sometimes": want none, fixed-delay, exponential-delay or failure-rate`},
		{"bad initial backoff", map[string]string{"restart-strategy.exponential-delay.initial-backoff": "0s"}, fixed, fixed, `restart-strategy.exponential-delay.initial-backoff="0s": want a duration from 1ms to 24h0m0s`},
		{"bad max backoff", map[string]string{"restart-strategy.exponential-delay.max-backoff": "forever"}, fixed, fixed, `max-backoff="forever"`},
		{"max below initial", map[string]string{"restart-strategy.exponential-delay.initial-backoff": "1m", "restart-strategy.exponential-delay.max-backoff": "1s"}, fixed, fixed, "max-backoff=1s is below restart-strategy.exponential-delay.initial-backoff=1m0s"},
		{"initial above the default max", map[string]string{"restart-strategy.exponential-delay.initial-backoff": "10m"}, fixed, fixed, "max-backoff=5m0s is below restart-strategy.exponential-delay.initial-backoff=10m0s"},
		{"max below the default's initial", map[string]string{"restart-strategy.exponential-delay.max-backoff": "10s"},
			RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Minute}, RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Minute},
			"max-backoff=10s is below restart-strategy.exponential-delay.initial-backoff=1m0s"},
		{"bad multiplier", map[string]string{"restart-strategy.exponential-delay.backoff-multiplier": "0.5"}, fixed, fixed, `backoff-multiplier="0.5": want a number from 1 to 100`},
		{"NaN multiplier", map[string]string{"restart-strategy.exponential-delay.backoff-multiplier": "NaN"}, fixed, fixed, `backoff-multiplier="NaN"`},
		{"bad threshold", map[string]string{"restart-strategy.exponential-delay.reset-backoff-threshold": "-1h"}, fixed, fixed, `reset-backoff-threshold="-1h"`},
		{"bad jitter", map[string]string{"restart-strategy.exponential-delay.jitter-factor": "1.5"}, fixed, fixed, `jitter-factor="1.5": want a number from 0 to 1`},
		{"bad attempts before reset", map[string]string{"restart-strategy.exponential-delay.attempts-before-reset-backoff": "0"}, fixed, fixed, `attempts-before-reset-backoff="0": want a whole number from 1 to 1000000`},
		{"bad max failures", map[string]string{"restart-strategy.failure-rate.max-failures-per-interval": "x"}, fixed, fixed, `max-failures-per-interval="x"`},
		{"bad interval", map[string]string{"restart-strategy.failure-rate.failure-rate-interval": "0s"}, fixed, fixed, `failure-rate-interval="0s"`},
		{"bad failure-rate delay", map[string]string{"restart-strategy": "failure-rate", "restart-strategy.failure-rate.delay": "48h"}, fixed, fixed, `restart-strategy.failure-rate.delay="48h": want a duration from 0s to 24h0m0s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRestart(tt.conf, tt.def)
			if tt.err != "" {
				if !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v %v\nwant %+v", got, err, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// parseRestart is what the Dispatcher does with a job's config: parse it
// (a bad key is ErrInvalidArgument) and combine its restart part with the
// JobManager's default.
func parseRestart(conf map[string]string, def RestartStrategy) (RestartStrategy, error) {
	c, err := jobconfig.Parse(conf)
	if err != nil {
		return def, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%w", err)
	}
	return RestartFromConfig(c.Restart, def)
}

func TestRestartFromConfigLeavesTheDefault(t *testing.T) {
	// Whatever the default, a config without restart keys keeps it.
	for _, def := range []RestartStrategy{
		{}, {Kind: RestartNone}, {Attempts: 3, Delay: time.Second},
		{Kind: RestartExponentialDelay, InitialBackoff: time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 3, ResetBackoffThreshold: time.Hour},
		{Kind: RestartFailureRate, MaxFailuresPerInterval: 2, FailureRateInterval: time.Minute, Delay: time.Second},
	} {
		got, err := RestartFromConfig(jobconfig.Restart{}, def)
		if err != nil || got != def.withDefaults() && got != def {
			t.Errorf("default %+v: got %+v, %v", def, got, err)
		}
	}
}

func TestFailureRateGivesUpWithItsName(t *testing.T) {
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Kind: RestartFailureRate, MaxFailuresPerInterval: 2, FailureRateInterval: time.Hour}
		g.onRunning = func(d control.Deployment) {
			if d.Chain[0].ID == 1 {
				g.report(d, ExecFailed, "boom", nil, nil)
			}
		}
	})
	r := h.wait(t, Failed)
	if r.Restarts != 2 || !strings.HasSuffix(r.Failure, "(gave up after 2 restarts: failure-rate 2 per 1h0m0s exceeded)") {
		t.Fatalf("restarts %d failure %q", r.Restarts, r.Failure)
	}
}

func TestExponentialDelayRestartsTheJob(t *testing.T) {
	h := start(t, wordcount(1, 1), func(c *Config, g *fakeGateway, _ *fakePool) {
		c.Restart = RestartStrategy{Kind: RestartExponentialDelay, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, AttemptsBeforeReset: 3}
		fin := finishAll(g)
		g.onRunning = func(d control.Deployment) {
			if d.Fencing.Attempt < 3 && d.Chain[0].ID == 1 {
				g.report(d, ExecFailed, "boom", nil, nil)
				return
			}
			fin(d)
		}
	})
	r := h.wait(t, Finished)
	if r.Restarts != 3 {
		t.Fatalf("restarts %d", r.Restarts)
	}
	h.jm.Cancel(context.Background())
}
