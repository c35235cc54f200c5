package wasmhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/admit"
	"github.com/sluicehq/sluice/wasmhost/internal/rewrite"
	"github.com/sluicehq/sluice/wasmhost/internal/validate"
	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

const pageSize = 65536

// Runtime compiles and runs guest modules. Create one per process and share
// it: it holds one wazero runtime (the compiler engine where the platform has
// one), the host modules of the ABI, and the compiled modules by digest.
//
// Every instance lives in this one wazero runtime as an anonymous module, so
// instances never clash by name, and each gets its own memory cap through
// its own allocator (see Limits).
type Runtime struct {
	cfg       RuntimeConfig
	r         wazero.Runtime
	cache     wazero.CompilationCache
	disk      *diskCache // bounds cfg.cacheDir; nil without one
	hostFuncs map[string]api.FunctionDefinition
	maxPages  uint32
	logger    *slog.Logger

	// gate bounds concurrent compiles, per owner (tenant) and in all. A
	// place is held until wazero returns, also after the caller gave up.
	gate *admit.Gate
	// stop ends compiles still running when the runtime closes; wg waits
	// for them.
	stop     context.Context
	stopFunc context.CancelFunc
	wg       sync.WaitGroup

	mu sync.Mutex
	// modules finds every compiled module still reachable by digest; a
	// module nobody holds is closed by the cleanup of its Module. recent
	// holds the last cfg.cachedModules compiled or used, so they stay.
	modules  map[string]weak.Pointer[Module]
	recent   []*Module
	inflight map[string]*compileCall
	closed   bool

	// fuel shares the CPU among tenants at the guests' fuel trips (fuel.go).
	fuel *fuelGate

	// sampling counts the stack samples in progress, so the $tick listener
	// of every instance returns at once while there are none (stacks.go).
	sampling atomic.Int32
	// noTickListener compiles modules without the $tick listener: only
	// the benchmark that measures the listener's cost sets it.
	noTickListener bool
}

type compileCall struct {
	ctx  context.Context // ends at the timeout, with its starter or when the runtime closes
	done chan struct{}
	m    *Module
	err  error
}

// NewRuntime starts a runtime with cfg.
//
// # Errors
//
// The on-disk cache directory cannot be created, or the host modules fail to
// instantiate (a bug).
func NewRuntime(ctx context.Context, cfg RuntimeConfig) (*Runtime, error) {
	def := NewRuntimeConfig()
	if cfg.maxMemoryBytes == 0 {
		cfg.maxMemoryBytes = def.maxMemoryBytes
	}
	if cfg.maxModuleBytes == 0 {
		cfg.maxModuleBytes = def.maxModuleBytes
	}
	cfg = cfg.withCompileDefaults(def)
	pages := cfg.maxMemoryBytes / pageSize
	if pages > 65536 {
		pages = 65536
	}
	if pages < 1 {
		return nil, fmt.Errorf("wasmhost: max memory %d bytes is less than one page", cfg.maxMemoryBytes)
	}
	// No WithCloseOnContextDone: call deadlines use the interrupt global
	// the host adds to every module (deadline.go), which is much cheaper.
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(pages)).
		WithCoreFeatures(api.CoreFeaturesV2)
	rt := &Runtime{
		cfg: cfg, maxPages: uint32(pages),
		modules: make(map[string]weak.Pointer[Module]), inflight: make(map[string]*compileCall),
		hostFuncs: make(map[string]api.FunctionDefinition),
		logger:    cfg.logger,
		fuel:      newFuelGate(cfg.noFuelShares),
		gate:      admit.New(cfg.compileGlobal, cfg.compilePerOwner, cfg.compileQueue),
	}
	rt.stop, rt.stopFunc = context.WithCancel(context.WithoutCancel(ctx))
	if rt.logger == nil {
		rt.logger = discardLogger()
	}
	if cfg.cacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasmhost: compilation cache %s: %w", cfg.cacheDir, err)
		}
		rt.cache = c
		rc = rc.WithCompilationCache(c)
		rt.disk = newDiskCache(cfg.cacheDir, cfg.cacheDirBudget)
		rt.disk.sweep("") // a restart with a smaller budget trims at once
	}
	rt.r = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt.r); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasmhost: instantiate WASI: %w", err)
	}
	host, err := hostModule(rt.r).Instantiate(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasmhost: instantiate host module: %w", err)
	}
	for name, d := range host.ExportedFunctionDefinitions() {
		rt.hostFuncs[abi.HostModule+"."+name] = d
	}
	for name, d := range rt.r.Module(abi.WASIModule).ExportedFunctionDefinitions() {
		rt.hostFuncs[abi.WASIModule+"."+name] = d
	}
	return rt, nil
}

// Close closes every instance and compiled module of the runtime. Compiles
// in progress are canceled, and Close waits for them.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	rt.closed = true
	rt.modules = map[string]weak.Pointer[Module]{}
	rt.recent = nil
	rt.mu.Unlock()
	if rt.stopFunc != nil {
		rt.stopFunc()
	}
	rt.wg.Wait()
	var err error
	if rt.r != nil {
		err = rt.r.Close(ctx)
	}
	if rt.cache != nil {
		err = errors.Join(err, rt.cache.Close(ctx))
	}
	return err
}

// digest returns the content address of a module: "sha256-<hex>".
func digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256-" + hex.EncodeToString(sum[:])
}

// Compile is CompileFor with no owner: the compile shares the places of
// the runtime's compile gate with every other caller without an owner.
//
// # Errors
//
// As CompileFor's.
func (rt *Runtime) Compile(ctx context.Context, wasm []byte) (*Module, error) {
	return rt.CompileFor(ctx, "", wasm)
}

// CompileFor validates and compiles a module on behalf of owner (a tenant),
// or returns the one compiled before from the same bytes. Machine code is
// also kept in the on-disk cache when the runtime has one.
//
// The module is first checked against the host's structural limits
// (docs/SECURITY.md, "Module limits"), in one pass before anything else
// reads it, then instrumented and compiled by wazero under the runtime's
// compile timeout. At most the runtime's compile concurrency of compiles
// run at once, and fewer for one owner: a caller beyond them waits, or is
// refused with ErrBusy when too many of its owner already wait. CompileFor
// returns when ctx ends or the timeout passes, without waiting for wazero;
// the compile stops at the next function it would compile, and its place
// is given back then.
//
// # Errors
//
//   - ErrInvalidModule, with a message that names the problem, when wasm is
//     not WebAssembly, is above a structural limit (naming the limit, the
//     value found and the function), takes longer than the compile timeout,
//     does not declare sluice_abi_v1, lacks an export of the ABI or has one
//     with the wrong signature, or imports anything but the host functions
//     of the ABI and the allowed WASI subset (docs/ABI.md).
//   - ErrBusy when owner has too many compiles running and waiting.
//   - ctx's error when it ends first.
func (rt *Runtime) CompileFor(ctx context.Context, owner string, wasm []byte) (*Module, error) {
	if err := rt.precheck(wasm); err != nil {
		return nil, err
	}
	digest := digest(wasm)
	for {
		m, c, err := rt.cached(digest)
		if m != nil || err != nil {
			return m, err
		}
		if c == nil {
			// The structural check first, outside the gate: it is one cheap
			// pass, so a module above the limits never takes a compile place.
			if err := rt.structure(ctx, wasm); err != nil {
				return nil, err
			}
			release, err := rt.gate.Acquire(ctx, owner)
			if err != nil {
				if errors.Is(err, admit.ErrBusy) {
					return nil, fmt.Errorf("%w (%v); retry when one ends", ErrBusy, err)
				}
				return nil, err
			}
			if c, err = rt.startCompile(ctx, wasm, digest, release); err != nil {
				return nil, err
			}
			if c == nil {
				continue // compiled or started by another caller meanwhile
			}
		}
		select {
		case <-c.done:
			if c.err != nil && isCtxErr(c.err) && ctx.Err() == nil {
				continue // its starter gave up: compile it ourselves
			}
			return c.m, c.err
		case <-c.ctx.Done():
			// Return at the timeout without waiting for wazero to stop.
			if errors.Is(context.Cause(c.ctx), errCompileTimeout) {
				return nil, rt.timeoutErr()
			}
			select {
			case <-c.done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

var errCompileTimeout = errors.New("compile timeout")

func (rt *Runtime) timeoutErr() error {
	return fmt.Errorf("%w: compiling took longer than the host's limit of %s (the compile timeout); the module is too big or too deeply nested to compile in time: see docs/SECURITY.md, \"Module limits\"", ErrInvalidModule, rt.cfg.compileTimeout)
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// cached returns the compiled module of digest or the compile of it in
// progress, or neither.
func (rt *Runtime) cached(digest string) (*Module, *compileCall, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil, nil, errors.New("wasmhost: runtime closed")
	}
	if m := rt.modules[digest].Value(); m != nil {
		rt.touchLocked(m)
		return m, nil, nil
	}
	return nil, rt.inflight[digest], nil
}

// Forget drops digest from the modules the runtime keeps after their last
// use, so its machine code is freed once nobody holds the module (a task
// running it keeps it). The TaskManager's module cache calls it when it
// evicts a module, so the runtime keeps nothing beyond that cache's budget.
func (rt *Runtime) Forget(digest string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.recent = slices.DeleteFunc(rt.recent, func(m *Module) bool { return m.digest == digest })
}

// touchLocked makes m the most recently used module.
func (rt *Runtime) touchLocked(m *Module) {
	for i, o := range rt.recent {
		if o == m {
			rt.recent = append(rt.recent[:i], rt.recent[i+1:]...)
			break
		}
	}
	rt.recent = append(rt.recent, m)
	if len(rt.recent) > rt.cfg.cachedModules {
		rt.recent = append(rt.recent[:0], rt.recent[len(rt.recent)-rt.cfg.cachedModules:]...)
	}
}

// startCompile compiles wasm in a goroutine holding the gate place release
// gives back. It returns nil, and gives the place back, when the module
// was compiled or its compile started by another caller while this one
// waited for the gate.
func (rt *Runtime) startCompile(ctx context.Context, wasm []byte, digest string, release func()) (*compileCall, error) {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		release()
		return nil, errors.New("wasmhost: runtime closed")
	}
	if rt.modules[digest].Value() != nil || rt.inflight[digest] != nil {
		rt.mu.Unlock()
		release()
		return nil, nil
	}
	cctx, cancel := context.WithCancelCause(rt.stop)
	timer := time.AfterFunc(rt.cfg.compileTimeout, func() { cancel(errCompileTimeout) })
	stopWithCaller := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	c := &compileCall{done: make(chan struct{}), ctx: cctx}
	rt.inflight[digest] = c
	rt.wg.Add(1)
	rt.mu.Unlock()

	go func() {
		defer rt.wg.Done()
		defer release()
		m, err := rt.compile(cctx, wasm, digest, true)
		timer.Stop()
		stopWithCaller()
		if rt.disk != nil {
			rt.disk.sweep(digest)
		}
		if err != nil && errors.Is(context.Cause(cctx), errCompileTimeout) {
			err = rt.timeoutErr()
		}
		rt.mu.Lock()
		delete(rt.inflight, digest)
		if err == nil && !rt.closed {
			rt.modules[digest] = weak.Make(m)
			rt.touchLocked(m)
		}
		c.m, c.err = m, err
		close(c.done)
		rt.mu.Unlock()
		cancel(nil)
	}()
	return c, nil
}

// check validates wasm as Compile does without keeping the result.
func (rt *Runtime) check(ctx context.Context, wasm []byte) error {
	if err := rt.precheck(wasm); err != nil {
		return err
	}
	rt.mu.Lock()
	ok := rt.modules[digest(wasm)].Value() != nil
	rt.mu.Unlock()
	if ok {
		return nil
	}
	m, err := rt.compile(ctx, wasm, "", false)
	if err != nil {
		return err
	}
	return m.compiled.Close(ctx)
}

func (rt *Runtime) precheck(wasm []byte) error {
	if rt.cfg.maxModuleBytes > 0 && len(wasm) > rt.cfg.maxModuleBytes {
		return fmt.Errorf("%w: %d bytes, above the limit of %d", ErrInvalidModule, len(wasm), rt.cfg.maxModuleBytes)
	}
	if err := wasmbin.CheckHeader(wasm); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	return nil
}

// structure checks wasm against the runtime's structural limits.
func (rt *Runtime) structure(ctx context.Context, wasm []byte) error {
	if _, err := validate.Structure(ctx, wasm, rt.cfg.limits); err != nil {
		if isCtxErr(err) {
			return err
		}
		// Not safe to hand to wazero's decoder, or too big to compile.
		return fmt.Errorf("%w: %w", ErrInvalidModule, err)
	}
	return nil
}

// compile validates, instruments and compiles wasm; checked says the
// structural check already passed.
func (rt *Runtime) compile(ctx context.Context, wasm []byte, digest string, checked bool) (*Module, error) {
	// wazero's message about the module as the guest wrote it, for when the
	// instrumented one does not compile.
	original := func(fallback error) error {
		if cm, err := rt.r.CompileModule(ctx, wasm); err != nil {
			fallback = err
		} else {
			cm.Close(ctx)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrInvalidModule, fallback)
	}
	if !checked {
		if err := rt.structure(ctx, wasm); err != nil {
			return nil, err
		}
	}
	inst, err := rewrite.Instrument(wasm, validate.MaxTableElements)
	if err != nil {
		return nil, original(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// With two or more workers wazero checks ctx between functions, so a
	// canceled or timed-out compile stops within one function's compile;
	// with one it would run to the end.
	cctx := experimental.WithCompilationWorkers(ctx, rt.cfg.compileWorkers)
	if !rt.noTickListener {
		cctx = experimental.WithFunctionListenerFactory(cctx, rt.listenerFactory())
	}
	cm, err := rt.r.CompileModule(cctx, inst)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, original(err)
	}
	if err := validate.ABI(wasm, cm, rt.hostFuncs, rt.maxPages); err != nil {
		cm.Close(ctx)
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	m := &Module{rt: rt, digest: digest, compiled: cm, size: estimateSize(len(inst))}
	exports := cm.ExportedFunctions()
	_, m.hasInit = exports[abi.ExportInitialize]
	m.minMemory = uint64(cm.ExportedMemories()[abi.ExportMemory].Min()) * pageSize
	if digest != "" {
		// Once no cache, task or caller holds m, its machine code goes.
		// The runtime's Close closes whatever is left.
		runtime.AddCleanup(m, func(cm wazero.CompiledModule) { cm.Close(context.Background()) }, cm)
	}
	return m, nil
}
