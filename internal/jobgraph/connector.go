package jobgraph

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Vertex config keys of the host connectors. The guest SDK writes them
// while the plan runs; the host reads them only through the methods below,
// so each key is read in one place.
const (
	// ConfigPaths (text source) is a JSON list of the paths it reads.
	ConfigPaths = "paths"
	// ConfigPath (file sink) is the directory, relative to the tenant's
	// files, that the sink's parts are committed under.
	ConfigPath = "path"
)

// SourcePaths returns the paths a text source reads (its ConfigPaths).
//
// # Errors
//
// An error when the config is not a non-empty JSON list of strings.
func (v *Vertex) SourcePaths() ([]string, error) {
	var paths []string
	if err := json.Unmarshal([]byte(v.Config[ConfigPaths]), &paths); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("no paths")
	}
	return paths, nil
}

// SinkPath returns a file sink's path (its ConfigPath) as the plan wrote
// it; Validate and the sink check it.
func (v *Vertex) SinkPath() string { return v.Config[ConfigPath] }

// Vertex config keys of the nexmark source (docs/ABI.md section 5), each
// a decimal integer; a missing key takes its default.
const (
	// ConfigNexmarkEvents is how many events the stream has; 0 (the
	// default) means unbounded.
	ConfigNexmarkEvents = "events"
	// ConfigNexmarkRate is the stream's rate in events per second over all
	// its subtasks, which also spaces the events' times; 0 (the default)
	// means as fast as possible, with event times spaced as at 10,000
	// events per second.
	ConfigNexmarkRate = "rate"
	// ConfigNexmarkSeed selects the stream (default 0).
	ConfigNexmarkSeed = "seed"
	// ConfigNexmarkBaseTime is the first event's time in milliseconds
	// since the Unix epoch (default 0).
	ConfigNexmarkBaseTime = "base-time"
	// ConfigNexmarkOutOfOrder is the size of the groups of events whose
	// order is permuted (default 1: in order).
	ConfigNexmarkOutOfOrder = "out-of-order-group"
)

// NexmarkSettings are a nexmark source's settings, as its config gives them.
type NexmarkSettings struct {
	Events          int64 // 0: unbounded
	Rate            int64 // events per second; 0: as fast as possible
	Seed            uint64
	BaseTime        int64 // milliseconds since the Unix epoch
	OutOfOrderGroup int64 // at least 1
}

// maxNexmarkRate bounds the rate, so the spacing of event times (at least
// a microsecond) stays meaningful.
const maxNexmarkRate = 1_000_000_000

// Nexmark returns a nexmark source's settings from its config.
//
// # Errors
//
// An error naming the key when a value is not a decimal integer or is out
// of range (negative events, rate or base time; a rate above 10⁹; a group
// below 1), or when the config has a key the source does not know.
func (v *Vertex) Nexmark() (NexmarkSettings, error) {
	s := NexmarkSettings{OutOfOrderGroup: 1}
	for _, k := range sortedConfigKeys(v.Config) {
		val := v.Config[k]
		var err error
		switch k {
		case ConfigNexmarkEvents:
			s.Events, err = nexmarkInt(k, val, 0, math.MaxInt64/2)
		case ConfigNexmarkRate:
			s.Rate, err = nexmarkInt(k, val, 0, maxNexmarkRate)
		case ConfigNexmarkSeed:
			s.Seed, err = strconv.ParseUint(val, 10, 64)
			if err != nil {
				err = fmt.Errorf("nexmark source: %s %q is not an unsigned decimal integer", k, val)
			}
		case ConfigNexmarkBaseTime:
			s.BaseTime, err = nexmarkInt(k, val, 0, math.MaxInt64/4)
		case ConfigNexmarkOutOfOrder:
			s.OutOfOrderGroup, err = nexmarkInt(k, val, 1, 1<<20)
		case ConfigWatermark, ConfigWatermarkMaxOutOfOrderness, ConfigWatermarkIdleTimeout, ConfigWatermarkInterval:
			// The source's watermark strategy: Vertex.Watermarks reads it.
		default:
			err = fmt.Errorf("nexmark source: unknown config key %q (known: %s, %s, %s, %s, %s)", k,
				ConfigNexmarkEvents, ConfigNexmarkRate, ConfigNexmarkSeed, ConfigNexmarkBaseTime, ConfigNexmarkOutOfOrder)
		}
		if err != nil {
			return NexmarkSettings{}, err
		}
	}
	return s, nil
}

func nexmarkInt(key, val string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("nexmark source: %s %q is not a decimal integer from %d to %d", key, val, lo, hi)
	}
	return n, nil
}

// ConfigMonitorInterval (text source) is how often, in milliseconds, a
// source that follows its paths relists them for new objects (Flink's
// continuous FileSource); absent, the source reads what its paths name at
// submit and ends. A decimal integer of at least MinMonitorInterval.
const ConfigMonitorInterval = "monitor-interval-ms"

// MinMonitorInterval is the shortest monitor interval a text source takes:
// each relist is one listing of every path in the blob store.
const MinMonitorInterval = 100 * time.Millisecond

// MonitorInterval returns how often a text source relists its paths (its
// ConfigMonitorInterval); ok is false for a source that does not follow
// them.
//
// # Errors
//
// An error when the value is not a decimal integer of at least
// MinMonitorInterval in milliseconds.
func (v *Vertex) MonitorInterval() (d time.Duration, ok bool, err error) {
	s, ok := v.Config[ConfigMonitorInterval]
	if !ok {
		return 0, false, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < MinMonitorInterval.Milliseconds() || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, false, fmt.Errorf("%q config %q: want a whole number of milliseconds, at least %d (%v)", ConfigMonitorInterval, s, MinMonitorInterval.Milliseconds(), MinMonitorInterval)
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

// SetMonitorInterval makes a text source follow its paths, relisting them
// every d (MonitorInterval reads it back).
func (v *Vertex) SetMonitorInterval(d time.Duration) {
	if v.Config == nil {
		v.Config = map[string]string{}
	}
	v.Config[ConfigMonitorInterval] = strconv.FormatInt(d.Milliseconds(), 10)
}
