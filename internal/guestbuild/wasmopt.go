package guestbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// WasmOptDebianPackages is the Debian package that gives wasm-opt (Binaryen).
// Error messages name it; `go run ./internal/check` installs it.
const WasmOptDebianPackages = "binaryen"

// RequireWasmOptEnv is the environment variable [WasmOptRequired] reads.
const RequireWasmOptEnv = "SLUICE_REQUIRE_WASM_OPT"

// ErrNoWasmOpt is wrapped by the errors of [WasmOptToolchain], and of
// [BuildWith] with a wasm-opt level, when wasm-opt is missing or cannot
// optimize a module. A module wasm-opt rejects does not wrap it.
var ErrNoWasmOpt = errors.New("no wasm-opt")

// DefaultWasmOptLevel is the level `--wasm-opt` without a level means: the
// one that made the Go word count fastest, with the smallest module
// (BENCHMARKS.md, "The Go word count through wasm-opt").
const DefaultWasmOptLevel = "Os"

// WasmOptLevels are the optimization levels [Options.WasmOpt] takes, in
// wasm-opt's spelling without the dash.
func WasmOptLevels() []string { return []string{"O1", "O2", "O3", "O4", "Os", "Oz"} }

// wasmOptFlags are the flags of every wasm-opt run besides the level; they
// are part of the hash. Go's modules carry no target_features section, so
// the features Go emits (sign extension, bulk memory, saturating
// float-to-int, mutable globals) are named, or wasm-opt rejects the module
// as invalid MVP code. -g keeps the name section, from which the host prints
// a trapping guest's stack trace with Go function names.
var wasmOptFlags = []string{
	"--enable-sign-ext", "--enable-bulk-memory", "--enable-nontrapping-float-to-int", "--enable-mutable-globals",
	"-g",
}

// WasmOptRequired reports whether the environment variable
// SLUICE_REQUIRE_WASM_OPT is "1". Tests that need wasm-opt skip when
// [WasmOptToolchain] fails, unless WasmOptRequired, when they fail instead:
// `go run ./internal/check` sets it once it has made sure wasm-opt works.
func WasmOptRequired() bool { return os.Getenv(RequireWasmOptEnv) == "1" }

// WasmOptToolchain reports whether wasm-opt can optimize a module, by
// optimizing an empty one in a temporary directory and removing it.
//
// # Errors
//
// The error wraps [ErrNoWasmOpt] and names [WasmOptDebianPackages]; it
// holds wasm-opt's output when wasm-opt is on PATH but fails.
func WasmOptToolchain(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "sluice-wasmoptprobe-")
	if err != nil {
		return fmt.Errorf("check wasm-opt: %w", err)
	}
	defer os.RemoveAll(tmp)
	in, out := filepath.Join(tmp, "in.wasm"), filepath.Join(tmp, "out.wasm")
	if err := os.WriteFile(in, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		return fmt.Errorf("check wasm-opt: %w", err)
	}
	if err := runWasmOpt(ctx, "O1", in, out); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("check wasm-opt: %w", ctxErr)
		}
		return wasmOptError(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return fmt.Errorf("check wasm-opt: %w", err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return fmt.Errorf("%w: wasm-opt did not write a wasm module; install the Debian package %s", ErrNoWasmOpt, WasmOptDebianPackages)
	}
	return nil
}

// checkWasmOptLevel says what to pass when level is not one of
// [WasmOptLevels].
func checkWasmOptLevel(level string) error {
	if slices.Contains(WasmOptLevels(), level) {
		return nil
	}
	return fmt.Errorf("wasm-opt level %q: want one of %s", level, strings.Join(WasmOptLevels(), ", "))
}

// wasmOpt optimizes the module at in at level into the cache, keyed by
// sum (the unoptimized module's inputs), wasm-opt's version, the level
// and the flags, and returns the optimized module's path.
func wasmOpt(ctx context.Context, dir, in, cache, sum, level string) (string, error) {
	ver, err := wasmOptCmd(ctx, "--version")
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", fmt.Errorf("optimize guest %s: %w", dir, ctxErr)
		}
		return "", fmt.Errorf("optimize guest %s: %w", dir, wasmOptError(err))
	}
	h := sha256.New()
	fmt.Fprintf(h, "wasm-opt\nmodule %s\nversion %d\n", sum, len(ver))
	h.Write(ver)
	fmt.Fprintf(h, "level %s\nflags %q\n", level, wasmOptFlags)
	optSum := hex.EncodeToString(h.Sum(nil))[:32]
	return cached(cache, optSum, func(tmp string) error {
		err := runWasmOpt(ctx, level, in, tmp)
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("optimize guest %s: %w", dir, ctxErr)
		}
		if tcErr := WasmOptToolchain(ctx); tcErr != nil {
			return fmt.Errorf("optimize guest %s: %w", dir, tcErr)
		}
		return fmt.Errorf("optimize guest %s: %w", dir, err)
	})
}

func runWasmOpt(ctx context.Context, level, in, out string) error {
	args := append(append([]string{}, wasmOptFlags...), "-"+level, in, "-o", out)
	_, err := wasmOptCmd(ctx, args...)
	return err
}

// wasmOptCmd runs wasm-opt and returns its standard output; see toolCmd.
func wasmOptCmd(ctx context.Context, args ...string) ([]byte, error) {
	return toolCmd(ctx, "", "wasm-opt", args...)
}

// wasmOptError turns a failed wasm-opt run into an error that says what to
// install, keeping wasm-opt's output when it ran.
func wasmOptError(err error) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%w: wasm-opt is not on PATH; install the Debian package %s, or build without --wasm-opt", ErrNoWasmOpt, WasmOptDebianPackages)
	}
	return fmt.Errorf("%w: wasm-opt cannot optimize a module; install the Debian package %s, or build without --wasm-opt\n%v", ErrNoWasmOpt, WasmOptDebianPackages, err)
}
