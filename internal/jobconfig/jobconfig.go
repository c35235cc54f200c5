package jobconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Config is a job's configuration, parsed (Parse). Its zero value is
// usable and means every default, but Parse fills the defaults in
// explicitly (Default).
type Config struct {
	// Checkpoints is the job's periodic checkpointing.
	Checkpoints Checkpoints
	// Restart is what the job says about its restart strategy; the
	// JobManager's default strategy fills in what it leaves unset.
	Restart Restart
	// Inputs maps the paths a text source names to blob keys or key
	// prefixes (KeyInputs); nil when the job sets none.
	Inputs map[string]string
	// Clock is what a guest's clock reads (KeyClock).
	Clock Clock
	// Poison is the job's poison-record policy.
	Poison Poison
	// CallFuel is the job's per-call fuel limit (KeyCallFuel); 0 means
	// none.
	CallFuel int64
	// Secrets are the job's secrets by name, from the keys
	// KeySecretPrefix+name, for the references of its host connectors'
	// config (jobgraph.ResolveSecrets); nil when the job has none.
	Secrets map[string]string
}

// Poison is what a job's tasks do with a record that traps the guest
// (KeyPoisonRecords and the keys after it).
type Poison struct {
	// Policy is the job's; operators may override it for their chain
	// (jobgraph.ChainPoisonPolicy). The zero value means PoisonFail.
	Policy jobgraph.PoisonPolicy
	// MaxPerMillion: a task fails once the records it dropped exceed this
	// many per million records it read, rounded up. Zero means the default.
	MaxPerMillion int
	// MaxCount, when set, is the most records a task may drop.
	MaxCount *int
	// DeadLetterPath is where dead-letter records go, relative to the
	// tenant's files; required when any chain dead-letters.
	DeadLetterPath string
}

// Allowed reports whether a task that read in records may drop dropped
// of them: the rate (rounded up) and the count bound it.
func (p Poison) Allowed(dropped, in int64) bool {
	if p.MaxCount != nil && dropped > int64(*p.MaxCount) {
		return false
	}
	per := int64(p.MaxPerMillion)
	if per <= 0 {
		per = DefaultPoisonMaxPerMillion
	}
	// ceil(per*in/1e6), without overflow for any realistic in.
	allowed := (per*in + 999_999) / 1_000_000
	return dropped <= max(allowed, 1)
}

// CheckGraph validates what the config says about g: a chain that
// dead-letters needs the dead-letter path.
//
// # Errors
//
// An error naming the operator whose override needs a key the config
// lacks.
func (c Config) CheckGraph(g *jobgraph.Graph) error {
	if g != nil && !c.Checkpoints.Enabled() {
		for _, v := range g.Vertices {
			if v.Connector == jobgraph.ConnectorKafkaSink {
				if set, err := v.Kafka(); err == nil && set.Delivery == jobgraph.DeliveryExactlyOnce {
					return fmt.Errorf("operator %d (%s) is an exactly-once kafka sink, whose transactions commit when a checkpoint completes, but the job sets no %s: set it (e.g. 10s), or make the sink %s", v.ID, v.Name, KeyCheckpointInterval, jobgraph.DeliveryAtLeastOnce)
				}
				continue
			}
			if v.Connector != jobgraph.ConnectorJetStreamSink {
				continue
			}
			if set, err := v.JetStream(); err == nil && set.Delivery == jobgraph.DeliveryExactlyOnce {
				return fmt.Errorf("operator %d (%s) is an exactly-once jetstream sink, which publishes when a checkpoint completes, but the job sets no %s: set it (e.g. 10s), or make the sink %s", v.ID, v.Name, KeyCheckpointInterval, jobgraph.DeliveryAtLeastOnce)
			}
		}
	}
	if c.Poison.DeadLetterPath != "" || g == nil {
		return nil
	}
	for _, v := range g.Vertices {
		if p, err := jobgraph.ParsePoisonPolicy(v.Config[jobgraph.ConfigPoisonRecords]); err == nil && p == jobgraph.PoisonDeadLetter && v.Connector == "" {
			return fmt.Errorf("operator %d (%s) sets %s=%s, but the job sets no %s: set it to the directory, under your files, the dead-letter records go to",
				v.ID, v.Name, jobgraph.ConfigPoisonRecords, p, KeyDeadLetterPath)
		}
	}
	return nil
}

// Checkpoints is a job's checkpointing (Flink's keys, see Keys). The
// JobMaster reads a zero Timeout, MaxConcurrent or Retained as the
// default.
type Checkpoints struct {
	// Interval between periodic checkpoints; zero means none (savepoints
	// still work).
	Interval time.Duration
	// Timeout after which a checkpoint that not every task acknowledged
	// is aborted.
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint and the
	// start of the next.
	MinPause time.Duration
	// MaxConcurrent is how many checkpoints may be in progress at once.
	MaxConcurrent int
	// TolerableFailures is how many checkpoints in a row may fail before
	// the job fails; negative means no limit.
	TolerableFailures int
	// Retained is how many completed checkpoints are kept.
	Retained int
	// Retention is what becomes of the retained checkpoints when the job
	// is canceled (KeyCheckpointRetention); the zero value means
	// DeleteOnCancellation.
	Retention Retention
}

// Retention is what a job that ends does with its retained checkpoints,
// as Flink's externalized checkpoint retention. A job that FAILED (or was
// SUSPENDED by its JobManager shutting down) keeps them either way, and
// one that FINISHED deletes them either way.
type Retention string

// Retentions, spelled as Flink's.
const (
	// RetainOnCancellation keeps the retained checkpoints when the job is
	// canceled, too.
	RetainOnCancellation Retention = "RETAIN_ON_CANCELLATION"
	// DeleteOnCancellation, the default, deletes them when the job is
	// canceled.
	DeleteOnCancellation Retention = "DELETE_ON_CANCELLATION"
)

// KeepOnCancel reports whether a canceled job keeps its retained
// checkpoints.
func (c Checkpoints) KeepOnCancel() bool { return c.Retention == RetainOnCancellation }

// Enabled reports whether periodic checkpoints run.
func (c Checkpoints) Enabled() bool { return c.Interval > 0 }

// DefaultCheckpoints is checkpointing off, with Flink's defaults otherwise.
func DefaultCheckpoints() Checkpoints {
	return Checkpoints{Timeout: DefaultCheckpointTimeout, MaxConcurrent: 1, TolerableFailures: -1, Retained: 1, Retention: DeleteOnCancellation}
}

// RestartKind names a restart strategy, as Flink's restart-strategy key.
type RestartKind string

// Restart strategies, in the canonical spelling Parse stores.
const (
	// RestartNone never restarts: the first failure fails the job.
	RestartNone RestartKind = "none"
	// RestartFixedDelay restarts a fixed number of times, a fixed delay
	// after each failure.
	RestartFixedDelay RestartKind = "fixed-delay"
	// RestartExponentialDelay restarts with a delay that grows after each
	// failure and resets once the job ran stable for a while.
	RestartExponentialDelay RestartKind = "exponential-delay"
	// RestartFailureRate restarts until too many failures fall within an
	// interval.
	RestartFailureRate RestartKind = "failure-rate"
)

// Restart is the restart strategy as a job's config sets it: a nil field
// is a key the job left out, so the JobManager's default strategy keeps
// its value (jm/jobmaster.RestartFromConfig combines the two). Parse
// checks every key present against its range, whichever strategy is
// chosen. Treat the pointed-to values as read-only.
type Restart struct {
	// Strategy is the strategy the job names; empty when it names none.
	Strategy RestartKind

	// Attempts (fixed-delay) is how many restarts the job gets in all.
	Attempts *int
	// Delay (fixed-delay) is the wait before each restart.
	Delay *time.Duration

	// InitialBackoff (exponential-delay) is the first delay.
	InitialBackoff *time.Duration
	// MaxBackoff (exponential-delay) caps the delay.
	MaxBackoff *time.Duration
	// BackoffMultiplier (exponential-delay) grows the delay after each
	// failure.
	BackoffMultiplier *float64
	// ResetBackoffThreshold (exponential-delay): a job that ran this long
	// without failing starts again from InitialBackoff.
	ResetBackoffThreshold *time.Duration
	// JitterFactor (exponential-delay) spreads each delay by up to
	// ±JitterFactor of it.
	JitterFactor *float64
	// AttemptsBeforeReset (exponential-delay) is how many restarts the job
	// gets until the backoff resets.
	AttemptsBeforeReset *int

	// MaxFailuresPerInterval (failure-rate): the job fails once more
	// failures than this fall within FailureRateInterval.
	MaxFailuresPerInterval *int
	// FailureRateInterval (failure-rate) is the sliding window.
	FailureRateInterval *time.Duration
	// FailureRateDelay (failure-rate) is the wait before each restart.
	FailureRateDelay *time.Duration
}

// Clock is what a guest's clock (now_ms and the WASI clocks) reads.
type Clock string

// Clocks.
const (
	// ClockVirtual, the default: time advances only as timers fire, so a
	// replayed task sees the same times. The zero Clock means it too.
	ClockVirtual Clock = "virtual"
	// ClockWall is the host's wall clock, for jobs that pace themselves by
	// real time.
	ClockWall Clock = "wall"
)

// Default is the configuration of a job that sets no key.
func Default() Config {
	return Config{Checkpoints: DefaultCheckpoints(), Clock: ClockVirtual,
		Poison: Poison{Policy: jobgraph.PoisonFail, MaxPerMillion: DefaultPoisonMaxPerMillion}}
}

// Parse reads and validates a job's config, every key of the table (see
// Keys); keys left out take their defaults. It does not change conf.
//
// # Errors
//
// An error naming the first bad key, its value and what is accepted; for
// a key that is not in the table, the nearest one that is.
func Parse(conf map[string]string) (Config, error) {
	c := Default()
	tab := table()
	known := make(map[string]bool, len(tab))
	for _, e := range tab {
		known[e.name] = true
	}
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if name, ok := strings.CutPrefix(k, KeySecretPrefix); ok {
			if why := jobgraph.BadSecretName(name); why != "" {
				return Default(), fmt.Errorf("config key %q: the secret's name %s", k, why)
			}
			if c.Secrets == nil {
				c.Secrets = map[string]string{}
			}
			c.Secrets[name] = conf[k]
			continue
		}
		if !known[k] {
			return Default(), fmt.Errorf("unknown config key %q: did you mean %q?", k, nearest(k, tab))
		}
	}
	// In table order, so the bad key reported does not depend on map
	// iteration.
	for _, e := range tab {
		s, ok := conf[e.name]
		if !ok {
			continue
		}
		if err := e.parse(&c, s); err != nil {
			return Default(), err
		}
	}
	if err := c.check(); err != nil {
		return Default(), err
	}
	return c, nil
}

// check validates what concerns more than one key.
func (c Config) check() error {
	if c.Poison.Policy == jobgraph.PoisonDeadLetter && c.Poison.DeadLetterPath == "" {
		return fmt.Errorf("config %s=%s needs %s: set it to the directory, under your files, the dead-letter records go to (such as \"dead-letters/orders\")",
			KeyPoisonRecords, c.Poison.Policy, KeyDeadLetterPath)
	}
	r := c.Restart
	if r.InitialBackoff != nil && r.MaxBackoff != nil && *r.MaxBackoff < *r.InitialBackoff {
		return fmt.Errorf("config %s=%v is below %s=%v: the max backoff must be at least the initial backoff",
			KeyExpMaxBackoff, *r.MaxBackoff, KeyExpInitialBackoff, *r.InitialBackoff)
	}
	return nil
}

// Map is c in its canonical form, the one that crosses the wire to the
// tasks: only the keys whose values differ from the defaults, each spelled
// one way, and none of the secrets (the Dispatcher resolved them into the
// job graph, the tasks need no more). Parse(c.Map()) equals c without its
// Secrets for every c that Parse returned.
func (c Config) Map() map[string]string {
	m := map[string]string{}
	for _, e := range table() {
		if s, ok := e.format(c); ok {
			m[e.name] = s
		}
	}
	return m
}

// Key documents one config key.
type Key struct {
	Name    string
	Default string // as a user would say it
	Doc     string
}

// Keys lists every config key Parse accepts, in the table's order.
func Keys() []Key {
	tab := table()
	out := make([]Key, len(tab), len(tab)+1)
	for i, e := range tab {
		out[i] = Key{Name: e.name, Default: e.def, Doc: e.doc}
	}
	return append(out, Key{Name: KeySecretPrefix + "<name>", Default: "none",
		Doc: "a secret a host connector's config names as secret:<name> (a password, a token), kept out of job graphs, status, logs and errors; sluice run --job-secret <name>=FILE sets it from a file"})
}

// nearest returns the known key closest to k by edit distance (the first
// in table order on a tie).
func nearest(k string, tab []entry) string {
	best, bestD := "", -1
	for _, e := range tab {
		if d := editDistance(k, e.name); bestD < 0 || d < bestD {
			best, bestD = e.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
// Keys are short ASCII; a longer unknown key is cut, so a huge one cannot
// make the JobManager spend quadratic time on it.
func editDistance(a, b string) int {
	const maxLen = 128
	a, b = a[:min(len(a), maxLen)], b[:min(len(b), maxLen)]
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
