package wasmhost

import (
	"log/slog"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/wasmhost/internal/validate"
)

// Defaults for a zero Limits field.
const (
	DefaultMemoryLimitBytes = 256 << 20
	DefaultCallTimeout      = 10 * time.Second
	DefaultMaxLogBytes      = 1 << 20
	DefaultMaxStateBytes    = 1 << 30
)

// RuntimeConfig configures a Runtime. It is immutable: each With method
// returns a changed copy. The zero value is not usable; start from
// NewRuntimeConfig.
type RuntimeConfig struct {
	cacheDir       string
	cacheDirBudget int64
	maxMemoryBytes uint64
	maxModuleBytes int
	logger         *slog.Logger

	compileTimeout  time.Duration
	compileGlobal   int
	compilePerOwner int
	compileQueue    int
	compileWorkers  int
	cachedModules   int
	// limits are the structural limits; zero means validate.DefaultLimits.
	limits validate.Shape
	// noFuelShares counts fuel but never holds a guest for its tenant's
	// share (WithFuelShares).
	noFuelShares bool
}

// Defaults of the compile path; see the With methods.
const (
	DefaultCompileTimeout = 5 * time.Minute
	DefaultCachedModules  = 16
)

// NewRuntimeConfig returns the defaults: no on-disk cache, instances capped
// at 4 GiB of linear memory at most (each instance's own cap comes from its
// Limits), modules up to 64 MiB, logs discarded unless a task brings its own
// logger.
func NewRuntimeConfig() RuntimeConfig {
	procs := runtime.GOMAXPROCS(0)
	return RuntimeConfig{
		maxMemoryBytes: 4 << 30, maxModuleBytes: 64 << 20,
		compileTimeout: DefaultCompileTimeout,
		compileGlobal:  max(2, procs), compilePerOwner: 1, compileQueue: 8,
		compileWorkers: min(max(2, procs), 4),
		cachedModules:  DefaultCachedModules,
	}
}

func (c RuntimeConfig) withCompileDefaults(def RuntimeConfig) RuntimeConfig {
	if c.compileTimeout <= 0 {
		c.compileTimeout = def.compileTimeout
	}
	if c.compileGlobal <= 0 {
		c.compileGlobal = def.compileGlobal
	}
	if c.compilePerOwner <= 0 {
		c.compilePerOwner = def.compilePerOwner
	}
	if c.compileQueue <= 0 {
		c.compileQueue = def.compileQueue
	}
	if c.compileWorkers < 2 {
		c.compileWorkers = def.compileWorkers
	}
	if c.cachedModules <= 0 {
		c.cachedModules = def.cachedModules
	}
	if c.limits == (validate.Shape{}) {
		c.limits = validate.DefaultLimits()
	}
	return c
}

// withModuleLimits replaces the structural limits, for tests and
// measurements.
func (c RuntimeConfig) withModuleLimits(l validate.Shape) RuntimeConfig {
	c.limits = l
	return c
}

// WithCompileTimeout bounds validating, instrumenting and compiling one
// module (default DefaultCompileTimeout). A module that takes longer is
// refused with ErrInvalidModule; the structural limits (docs/SECURITY.md)
// keep a module within them far below it on any reasonable machine.
func (c RuntimeConfig) WithCompileTimeout(d time.Duration) RuntimeConfig {
	c.compileTimeout = d
	return c
}

// WithCompileConcurrency bounds how many modules compile at once: total in
// all (default GOMAXPROCS, at least 2), perOwner for one owner (a tenant;
// default 1), and queue callers of one owner waiting for a place (default
// 8; more get ErrBusy). Zero keeps a default. So one tenant's uploads cannot
// hold every compile place while another tenant's wait.
func (c RuntimeConfig) WithCompileConcurrency(total, perOwner, queue int) RuntimeConfig {
	if total > 0 {
		c.compileGlobal = total
	}
	if perOwner > 0 {
		c.compilePerOwner = perOwner
	}
	if queue > 0 {
		c.compileQueue = queue
	}
	return c
}

// WithCachedModules is how many compiled modules the runtime keeps after
// their last use (default DefaultCachedModules, least recently used go
// first). A module still held, by a task or a caller, stays findable by
// digest whatever the number; one nobody holds is freed. So uploads of
// ever new modules cannot pin unbounded memory.
func (c RuntimeConfig) WithCachedModules(n int) RuntimeConfig {
	c.cachedModules = n
	return c
}

// WithFuelShares turns the fuel scheduler on (the default) or off. Off,
// every guest's fuel is still counted exactly (Instance.Fuel,
// Runtime.TenantFuel, Limits.CallFuel), but no guest ever waits for its
// tenant's CPU share or rate cap: the kernel alone decides who runs. It is
// there to measure what the scheduler costs (BENCHMARKS.md).
func (c RuntimeConfig) WithFuelShares(on bool) RuntimeConfig {
	c.noFuelShares = !on
	return c
}

// WithCacheDir keeps compiled machine code in dir, so a module compiled once
// by any process sharing dir compiles again in a fraction of the time.
// Empty means no on-disk cache (an in-memory cache by digest is always on).
func (c RuntimeConfig) WithCacheDir(dir string) RuntimeConfig {
	c.cacheDir = dir
	return c
}

// WithCacheDirBudget bounds the files of the on-disk cache to bytes: after
// every compile that reaches wazero, the least recently used files go
// until the rest fit (the machine code of a module in use is in memory, so
// a deleted file only costs a compile later). Zero or less means no bound.
func (c RuntimeConfig) WithCacheDirBudget(bytes int64) RuntimeConfig {
	c.cacheDirBudget = bytes
	return c
}

// withMaxMemoryBytes is the ceiling no instance's memory cap may exceed,
// rounded down to whole 64 KiB pages (at most 4 GiB, the wasm32 limit).
func (c RuntimeConfig) withMaxMemoryBytes(n uint64) RuntimeConfig {
	c.maxMemoryBytes = n
	return c
}

// WithMaxModuleBytes rejects larger modules before compiling them.
func (c RuntimeConfig) WithMaxModuleBytes(n int) RuntimeConfig {
	c.maxModuleBytes = n
	return c
}

// WithLogger is where guest output and log calls go when a task brings no
// logger of its own, and during Plan. Nil discards them.
func (c RuntimeConfig) WithLogger(l *slog.Logger) RuntimeConfig {
	c.logger = l
	return c
}

// Limits bound what one guest instance may use. Zero fields take the
// Default* values.
type Limits struct {
	// MemoryLimitBytes caps the instance's linear memory. A guest that grows
	// past it sees memory.grow fail; a Go guest then dies with "out of
	// memory" and the call fails with ErrMemoryLimit.
	MemoryLimitBytes uint64
	// CallTimeout is the deadline of each call into the guest, including
	// instantiation. When it passes the instance is closed and the call
	// fails with ErrDeadline.
	CallTimeout time.Duration
	// MaxLogBytes bounds what the instance may log (stdout, stderr and the
	// log import together); beyond it output is dropped with one note.
	MaxLogBytes int64
	// MaxStateBytes bounds the keys and values the instance keeps in its
	// State; a put beyond it traps with ErrMemoryLimit.
	MaxStateBytes int64
	// CPUWeight is the instance's tenant's share of the CPU among the
	// tenants whose guests run in the same runtime (below 1 means 1): at a
	// fuel trip a guest whose tenant ran further ahead of the others than
	// its weight allows waits there, so busy tenants' fuel stays in the
	// ratio of their weights; a tenant alone is never held. Every instance
	// of one tenant should carry the same share (the last one started
	// counts). See docs/RATIONALE.md, "Why fuel, not nice values?".
	CPUWeight int
	// FuelPerSecond caps the fuel all instances of the tenant spend per
	// second in the runtime together; 0 means no cap.
	FuelPerSecond int64
	// CallFuel is a deterministic alternative to CallTimeout: a call that
	// runs this many fuel checks (loop headers and function entries) traps
	// with ErrFuelLimit, at the same place on every run with the same
	// input. 0 means no fuel limit; CallTimeout stays the backstop.
	CallFuel int64
	// GrantClock gives the guest the host's clocks: WASI clock_time_get and
	// now_ms read real time. Without it WASI clocks are wazero's
	// deterministic fake clocks and now_ms is the task's virtual processing
	// time (the latest FireTimers time). See docs/ABI.md.
	GrantClock bool
}

func (l Limits) withDefaults() Limits {
	if l.MemoryLimitBytes == 0 {
		l.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	if l.CallTimeout == 0 {
		l.CallTimeout = DefaultCallTimeout
	}
	if l.MaxLogBytes == 0 {
		l.MaxLogBytes = DefaultMaxLogBytes
	}
	if l.MaxStateBytes == 0 {
		l.MaxStateBytes = DefaultMaxStateBytes
	}
	return l
}

// TaskConfig describes the task a module instance runs.
type TaskConfig struct {
	JobID    string
	TaskName string
	// Tenant owns the task: its instances' fuel counts against the
	// tenant's share (Limits.CPUWeight) and in Runtime.TenantFuel.
	Tenant string
	// Chain is the guest operators of the task in chain order: records go
	// into Chain[0], and Chain[len-1]'s output reaches Emit. Host connectors
	// are not part of it.
	Chain []jobgraph.Vertex
	// Subtask of Parallelism; MaxParallelism is the job's number of key
	// groups (0 means jobgraph.DefaultMaxParallelism).
	Subtask, Parallelism, MaxParallelism int
	Args                                 []string
	// Emit receives each batch the chain's tail emits, synchronously during
	// the call that produced it. The records alias guest memory and are
	// valid only until Emit returns: copy what you keep. An error fails the
	// call (and the instance). Nil when the tail is a guest sink.
	Emit func(recs []abi.Record) error
	// EmitWatermark receives a guest source's watermarks (watermark_emit),
	// synchronously during the poll, after the records emitted before it.
	// An error fails the call. Nil when the source does not declare the
	// "guest" strategy: the import then traps.
	EmitWatermark func(ts int64) error
	// Logger gets the guest's output with the runtime's logger as fallback.
	Logger *slog.Logger
	Limits Limits
	// State is the task's host-managed keyed and operator state, for example
	// one restored from a checkpoint. Nil means a fresh, empty State.
	State *State
}
