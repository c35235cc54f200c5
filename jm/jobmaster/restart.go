package jobmaster

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// RestartKind names a restart strategy, as Flink's restart-strategy key.
type RestartKind = jobconfig.RestartKind

// Restart strategies (jobconfig's names, here so that code building a
// RestartStrategy needs only this package).
const (
	// RestartNone never restarts: the first failure fails the job.
	RestartNone = jobconfig.RestartNone
	// RestartFixedDelay restarts at most Attempts times, Delay after each
	// failure.
	RestartFixedDelay = jobconfig.RestartFixedDelay
	// RestartExponentialDelay restarts with a delay that grows by
	// BackoffMultiplier from InitialBackoff up to MaxBackoff, and falls back
	// to InitialBackoff once the job ran ResetBackoffThreshold without a
	// failure.
	RestartExponentialDelay = jobconfig.RestartExponentialDelay
	// RestartFailureRate restarts, Delay after each failure, until more
	// than MaxFailuresPerInterval failures fall within FailureRateInterval.
	RestartFailureRate = jobconfig.RestartFailureRate
)

// The limits of RestartStrategy's fields are the config keys' (jobconfig).
const (
	maxRestartAttempts          = jobconfig.MaxRestartAttempts
	maxRestartDelay             = jobconfig.MaxRestartDelay
	maxRestartWindow            = jobconfig.MaxRestartWindow
	maxBackoffMultiplier        = jobconfig.MaxBackoffMultiplier
	restartKindsForErrorMessage = jobconfig.RestartKinds
)

// RestartStrategy decides whether and when a failed job runs again. The
// zero value never restarts; RestartStrategy{Attempts: n, Delay: d} is the
// fixed-delay strategy (Kind may stay empty).
//
// Fields that do not belong to Kind are ignored. For exponential-delay
// and failure-rate, zero durations, multiplier and failure count take the
// defaults above; JitterFactor zero means no jitter and AttemptsBeforeReset
// zero means no limit. RestartFromConfig fills in Flink's defaults
// (jobconfig.Default…) explicitly.
type RestartStrategy struct {
	// Kind is the strategy; empty means fixed-delay when Attempts > 0, else
	// none.
	Kind RestartKind
	// Attempts (fixed-delay) is how many restarts the job gets in all.
	Attempts int
	// Delay (fixed-delay, failure-rate) is the wait before each restart.
	Delay time.Duration

	// InitialBackoff (exponential-delay) is the first delay.
	InitialBackoff time.Duration
	// MaxBackoff (exponential-delay) caps the delay.
	MaxBackoff time.Duration
	// BackoffMultiplier (exponential-delay, ≥ 1) grows the delay after
	// each failure.
	BackoffMultiplier float64
	// ResetBackoffThreshold (exponential-delay): a job that ran this long
	// after its restart without failing starts again from InitialBackoff.
	ResetBackoffThreshold time.Duration
	// JitterFactor (exponential-delay, 0..1) spreads each delay by up to
	// ±JitterFactor of it, so jobs that failed together do not restart in
	// lockstep.
	JitterFactor float64
	// AttemptsBeforeReset (exponential-delay) is how many restarts the job
	// gets until the backoff resets; 0 means no limit.
	AttemptsBeforeReset int

	// MaxFailuresPerInterval (failure-rate): the job fails once more
	// failures than this fall within FailureRateInterval.
	MaxFailuresPerInterval int
	// FailureRateInterval (failure-rate) is the sliding window.
	FailureRateInterval time.Duration
}

// kind returns the effective strategy.
func (r RestartStrategy) kind() RestartKind {
	switch r.Kind {
	case "":
		if r.Attempts > 0 {
			return RestartFixedDelay
		}
		return RestartNone
	case RestartFixedDelay:
		if r.Attempts == 0 {
			return RestartNone
		}
	}
	return r.Kind
}

// withDefaults fills the zero fields of exponential-delay and failure-rate.
func (r RestartStrategy) withDefaults() RestartStrategy {
	switch r.kind() {
	case RestartExponentialDelay:
		if r.InitialBackoff == 0 {
			r.InitialBackoff = jobconfig.DefaultInitialBackoff
		}
		if r.MaxBackoff == 0 {
			r.MaxBackoff = max(jobconfig.DefaultMaxBackoff, r.InitialBackoff)
		}
		if r.BackoffMultiplier == 0 {
			r.BackoffMultiplier = jobconfig.DefaultBackoffMultiplier
		}
		if r.ResetBackoffThreshold == 0 {
			r.ResetBackoffThreshold = jobconfig.DefaultResetBackoffThreshold
		}
	case RestartFailureRate:
		if r.MaxFailuresPerInterval == 0 {
			r.MaxFailuresPerInterval = jobconfig.DefaultMaxFailures
		}
		if r.FailureRateInterval == 0 {
			r.FailureRateInterval = jobconfig.DefaultFailureRateInterval
		}
	}
	return r
}

// Validate reports whether r can be used.
//
// # Errors
//
// ErrInvalidArgument naming the field, its value and the accepted range.
func (r RestartStrategy) Validate() error {
	bad := func(format string, args ...any) error {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "restart strategy: "+format, args...)
	}
	switch r.Kind {
	case "", RestartNone, RestartFixedDelay, RestartExponentialDelay, RestartFailureRate:
	default:
		return bad("kind %q: want %s", r.Kind, restartKindsForErrorMessage)
	}
	switch {
	case r.Attempts < 0 || r.Attempts > maxRestartAttempts:
		return bad("attempts %d: want 0 to %d", r.Attempts, maxRestartAttempts)
	case r.Delay < 0 || r.Delay > maxRestartDelay:
		return bad("delay %v: want 0 to %v", r.Delay, maxRestartDelay)
	}
	d := r.withDefaults()
	switch d.kind() {
	case RestartExponentialDelay:
		switch {
		case d.InitialBackoff < 0 || d.InitialBackoff > maxRestartDelay:
			return bad("initial backoff %v: want 1ms to %v", d.InitialBackoff, maxRestartDelay)
		case d.MaxBackoff < d.InitialBackoff || d.MaxBackoff > maxRestartDelay:
			return bad("max backoff %v: want from the initial backoff %v to %v", d.MaxBackoff, d.InitialBackoff, maxRestartDelay)
		case !(d.BackoffMultiplier >= 1 && d.BackoffMultiplier <= maxBackoffMultiplier):
			return bad("backoff multiplier %v: want 1 to %v", d.BackoffMultiplier, maxBackoffMultiplier)
		case d.ResetBackoffThreshold < 0 || d.ResetBackoffThreshold > maxRestartWindow:
			return bad("reset backoff threshold %v: want 1ms to %v", d.ResetBackoffThreshold, maxRestartWindow)
		case !(d.JitterFactor >= 0 && d.JitterFactor <= 1):
			return bad("jitter factor %v: want 0 to 1", d.JitterFactor)
		case d.AttemptsBeforeReset < 0 || d.AttemptsBeforeReset > maxRestartAttempts:
			return bad("attempts before reset %d: want 1 to %d, or 0 for no limit", d.AttemptsBeforeReset, maxRestartAttempts)
		}
	case RestartFailureRate:
		switch {
		case d.MaxFailuresPerInterval < 0 || d.MaxFailuresPerInterval > maxRestartAttempts:
			return bad("max failures per interval %d: want 1 to %d", d.MaxFailuresPerInterval, maxRestartAttempts)
		case d.FailureRateInterval < 0 || d.FailureRateInterval > maxRestartWindow:
			return bad("failure rate interval %v: want 1ms to %v", d.FailureRateInterval, maxRestartWindow)
		}
	}
	return nil
}

// String describes the strategy, e.g. "failure-rate 3 per 1m0s, delay 1s".
func (r RestartStrategy) String() string {
	d := r.withDefaults()
	switch d.kind() {
	case RestartFixedDelay:
		return fmt.Sprintf("fixed-delay %d attempts, delay %v", d.Attempts, d.Delay)
	case RestartExponentialDelay:
		return fmt.Sprintf("exponential-delay %v to %v ×%v", d.InitialBackoff, d.MaxBackoff, d.BackoffMultiplier)
	case RestartFailureRate:
		return fmt.Sprintf("failure-rate %d per %v, delay %v", d.MaxFailuresPerInterval, d.FailureRateInterval, d.Delay)
	}
	return string(RestartNone)
}

// giveUpReason says why the strategy allows no more restarts; empty for
// none, whose failures need no explanation.
func (r RestartStrategy) giveUpReason() string {
	d := r.withDefaults()
	switch d.kind() {
	case RestartFixedDelay:
		return fmt.Sprintf("fixed-delay allows %d restarts", d.Attempts)
	case RestartExponentialDelay:
		return fmt.Sprintf("exponential-delay allows %d attempts before the backoff resets", d.AttemptsBeforeReset)
	case RestartFailureRate:
		return fmt.Sprintf("failure-rate %d per %v exceeded", d.MaxFailuresPerInterval, d.FailureRateInterval)
	}
	return ""
}

// restarter applies a RestartStrategy to a job's failures, one at a time.
// It is pure logic: the caller gives the failure times (and the jitter
// source), so it is table-tested without a clock.
type restarter struct {
	s      RestartStrategy
	random func() float64 // in [0, 1); nil: no jitter
	// fixed-delay
	restarts int
	// exponential-delay
	backoff    time.Duration // delay of the last restart; 0 before the first
	sinceReset int
	last       time.Time
	// failure-rate: failures within the window, oldest first
	recent []time.Time
}

func newRestarter(s RestartStrategy, random func() float64) *restarter {
	return &restarter{s: s.withDefaults(), random: random}
}

// failure records a failure at time at and returns how long to wait before
// the restart, or ok false when the job must fail for good.
func (x *restarter) failure(at time.Time) (delay time.Duration, ok bool) {
	s := x.s
	switch s.kind() {
	case RestartFixedDelay:
		if x.restarts >= s.Attempts {
			return 0, false
		}
		x.restarts++
		return s.Delay, true

	case RestartExponentialDelay:
		// Stable for long enough since the restart: start over.
		if !x.last.IsZero() && at.Sub(x.last) >= s.ResetBackoffThreshold+x.backoff {
			x.backoff, x.sinceReset = 0, 0
		}
		x.last = at
		if s.AttemptsBeforeReset > 0 && x.sinceReset >= s.AttemptsBeforeReset {
			return 0, false
		}
		x.sinceReset++
		if x.backoff == 0 {
			x.backoff = s.InitialBackoff
		} else {
			next := float64(x.backoff) * s.BackoffMultiplier
			x.backoff = time.Duration(min(next, float64(s.MaxBackoff)))
		}
		delay = x.backoff
		if s.JitterFactor > 0 && x.random != nil {
			delay += time.Duration(float64(delay) * s.JitterFactor * (2*x.random() - 1))
		}
		return max(delay, 0), true

	case RestartFailureRate:
		keep := x.recent[:0]
		for _, t := range x.recent {
			if at.Sub(t) < s.FailureRateInterval {
				keep = append(keep, t)
			}
		}
		x.recent = append(keep, at)
		if len(x.recent) > s.MaxFailuresPerInterval {
			return 0, false
		}
		return s.Delay, true
	}
	return 0, false
}

// RestartFromConfig is the restart strategy of a job whose config says r
// (jobconfig parsed and range-checked it), where def is the JobManager's
// default strategy.
//
// Without a named strategy, r's keys of def's strategy apply to def (the
// fixed-delay keys when def is none or fixed-delay; the fixed-delay
// attempts alone turn a none default into fixed-delay). Naming a strategy
// other than def's starts from that strategy's defaults. The keys of the
// strategies not chosen are still combined, so a job's config is refused
// the same way whichever strategy it names.
//
// # Errors
//
// ErrInvalidArgument when the exponential-delay max backoff ends up below
// its initial backoff (one of them may come from def).
func RestartFromConfig(r jobconfig.Restart, def RestartStrategy) (RestartStrategy, error) {
	fixed := def
	if def.kind() != RestartFixedDelay && def.kind() != RestartNone {
		fixed = RestartStrategy{}
	}
	set(&fixed.Attempts, r.Attempts)
	set(&fixed.Delay, r.Delay)

	exp := RestartStrategy{
		Kind: RestartExponentialDelay, InitialBackoff: jobconfig.DefaultInitialBackoff, MaxBackoff: jobconfig.DefaultMaxBackoff,
		BackoffMultiplier: jobconfig.DefaultBackoffMultiplier, ResetBackoffThreshold: jobconfig.DefaultResetBackoffThreshold,
		JitterFactor: jobconfig.DefaultJitterFactor,
	}
	if def.kind() == RestartExponentialDelay {
		exp = def.withDefaults()
	}
	set(&exp.InitialBackoff, r.InitialBackoff)
	set(&exp.MaxBackoff, r.MaxBackoff)
	set(&exp.BackoffMultiplier, r.BackoffMultiplier)
	set(&exp.ResetBackoffThreshold, r.ResetBackoffThreshold)
	set(&exp.JitterFactor, r.JitterFactor)
	set(&exp.AttemptsBeforeReset, r.AttemptsBeforeReset)
	if exp.MaxBackoff < exp.InitialBackoff {
		return def, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "config %s=%v is below %s=%v: the max backoff must be at least the initial backoff",
			jobconfig.KeyExpMaxBackoff, exp.MaxBackoff, jobconfig.KeyExpInitialBackoff, exp.InitialBackoff)
	}

	rate := RestartStrategy{Kind: RestartFailureRate, MaxFailuresPerInterval: jobconfig.DefaultMaxFailures,
		FailureRateInterval: jobconfig.DefaultFailureRateInterval, Delay: jobconfig.DefaultFailureRateDelay}
	if def.kind() == RestartFailureRate {
		rate = def.withDefaults()
	}
	set(&rate.MaxFailuresPerInterval, r.MaxFailuresPerInterval)
	set(&rate.FailureRateInterval, r.FailureRateInterval)
	set(&rate.Delay, r.FailureRateDelay)

	kind := def.kind()
	if r.Strategy != "" {
		kind = r.Strategy
	}
	switch kind {
	case RestartExponentialDelay:
		return exp, nil
	case RestartFailureRate:
		return rate, nil
	case RestartFixedDelay:
		if fixed.Kind == RestartNone {
			fixed.Kind = ""
		}
		return fixed, nil
	}
	if r.Strategy != "" {
		return RestartStrategy{}, nil
	}
	// def is none: the fixed-delay attempts alone turn fixed-delay on.
	if r.Attempts != nil && fixed.Kind == RestartNone {
		fixed.Kind = ""
	}
	return fixed, nil
}

// set overwrites *dst with what the job's config set, if it set it.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
