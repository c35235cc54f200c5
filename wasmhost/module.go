package wasmhost

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"

	"github.com/bytedance/sonic"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/wasmhost/internal/fuelshare"
	"github.com/sluicehq/sluice/wasmhost/internal/rewrite"
)

// Module is a validated, compiled guest module. It is safe for concurrent
// use: every Plan and Instantiate makes a fresh instance.
type Module struct {
	rt        *Runtime
	digest    string
	compiled  wazero.CompiledModule
	hasInit   bool
	minMemory uint64
	size      int64
}

// codeBytesPerWasmByte is how many bytes of memory a compiled module takes
// per byte of its instrumented wasm: machine code and its tables. Measured
// with wazero's compile cache files, which hold them: about 5 for the C
// test guest local/testdata/marker (9.7 KB instrumented, 49 KB of file);
// rounded up.
const codeBytesPerWasmByte = 6

func estimateSize(wasmBytes int) int64 { return int64(wasmBytes) * codeBytesPerWasmByte }

// SizeBytes estimates the memory the compiled module holds (machine code
// and tables, not its instances' memories): wazero does not report it, so
// it is a measured multiple of the module's size (codeBytesPerWasmByte).
func (m *Module) SizeBytes() int64 { return m.size }

// Digest returns the module's content address, "sha256-<hex>".
func (m *Module) Digest() string { return m.digest }

// maxPlanBytes bounds the job graph JSON a guest may hand over.
const maxPlanBytes = 4 << 20

// Plan runs the module's plan export with args in a fresh sandboxed
// instance and returns the job graph it declares. The graph is not
// validated; see jobgraph.Validate.
//
// # Errors
//
// A *GuestError when the guest traps, exits, runs out of time or memory or
// reports an error (e.g. misuse of the SDK); an error when it returns
// without declaring a graph or the graph is not JSON.
func (m *Module) Plan(ctx context.Context, args []string, lim Limits) (*jobgraph.Graph, error) {
	in, err := m.instantiate(ctx, instanceSetup{lim: lim, seed: "plan", logger: m.rt.logger})
	if err != nil {
		return nil, err
	}
	defer in.Close(ctx)
	in.planning = true
	recs := make([]abi.Record, len(args))
	for i, a := range args {
		recs[i].Value = []byte(a)
	}
	if err := in.callBatch(ctx, abi.ExportPlan, in.fns.plan, recs); err != nil {
		return nil, err
	}
	if in.plan == nil {
		return nil, fmt.Errorf("plan: %s returned without calling %s.%s", abi.ExportPlan, abi.HostModule, abi.ImportSetPlan)
	}
	var g jobgraph.Graph
	if err := sonic.ConfigStd.Unmarshal(in.plan, &g); err != nil {
		return nil, fmt.Errorf("plan: the graph the guest declared is not valid JSON: %w", err)
	}
	return &g, nil
}

// Instantiate creates the instance that runs one task: a fresh sandbox with
// the module's memory, the task's limits and State. Call Open next.
//
// # Errors
//
// An invalid TaskConfig, a module whose initial memory exceeds the task's
// cap (ErrMemoryLimit), or a *GuestError from the guest's initialization.
func (m *Module) Instantiate(ctx context.Context, cfg TaskConfig) (*Instance, error) {
	if len(cfg.Chain) == 0 {
		return nil, errors.New("instantiate: empty chain")
	}
	if cfg.Parallelism < 1 || cfg.Subtask < 0 || cfg.Subtask >= cfg.Parallelism {
		return nil, fmt.Errorf("instantiate: subtask %d of parallelism %d", cfg.Subtask, cfg.Parallelism)
	}
	if cfg.MaxParallelism == 0 {
		cfg.MaxParallelism = jobgraph.DefaultMaxParallelism
	}
	if cfg.MaxParallelism < cfg.Parallelism {
		return nil, fmt.Errorf("instantiate: parallelism %d above max parallelism %d", cfg.Parallelism, cfg.MaxParallelism)
	}
	kinds := make(map[uint32]jobgraph.Kind, len(cfg.Chain))
	for _, v := range cfg.Chain {
		if v.Connector != "" {
			return nil, fmt.Errorf("instantiate: vertex %d %q is host connector %q; the chain holds guest operators only", v.ID, v.Name, v.Connector)
		}
		if v.ID < 0 || v.ID > 1<<31-1 {
			return nil, fmt.Errorf("instantiate: vertex id %d out of range", v.ID)
		}
		kinds[uint32(v.ID)] = v.Kind
	}
	start, end := keygroup.Range(cfg.Subtask, cfg.Parallelism, cfg.MaxParallelism)
	st := cfg.State
	if st == nil {
		st = NewState(cfg.MaxParallelism, start, end)
	} else if mp, s, e := st.KeyGroups(); mp != cfg.MaxParallelism || s != start || e != end {
		return nil, fmt.Errorf("instantiate: state holds key groups %d..%d of %d, subtask %d of %d needs %d..%d of %d",
			s, e, mp, cfg.Subtask, cfg.Parallelism, start, end, cfg.MaxParallelism)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = m.rt.logger
	}
	in, err := m.instantiate(ctx, instanceSetup{
		lim: cfg.Limits, logger: logger, tenant: cfg.Tenant,
		seed: fmt.Sprintf("%s\x00%s\x00%d", cfg.JobID, cfg.TaskName, cfg.Subtask),
	})
	if err != nil {
		return nil, err
	}
	in.cfg = cfg
	in.state = st
	in.kinds = kinds
	in.keyGroupStart, in.keyGroupEnd = start, end
	return in, nil
}

type instanceSetup struct {
	lim    Limits
	logger *slog.Logger
	seed   string
	tenant string // whose share the instance's fuel counts against
}

func (m *Module) instantiate(ctx context.Context, s instanceSetup) (*Instance, error) {
	lim := s.lim.withDefaults()
	if max := uint64(m.rt.maxPages) * pageSize; lim.MemoryLimitBytes > max {
		lim.MemoryLimitBytes = max
	}
	if m.minMemory > lim.MemoryLimitBytes {
		return nil, &GuestError{Digest: m.digest, Function: "(instantiate)", Cause: ErrMemoryLimit,
			Message: fmt.Sprintf("the module needs %d bytes of memory at start, above the cap of %d", m.minMemory, lim.MemoryLimitBytes)}
	}
	logger := s.logger.With("module", shortDigest(m.digest))
	in := &Instance{
		m: m, lim: lim, logger: logger, cfg: TaskConfig{Tenant: s.tenant},
		alloc:     &cappedAllocator{limit: lim.MemoryLimitBytes},
		logs:      &logSink{logger: logger, budget: lim.MaxLogBytes},
		counts:    make(map[string]int64),
		watermark: math.MinInt64,
	}
	in.stdout = &streamWriter{s: in.logs, stream: "stdout", level: slog.LevelInfo}
	in.stderr = &streamWriter{s: in.logs, stream: "stderr", level: slog.LevelWarn, keep: true}

	// Randomness is deterministic per task (seeded from the module and the
	// task), so a replayed task sees the same random bytes.
	seed := sha256.Sum256([]byte(m.digest + "\x00" + s.seed))
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(in.stdout).
		WithStderr(in.stderr).
		WithRandSource(rand.NewChaCha8(seed))
	if lim.GrantClock {
		mc = mc.WithSysWalltime().WithSysNanotime()
	}
	// No guest code runs here: modules with a start function are refused,
	// and _initialize is called below under the call deadline.
	ictx := experimental.WithMemoryAllocator(context.WithValue(ctx, instKey{}, in), in.alloc)
	mod, err := m.rt.r.InstantiateModule(ictx, m.compiled, mc)
	if err != nil {
		in.failed = in.classify(ctx, "(instantiate)", err, false, false)
		in.alloc.release()
		in.logs.close()
		return nil, in.failed
	}
	in.mod = mod
	in.mem = mod.Memory()
	stop, ok := mod.ExportedGlobal(rewrite.InterruptExport).(api.MutableGlobal)
	if !ok {
		in.Close(ctx)
		return nil, fmt.Errorf("instantiate: the instrumented module lacks %q (a bug)", rewrite.InterruptExport)
	}
	in.deadline.stop = stop
	in.fuelLeft, in.fuelTrips = mod.ExportedGlobal(rewrite.FuelExport), mod.ExportedGlobal(rewrite.FuelTripsExport)
	if g, ok := in.fuelLeft.(api.MutableGlobal); ok && !m.rt.noTickListener {
		// Without the trip listener (a benchmark's runtime) nobody sees the
		// trips: measure reads the globals instead, and nothing is shared.
		in.meter.global = g
	}
	in.meter.share = fuelshare.Share{Weight: lim.CPUWeight, FuelPerSecond: lim.FuelPerSecond}
	in.meter.callLimit = lim.CallFuel
	in.measure()
	f := mod.ExportedFunction
	in.fns.alloc, in.fns.free = f(abi.ExportAlloc), f(abi.ExportFree)
	in.fns.plan, in.fns.open, in.fns.process = f(abi.ExportPlan), f(abi.ExportOpen), f(abi.ExportProcess)
	in.fns.sourcePoll, in.fns.endInput = f(abi.ExportSourcePoll), f(abi.ExportEndInput)
	in.fns.barrier, in.fns.timers, in.fns.close = f(abi.ExportBarrier), f(abi.ExportTimers), f(abi.ExportClose)
	in.fns.eventTimers, in.fns.watermark = f(abi.ExportEventTimers), f(abi.ExportWatermark)
	if m.hasInit {
		if _, err := in.call(ctx, abi.ExportInitialize, f(abi.ExportInitialize), in.stack[:0]); err != nil {
			in.Close(ctx)
			return nil, err
		}
	}
	return in, nil
}

// le32 reads a little-endian u32.
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
