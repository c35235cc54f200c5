package wasmhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/sluicehq/sluice/internal/abi"
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
	hostFuncs map[string]api.FunctionDefinition
	maxPages  uint32
	logger    *slog.Logger

	mu       sync.Mutex
	modules  map[string]*Module
	inflight map[string]*compileCall
	closed   bool
}

type compileCall struct {
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
		modules: make(map[string]*Module), inflight: make(map[string]*compileCall),
		hostFuncs: make(map[string]api.FunctionDefinition),
		logger:    cfg.logger,
	}
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

// Close closes every instance and compiled module of the runtime.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	rt.closed = true
	rt.modules = map[string]*Module{}
	rt.mu.Unlock()
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

// Compile validates and compiles a module, or returns the one compiled
// before from the same bytes. Machine code is also kept in the on-disk cache
// when the runtime has one.
//
// # Errors
//
// ErrInvalidModule, with a message that names the problem, when wasm is not
// WebAssembly, does not declare sluice_abi_v1, lacks an export of the ABI or
// has one with the wrong signature, or imports anything but the host
// functions of the ABI and the allowed WASI subset (docs/ABI.md).
func (rt *Runtime) Compile(ctx context.Context, wasm []byte) (*Module, error) {
	if err := rt.precheck(wasm); err != nil {
		return nil, err
	}
	digest := digest(wasm)
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil, errors.New("wasmhost: runtime closed")
	}
	if m, ok := rt.modules[digest]; ok {
		rt.mu.Unlock()
		return m, nil
	}
	if c, ok := rt.inflight[digest]; ok {
		rt.mu.Unlock()
		select {
		case <-c.done:
			return c.m, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &compileCall{done: make(chan struct{})}
	rt.inflight[digest] = c
	rt.mu.Unlock()

	c.m, c.err = rt.compile(ctx, wasm, digest)

	rt.mu.Lock()
	delete(rt.inflight, digest)
	if c.err == nil && !rt.closed {
		rt.modules[digest] = c.m
	}
	rt.mu.Unlock()
	close(c.done)
	return c.m, c.err
}

// check validates wasm as Compile does without keeping the result.
func (rt *Runtime) check(ctx context.Context, wasm []byte) error {
	if err := rt.precheck(wasm); err != nil {
		return err
	}
	rt.mu.Lock()
	_, ok := rt.modules[digest(wasm)]
	rt.mu.Unlock()
	if ok {
		return nil
	}
	m, err := rt.compile(ctx, wasm, "")
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

func (rt *Runtime) compile(ctx context.Context, wasm []byte, digest string) (*Module, error) {
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
	if err := validate.Structure(wasm); err != nil {
		// Not safe to hand to wazero's decoder.
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	inst, err := rewrite.Instrument(wasm, validate.MaxTableElements)
	if err != nil {
		return nil, original(err)
	}
	cm, err := rt.r.CompileModule(ctx, inst)
	if err != nil {
		return nil, original(err)
	}
	if err := validate.ABI(wasm, cm, rt.hostFuncs, rt.maxPages); err != nil {
		cm.Close(ctx)
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	m := &Module{rt: rt, digest: digest, compiled: cm}
	exports := cm.ExportedFunctions()
	_, m.hasInit = exports[abi.ExportInitialize]
	m.minMemory = uint64(cm.ExportedMemories()[abi.ExportMemory].Min()) * pageSize
	return m, nil
}
