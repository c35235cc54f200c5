package jobconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Config keys. Each is in the table below, with its default and its
// documentation.
const (
	// KeyInputs maps the paths a text source names to blob keys or key
	// prefixes, as a JSON object. A client that uploads local files before
	// submitting (sluice run, sdk/client.StageInputs) sets it:
	//
	//	inputs = {"/home/me/books": "tenants/default/uploads/3f2a/books/",
	//	          "notes.txt":      "tenants/default/uploads/3f2a/notes.txt"}
	KeyInputs = "inputs"
	// KeyClock chooses what a guest's clock reads: virtual or wall.
	KeyClock = "sandbox.clock"
	// KeySecretPrefix starts the keys of the job's secrets: secret.NAME
	// holds the value a host connector's config names as secret:NAME.
	KeySecretPrefix = "secret."
	// KeyCallFuel is the per-call fuel limit: a guest call that runs this
	// many fuel checks fails, at the same place on every run.
	KeyCallFuel = "sandbox.call-fuel"

	KeyCheckpointInterval      = "execution.checkpointing.interval"
	KeyCheckpointTimeout       = "execution.checkpointing.timeout"
	KeyCheckpointMinPause      = "execution.checkpointing.min-pause"
	KeyCheckpointMaxConcurrent = "execution.checkpointing.max-concurrent-checkpoints"
	KeyCheckpointTolerable     = "execution.checkpointing.tolerable-failed-checkpoints"
	KeyCheckpointsRetained     = "state.checkpoints.num-retained"
	// KeyCheckpointRetention says whether a canceled job keeps its
	// retained checkpoints (Flink's externalized checkpoints).
	KeyCheckpointRetention = "execution.checkpointing.externalized-checkpoint-retention"

	// KeyPoisonRecords is the job's poison-record policy (a
	// jobgraph.PoisonPolicy); an operator's vertex config
	// jobgraph.ConfigPoisonRecords overrides it for its chain.
	KeyPoisonRecords = "pipeline.poison-records"
	// KeyPoisonMaxPerMillion and KeyPoisonMaxCount bound the records a
	// task may skip or dead-letter before it fails anyway.
	KeyPoisonMaxPerMillion = "pipeline.poison-records.max-per-million"
	KeyPoisonMaxCount      = "pipeline.poison-records.max-count"
	// KeyDeadLetterPath is the directory, under the tenant's files, that
	// the dead-letter records are committed to.
	KeyDeadLetterPath = "pipeline.dead-letter.path"

	KeyRestartStrategy        = "restart-strategy"
	KeyFixedDelayAttempts     = "restart-strategy.fixed-delay.attempts"
	KeyFixedDelayDelay        = "restart-strategy.fixed-delay.delay"
	KeyExpInitialBackoff      = "restart-strategy.exponential-delay.initial-backoff"
	KeyExpMaxBackoff          = "restart-strategy.exponential-delay.max-backoff"
	KeyExpMultiplier          = "restart-strategy.exponential-delay.backoff-multiplier"
	KeyExpResetThreshold      = "restart-strategy.exponential-delay.reset-backoff-threshold"
	KeyExpJitter              = "restart-strategy.exponential-delay.jitter-factor"
	KeyExpAttemptsBeforeReset = "restart-strategy.exponential-delay.attempts-before-reset-backoff"
	KeyFailureRateMaxFailures = "restart-strategy.failure-rate.max-failures-per-interval"
	KeyFailureRateInterval    = "restart-strategy.failure-rate.failure-rate-interval"
	KeyFailureRateDelay       = "restart-strategy.failure-rate.delay"
)

// Defaults that code outside this package applies to zero fields (Flink's).
const (
	DefaultCheckpointTimeout     = time.Minute
	DefaultInitialBackoff        = time.Second
	DefaultMaxBackoff            = 5 * time.Minute
	DefaultBackoffMultiplier     = 2.0
	DefaultResetBackoffThreshold = time.Hour
	DefaultJitterFactor          = 0.1
	DefaultMaxFailures           = 1
	DefaultFailureRateInterval   = time.Minute
	DefaultFailureRateDelay      = time.Second
	DefaultPoisonMaxPerMillion   = 1000
)

// Limits of the restart strategy's values, shared with its Validate.
const (
	MaxRestartAttempts   = 1_000_000
	MaxRestartDelay      = 24 * time.Hour
	MaxRestartWindow     = 30 * 24 * time.Hour
	MaxBackoffMultiplier = 100.0
	// MaxCallFuel bounds KeyCallFuel (about an hour of a guest's checks).
	MaxCallFuel = 1 << 50
	// RestartKinds lists the strategies for error messages.
	RestartKinds = "none, fixed-delay, exponential-delay or failure-rate"
)

// entry is one key of the table: how it reads into a Config and how it is
// written back (ok false: the value is the default, or unset, and the key
// is left out).
type entry struct {
	name, def, doc string
	parse          func(c *Config, s string) error
	format         func(c Config) (s string, ok bool)
}

// table is every config key, once. It is built per call rather than held
// in a package variable, so nothing can change it.
func table() []entry {
	cp := func(c *Config) *Checkpoints { return &c.Checkpoints }
	rs := func(c *Config) *Restart { return &c.Restart }
	def := DefaultCheckpoints()
	return []entry{
		{
			name: KeyRestartStrategy, def: "the JobManager's (fixed-delay)",
			doc: "none|off|disable, fixed-delay|fixeddelay, exponential-delay|exponentialdelay or failure-rate|failurerate. " +
				"Without it the keys of the JobManager's default strategy apply to it; naming another strategy starts from that one's defaults.",
			parse: func(c *Config, s string) error {
				k, ok := restartKind(s)
				if !ok {
					return fmt.Errorf("config %s=%q: want %s", KeyRestartStrategy, s, RestartKinds)
				}
				c.Restart.Strategy = k
				return nil
			},
			format: func(c Config) (string, bool) { return string(c.Restart.Strategy), c.Restart.Strategy != "" },
		},
		intPtr(KeyFixedDelayAttempts, "the JobManager's", "fixed-delay: restarts in all, 0 to 1000000; alone it turns fixed-delay on", 0, MaxRestartAttempts,
			func(c *Config) **int { return &rs(c).Attempts }),
		durPtr(KeyFixedDelayDelay, "the JobManager's", "fixed-delay: the wait before each restart, 0 to 24h", 0, MaxRestartDelay,
			func(c *Config) **time.Duration { return &rs(c).Delay }),
		durPtr(KeyExpInitialBackoff, "1s", "exponential-delay: the first delay, 1ms to 24h", time.Millisecond, MaxRestartDelay,
			func(c *Config) **time.Duration { return &rs(c).InitialBackoff }),
		durPtr(KeyExpMaxBackoff, "5m", "exponential-delay: the largest delay, 1ms to 24h, at least the initial backoff", time.Millisecond, MaxRestartDelay,
			func(c *Config) **time.Duration { return &rs(c).MaxBackoff }),
		floatPtr(KeyExpMultiplier, "2.0", "exponential-delay: the delay's growth after each failure, 1 to 100", 1, MaxBackoffMultiplier,
			func(c *Config) **float64 { return &rs(c).BackoffMultiplier }),
		durPtr(KeyExpResetThreshold, "1h", "exponential-delay: a job that ran this long without failing starts again from the initial backoff, 1ms to 720h", time.Millisecond, MaxRestartWindow,
			func(c *Config) **time.Duration { return &rs(c).ResetBackoffThreshold }),
		floatPtr(KeyExpJitter, "0.1", "exponential-delay: spreads each delay by up to ± this share of it, 0 to 1", 0, 1,
			func(c *Config) **float64 { return &rs(c).JitterFactor }),
		intPtr(KeyExpAttemptsBeforeReset, "no limit", "exponential-delay: restarts until the backoff resets, 1 to 1000000", 1, MaxRestartAttempts,
			func(c *Config) **int { return &rs(c).AttemptsBeforeReset }),
		intPtr(KeyFailureRateMaxFailures, "1", "failure-rate: the job fails once more failures than this fall within the interval, 1 to 1000000", 1, MaxRestartAttempts,
			func(c *Config) **int { return &rs(c).MaxFailuresPerInterval }),
		durPtr(KeyFailureRateInterval, "1m", "failure-rate: the sliding window, 1ms to 720h", time.Millisecond, MaxRestartWindow,
			func(c *Config) **time.Duration { return &rs(c).FailureRateInterval }),
		durPtr(KeyFailureRateDelay, "1s", "failure-rate: the wait before each restart, 0 to 24h", 0, MaxRestartDelay,
			func(c *Config) **time.Duration { return &rs(c).FailureRateDelay }),

		{
			name: KeyCheckpointInterval, def: "off",
			doc: "the time between periodic checkpoints, 10ms to 24h; 0 (0s, 0ms) is off",
			parse: func(c *Config, s string) error {
				if d, err := time.ParseDuration(s); err == nil && d == 0 {
					c.Checkpoints.Interval = 0
					return nil
				}
				return parseDur(KeyCheckpointInterval, s, 10*time.Millisecond, 24*time.Hour, &cp(c).Interval)
			},
			format: func(c Config) (string, bool) { return c.Checkpoints.Interval.String(), c.Checkpoints.Interval > 0 },
		},
		durVal(KeyCheckpointTimeout, "1m", "a checkpoint not acknowledged by every task within this is aborted, 10ms to 24h", 10*time.Millisecond, 24*time.Hour,
			def.Timeout, func(c *Config) *time.Duration { return &cp(c).Timeout }),
		durVal(KeyCheckpointMinPause, "0", "the least time from the end of one checkpoint to the start of the next, 0 to 24h", 0, 24*time.Hour,
			def.MinPause, func(c *Config) *time.Duration { return &cp(c).MinPause }),
		intVal(KeyCheckpointMaxConcurrent, "1", "checkpoints in progress at once, 1 to 16", 1, 16,
			def.MaxConcurrent, func(c *Config) *int { return &cp(c).MaxConcurrent }),
		{
			name: KeyCheckpointTolerable, def: "no limit",
			doc: "failed checkpoints in a row the job survives, 0 to 1000000",
			parse: func(c *Config, s string) error {
				return parseInt(KeyCheckpointTolerable, s, 0, 1_000_000, &cp(c).TolerableFailures)
			},
			// Negative is no limit, the default, which has no spelling.
			format: func(c Config) (string, bool) {
				return strconv.Itoa(c.Checkpoints.TolerableFailures), c.Checkpoints.TolerableFailures >= 0
			},
		},
		intVal(KeyCheckpointsRetained, "1", "completed checkpoints kept, 1 to 100", 1, 100,
			def.Retained, func(c *Config) *int { return &cp(c).Retained }),
		{
			name: KeyCheckpointRetention, def: string(DeleteOnCancellation),
			doc: "what becomes of the retained completed checkpoints when the job ends: " + string(RetainOnCancellation) +
				" keeps them when it is canceled or fails, " + string(DeleteOnCancellation) +
				" keeps them only when it fails; a FINISHED job deletes them either way. Kept ones are listed by sluice checkpoints JOB and resumed with sluice run --from-checkpoint JOB/N",
			parse: func(c *Config, s string) error {
				for _, r := range []Retention{RetainOnCancellation, DeleteOnCancellation} {
					if strings.EqualFold(s, string(r)) {
						c.Checkpoints.Retention = r
						return nil
					}
				}
				return fmt.Errorf("config %s=%q: want %s (keep the last %s completed checkpoints when the job is canceled or fails) or %s (the default: keep them only when it fails)",
					KeyCheckpointRetention, s, RetainOnCancellation, KeyCheckpointsRetained, DeleteOnCancellation)
			},
			format: func(c Config) (string, bool) {
				r := c.Checkpoints.Retention
				return string(r), r != "" && r != DeleteOnCancellation
			},
		},

		{
			name: KeyPoisonRecords, def: string(jobgraph.PoisonFail),
			doc: "what a task does with a record whose processing traps the guest: fail (the task fails, naming the record's position), " +
				"skip (drop it, count it, go on) or dead-letter (drop it and write it with its trap to " + KeyDeadLetterPath + "); " +
				"an operator's vertex config \"" + jobgraph.ConfigPoisonRecords + "\" overrides it for its chain",
			parse: func(c *Config, s string) error {
				p, err := jobgraph.ParsePoisonPolicy(s)
				if err != nil {
					return fmt.Errorf("config %s=%q: want %s", KeyPoisonRecords, s, jobgraph.PoisonPolicies)
				}
				c.Poison.Policy = p
				return nil
			},
			format: func(c Config) (string, bool) {
				p := c.Poison.Policy
				return string(p), p != "" && p != jobgraph.PoisonFail
			},
		},
		intVal(KeyPoisonMaxPerMillion, "1000", "skip or dead-letter: a task fails anyway once the records it dropped exceed this many per million records it read "+
			"(rounded up, so the first is always allowed), 1 to 1000000", 1, 1_000_000,
			DefaultPoisonMaxPerMillion, func(c *Config) *int { return &c.Poison.MaxPerMillion }),
		intPtr(KeyPoisonMaxCount, "no limit", "skip or dead-letter: a task fails anyway once it dropped more records than this, 0 to 1000000000", 0, 1_000_000_000,
			func(c *Config) **int { return &c.Poison.MaxCount }),
		{
			name: KeyDeadLetterPath, def: "none",
			doc: "dead-letter: the directory, relative to the tenant's files, that the dead-letter records are committed to (exactly once, one JSON object a line), " +
				"such as \"dead-letters/orders\"",
			parse: func(c *Config, s string) error {
				if why := jobgraph.BadFilePath(s); why != "" {
					return fmt.Errorf("config %s=%q %s: use a relative path such as \"dead-letters/orders\", a directory under the tenant's files", KeyDeadLetterPath, s, why)
				}
				c.Poison.DeadLetterPath = strings.TrimSuffix(s, "/")
				return nil
			},
			format: func(c Config) (string, bool) { return c.Poison.DeadLetterPath, c.Poison.DeadLetterPath != "" },
		},
		{
			name: KeyInputs, def: "none",
			doc: "a JSON object mapping the paths a text source names to blob keys or key prefixes (set by sluice run for local files)",
			parse: func(c *Config, s string) error {
				var in map[string]string
				if err := sonic.ConfigStd.UnmarshalFromString(s, &in); err != nil {
					return fmt.Errorf("config %s: want a JSON object of path to blob key: %v", KeyInputs, err)
				}
				if len(in) == 0 {
					in = nil
				}
				c.Inputs = in
				return nil
			},
			format: func(c Config) (string, bool) {
				if len(c.Inputs) == 0 {
					return "", false
				}
				// A map of strings always encodes; keys come out sorted.
				s, err := sonic.ConfigStd.MarshalToString(c.Inputs)
				return s, err == nil
			},
		},
		{
			name: KeyClock, def: string(ClockVirtual),
			doc: "what a guest's clock reads: virtual (time advances only with timers, so a replay sees the same times) or wall (the host's clock)",
			parse: func(c *Config, s string) error {
				switch Clock(s) {
				case ClockVirtual, ClockWall:
					c.Clock = Clock(s)
					return nil
				}
				return fmt.Errorf("config %s=%q: want %q (the default: time advances only with timers) or %q (the guest reads the wall clock)",
					KeyClock, s, ClockVirtual, ClockWall)
			},
			format: func(c Config) (string, bool) { return string(c.Clock), c.Clock != "" && c.Clock != ClockVirtual },
		},
		{
			name: KeyCallFuel, def: "none (the tenant's quota, if any)",
			doc: fmt.Sprintf("fuel limit of one guest call, 1 to %d: a call that runs this many fuel checks (loop headers and function entries) "+
				"fails with a fuel-limit error at the same place on every run; the tenant's call_fuel quota, when lower, wins, "+
				"and the call deadline stays as a backstop", MaxCallFuel),
			parse: func(c *Config, s string) error {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || n < 1 || n > MaxCallFuel {
					return fmt.Errorf("config %s=%q: want a whole number of fuel checks from 1 to %d", KeyCallFuel, s, int64(MaxCallFuel))
				}
				c.CallFuel = n
				return nil
			},
			format: func(c Config) (string, bool) { return strconv.FormatInt(c.CallFuel, 10), c.CallFuel > 0 },
		},
	}
}

// restartKind reads a strategy name, with Flink's spellings.
func restartKind(s string) (RestartKind, bool) {
	switch s {
	case "none", "off", "disable":
		return RestartNone, true
	case "fixed-delay", "fixeddelay":
		return RestartFixedDelay, true
	case "exponential-delay", "exponentialdelay":
		return RestartExponentialDelay, true
	case "failure-rate", "failurerate":
		return RestartFailureRate, true
	}
	return "", false
}

func parseDur(key, s string, lo, hi time.Duration, dst *time.Duration) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return fmt.Errorf("config %s=%q: want a duration from %v to %v, such as 500ms or 10s", key, s, lo, hi)
	}
	*dst = d
	return nil
}

func parseInt(key, s string, lo, hi int, dst *int) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("config %s=%q: want a whole number from %d to %d", key, s, lo, hi)
	}
	*dst = n
	return nil
}

func parseFloat(key, s string, lo, hi float64, dst *float64) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= lo && f <= hi) {
		return fmt.Errorf("config %s=%q: want a number from %v to %v", key, s, lo, hi)
	}
	*dst = f
	return nil
}

// durVal is a duration key whose field holds a value; it is written back
// unless it is the default (or zero, which users of Config also read as
// the default).
func durVal(name, def, doc string, lo, hi, dflt time.Duration, field func(*Config) *time.Duration) entry {
	return entry{name: name, def: def, doc: doc,
		parse: func(c *Config, s string) error { return parseDur(name, s, lo, hi, field(c)) },
		format: func(c Config) (string, bool) {
			d := *field(&c)
			return d.String(), d != dflt && d != 0
		},
	}
}

// intVal is durVal for whole numbers.
func intVal(name, def, doc string, lo, hi, dflt int, field func(*Config) *int) entry {
	return entry{name: name, def: def, doc: doc,
		parse: func(c *Config, s string) error { return parseInt(name, s, lo, hi, field(c)) },
		format: func(c Config) (string, bool) {
			n := *field(&c)
			return strconv.Itoa(n), n != dflt && n != 0
		},
	}
}

// durPtr is a duration key whose field is nil when the key is absent.
func durPtr(name, def, doc string, lo, hi time.Duration, field func(*Config) **time.Duration) entry {
	return entry{name: name, def: def, doc: doc,
		parse: func(c *Config, s string) error {
			var d time.Duration
			if err := parseDur(name, s, lo, hi, &d); err != nil {
				return err
			}
			*field(c) = &d
			return nil
		},
		format: func(c Config) (string, bool) {
			if p := *field(&c); p != nil {
				return p.String(), true
			}
			return "", false
		},
	}
}

// intPtr is durPtr for whole numbers.
func intPtr(name, def, doc string, lo, hi int, field func(*Config) **int) entry {
	return entry{name: name, def: def, doc: doc,
		parse: func(c *Config, s string) error {
			var n int
			if err := parseInt(name, s, lo, hi, &n); err != nil {
				return err
			}
			*field(c) = &n
			return nil
		},
		format: func(c Config) (string, bool) {
			if p := *field(&c); p != nil {
				return strconv.Itoa(*p), true
			}
			return "", false
		},
	}
}

// floatPtr is durPtr for numbers; written back in the shortest form that
// reads back to the same float.
func floatPtr(name, def, doc string, lo, hi float64, field func(*Config) **float64) entry {
	return entry{name: name, def: def, doc: doc,
		parse: func(c *Config, s string) error {
			var f float64
			if err := parseFloat(name, s, lo, hi, &f); err != nil {
				return err
			}
			*field(c) = &f
			return nil
		},
		format: func(c Config) (string, bool) {
			if p := *field(&c); p != nil {
				return strconv.FormatFloat(*p, 'g', -1, 64), true
			}
			return "", false
		},
	}
}
