package checkpoint

import (
	"fmt"
	"strconv"
	"time"
)

// Config is a job's checkpointing, from its config (Flink's keys):
//
//	execution.checkpointing.interval                   duration; absent or zero ("0", "0s", "0ms") = off
//	execution.checkpointing.timeout                    duration, default 1m
//	execution.checkpointing.min-pause                  duration, default 0
//	execution.checkpointing.max-concurrent-checkpoints 1..16, default 1
//	execution.checkpointing.tolerable-failed-checkpoints  ≥ 0; absent = unlimited
//	state.checkpoints.num-retained                     1..100, default 1
type Config struct {
	Interval      time.Duration
	Timeout       time.Duration
	MinPause      time.Duration
	MaxConcurrent int
	// TolerableFailures is how many checkpoints in a row may fail before
	// the job fails; negative means no limit.
	TolerableFailures int
	Retained          int
}

// Enabled reports whether periodic checkpoints run.
func (c Config) Enabled() bool { return c.Interval > 0 }

// Config keys.
const (
	KeyInterval      = "execution.checkpointing.interval"
	KeyTimeout       = "execution.checkpointing.timeout"
	KeyMinPause      = "execution.checkpointing.min-pause"
	KeyMaxConcurrent = "execution.checkpointing.max-concurrent-checkpoints"
	KeyTolerable     = "execution.checkpointing.tolerable-failed-checkpoints"
	KeyRetained      = "state.checkpoints.num-retained"
)

// DefaultConfig is checkpointing off, with Flink's defaults otherwise.
func DefaultConfig() Config {
	return Config{Timeout: time.Minute, MaxConcurrent: 1, TolerableFailures: -1, Retained: 1}
}

// ParseConfig reads checkpointing from a job's config.
//
// # Errors
//
// An error naming the key, the value and what is accepted.
func ParseConfig(conf map[string]string) (Config, error) {
	c := DefaultConfig()
	dur := func(key string, min, max time.Duration, dst *time.Duration) error {
		s, ok := conf[key]
		if !ok {
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < min || d > max {
			return fmt.Errorf("config %s=%q: want a duration from %v to %v, such as 500ms or 10s", key, s, min, max)
		}
		*dst = d
		return nil
	}
	num := func(key string, min, max int, dst *int) error {
		s, ok := conf[key]
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < min || n > max {
			return fmt.Errorf("config %s=%q: want a whole number from %d to %d", key, s, min, max)
		}
		*dst = n
		return nil
	}
	var interval error
	if d, err := time.ParseDuration(conf[KeyInterval]); err != nil || d != 0 {
		interval = dur(KeyInterval, 10*time.Millisecond, 24*time.Hour, &c.Interval)
	}
	for _, err := range []error{
		interval,
		dur(KeyTimeout, 10*time.Millisecond, 24*time.Hour, &c.Timeout),
		dur(KeyMinPause, 0, 24*time.Hour, &c.MinPause),
		num(KeyMaxConcurrent, 1, 16, &c.MaxConcurrent),
		num(KeyTolerable, 0, 1_000_000, &c.TolerableFailures),
		num(KeyRetained, 1, 100, &c.Retained),
	} {
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// Status of a checkpoint in Stats.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
	StatusAborted    = "ABORTED"
)

// Stats is what `sluice checkpoints` shows of one checkpoint.
type Stats struct {
	ID          int64
	Savepoint   bool
	SavepointID string // savepoints only
	Status      string
	Triggered   time.Time
	Duration    time.Duration // until completed or aborted
	Size        int64
	Reason      string // why it aborted
	// Location is the directory of its metadata: where it can be resumed
	// from.
	Location string
}
