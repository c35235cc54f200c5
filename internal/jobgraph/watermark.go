package jobgraph

import (
	"fmt"
	"time"
)

// Vertex config keys of a source's watermark strategy (docs/event-time.md).
// Any source may set them, a host connector or a guest source: the host
// generates the watermarks from the times of the records the source
// produces, except for WatermarkGuest, where the guest emits them itself.
const (
	// ConfigWatermark is the strategy: one of the WatermarkKind values.
	ConfigWatermark = "watermark"
	// ConfigWatermarkMaxOutOfOrderness (bounded only) is how far behind the
	// newest time seen a record may be and still be on time, as a Go
	// duration ("5s"), at least 0.
	ConfigWatermarkMaxOutOfOrderness = "watermark.max-out-of-orderness"
	// ConfigWatermarkIdleTimeout is how long a split (or a guest source
	// subtask) may produce no record before it stops holding the watermark
	// back, as a Go duration; unset or "0s" means never.
	ConfigWatermarkIdleTimeout = "watermark.idle-timeout"
	// ConfigWatermarkInterval is how often, in processing time, the host
	// emits the generated watermark when it advanced, as a Go duration
	// above 0; unset means DefaultWatermarkInterval.
	ConfigWatermarkInterval = "watermark.interval"
)

// WatermarkKind is a source's watermark strategy.
type WatermarkKind string

// The watermark strategies.
const (
	// WatermarkNone: the source emits no watermarks (no key set).
	WatermarkNone WatermarkKind = ""
	// WatermarkBounded: the watermark is the newest record time seen minus
	// the max out-of-orderness minus 1 ms (Flink's
	// forBoundedOutOfOrderness).
	WatermarkBounded WatermarkKind = "bounded"
	// WatermarkMonotonous: times never go back; the watermark is the newest
	// time seen minus 1 ms (Flink's forMonotonousTimestamps).
	WatermarkMonotonous WatermarkKind = "monotonous"
	// WatermarkGuest: a guest source emits its watermarks itself through
	// the watermark_emit import (docs/ABI.md).
	WatermarkGuest WatermarkKind = "guest"
)

// DefaultWatermarkInterval is the period of watermark emission when a
// source sets none: Flink's pipeline.auto-watermark-interval.
const DefaultWatermarkInterval = 200 * time.Millisecond

// MaxWatermarkDuration bounds the durations of a watermark strategy, so
// that times in milliseconds minus them cannot overflow.
const MaxWatermarkDuration = 365 * 24 * time.Hour

// Watermarks is a source's watermark strategy, parsed from its config.
type Watermarks struct {
	Kind WatermarkKind
	// MaxOutOfOrderness is the bound of WatermarkBounded; 0 otherwise.
	MaxOutOfOrderness time.Duration
	// IdleTimeout is how long without records makes a split idle; 0 means
	// never.
	IdleTimeout time.Duration
	// Interval is the emission period, DefaultWatermarkInterval unless set.
	Interval time.Duration
}

// Enabled reports whether the source emits watermarks at all.
func (w Watermarks) Enabled() bool { return w.Kind != WatermarkNone }

// Watermarks parses v's watermark strategy. A vertex that sets none of the
// keys has WatermarkNone.
//
// # Errors
//
// An error saying which key is wrong and what to write instead: an unknown
// strategy, a duration that does not parse, is negative or above
// MaxWatermarkDuration, a max out-of-orderness on a strategy other than
// bounded, or a watermark key without ConfigWatermark.
func (v *Vertex) Watermarks() (Watermarks, error) {
	w := Watermarks{Kind: WatermarkKind(v.Config[ConfigWatermark]), Interval: DefaultWatermarkInterval}
	_, hasKind := v.Config[ConfigWatermark]
	switch w.Kind {
	case WatermarkNone:
		if hasKind {
			return w, fmt.Errorf("%s is empty: use %q, %q or %q", ConfigWatermark, WatermarkBounded, WatermarkMonotonous, WatermarkGuest)
		}
		for _, k := range []string{ConfigWatermarkMaxOutOfOrderness, ConfigWatermarkIdleTimeout, ConfigWatermarkInterval} {
			if _, ok := v.Config[k]; ok {
				return w, fmt.Errorf("%s is set but %s is not: set %s to %q, %q or %q", k, ConfigWatermark, ConfigWatermark, WatermarkBounded, WatermarkMonotonous, WatermarkGuest)
			}
		}
		return w, nil
	case WatermarkBounded, WatermarkMonotonous, WatermarkGuest:
	default:
		return w, fmt.Errorf("%s %s is not a strategy: use %q, %q or %q", ConfigWatermark, shortQuote(string(w.Kind)), WatermarkBounded, WatermarkMonotonous, WatermarkGuest)
	}
	var err error
	if s, ok := v.Config[ConfigWatermarkMaxOutOfOrderness]; ok {
		if w.Kind != WatermarkBounded {
			return w, fmt.Errorf("%s is set but the strategy is %q: it belongs to %q only", ConfigWatermarkMaxOutOfOrderness, w.Kind, WatermarkBounded)
		}
		if w.MaxOutOfOrderness, err = watermarkDuration(ConfigWatermarkMaxOutOfOrderness, s, true); err != nil {
			return w, err
		}
	}
	if s, ok := v.Config[ConfigWatermarkIdleTimeout]; ok {
		if w.IdleTimeout, err = watermarkDuration(ConfigWatermarkIdleTimeout, s, true); err != nil {
			return w, err
		}
	}
	if s, ok := v.Config[ConfigWatermarkInterval]; ok {
		if w.Interval, err = watermarkDuration(ConfigWatermarkInterval, s, false); err != nil {
			return w, err
		}
	}
	return w, nil
}

func watermarkDuration(key, s string, zeroOK bool) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %s is not a duration: write one like \"5s\" or \"200ms\"", key, shortQuote(s))
	case d < 0:
		return 0, fmt.Errorf("%s %s is negative: it must be at least 0", key, s)
	case d == 0 && !zeroOK:
		return 0, fmt.Errorf("%s %s must be above 0 (or unset for %v)", key, s, DefaultWatermarkInterval)
	case d > MaxWatermarkDuration:
		return 0, fmt.Errorf("%s %s is above the limit of %v", key, s, MaxWatermarkDuration)
	}
	return d, nil
}

// SetWatermarks writes w into v's config, the inverse of Watermarks; a
// zero IdleTimeout or Interval is left unset (never idle; the default).
func (v *Vertex) SetWatermarks(w Watermarks) {
	if v.Config == nil {
		v.Config = map[string]string{}
	}
	for _, k := range []string{ConfigWatermark, ConfigWatermarkMaxOutOfOrderness, ConfigWatermarkIdleTimeout, ConfigWatermarkInterval} {
		delete(v.Config, k)
	}
	if w.Kind == WatermarkNone {
		return
	}
	v.Config[ConfigWatermark] = string(w.Kind)
	if w.Kind == WatermarkBounded {
		v.Config[ConfigWatermarkMaxOutOfOrderness] = w.MaxOutOfOrderness.String()
	}
	// Negative durations are written too: Validate refuses them with a
	// message, rather than the SDK dropping them silently.
	if w.IdleTimeout != 0 {
		v.Config[ConfigWatermarkIdleTimeout] = w.IdleTimeout.String()
	}
	if w.Interval != 0 && w.Interval != DefaultWatermarkInterval {
		v.Config[ConfigWatermarkInterval] = w.Interval.String()
	}
}

// hasWatermarkKey reports whether v sets any watermark key.
func (v *Vertex) hasWatermarkKey() bool {
	for _, k := range []string{ConfigWatermark, ConfigWatermarkMaxOutOfOrderness, ConfigWatermarkIdleTimeout, ConfigWatermarkInterval} {
		if _, ok := v.Config[k]; ok {
			return true
		}
	}
	return false
}
