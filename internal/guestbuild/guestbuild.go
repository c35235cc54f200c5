package guestbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// CDebianPackages are the Debian packages that give clang a wasm32-wasi
// target: the compiler, the wasm linker, the C library and the compiler
// runtime. Error messages name them; `go run ./internal/check` installs them.
const CDebianPackages = "clang lld wasi-libc libclang-rt-14-dev-wasm32"

// RequireCEnv is the environment variable [CRequired] reads.
const RequireCEnv = "SLUICE_REQUIRE_CLANG"

// ErrNoCToolchain is wrapped by the errors of [CToolchain], and of [Build]
// for a C guest, when clang is missing or cannot build a wasm32-wasi
// reactor. A C guest that merely fails to compile does not wrap it.
var ErrNoCToolchain = errors.New("no C toolchain for wasm32-wasi")

// clangFlags are the flags of every C guest build; they are part of the
// hash. Clang runs in the guest directory, so "-I ." finds its headers and
// nothing in the command depends on where the directory is.
var clangFlags = []string{"--target=wasm32-wasi", "-O2", "-mexec-model=reactor", "-I", "."}

// Build compiles the guest in dir to a reactor module and returns the path
// of the .wasm file in the cache directory (<user cache>/sluice/guests, or
// the temp directory when there is none). A directory with a Cargo.toml is
// built as a Rust crate; one with an asconfig.json as an AssemblyScript
// guest (see assemblyscript.go); one with .go files (tests aside) as a Go
// main package; one with .c files and no .go files but tests as a C guest.
//
// # Errors
//
// The go command's or clang's output is part of the error when the build
// fails. A directory that is none of these is an error. For a C
// guest, the error wraps [ErrNoCToolchain] and names the packages to install
// when clang is missing or cannot target wasm32-wasi.
func Build(ctx context.Context, dir string) (wasmPath string, err error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	return BuildTo(ctx, dir, cache)
}

// BuildTo is Build with an explicit cache directory.
func BuildTo(ctx context.Context, dir, cache string) (string, error) {
	return BuildWith(ctx, dir, Options{Cache: cache})
}

// Options are the settings of [BuildWith]; the zero value is [Build]'s.
type Options struct {
	// Cache is the cache directory; "" is Build's.
	Cache string
	// WasmOpt, when not "", is a level of [WasmOptLevels] at which
	// Binaryen's wasm-opt optimizes a Go guest after go build. The
	// optimized module is cached beside the plain one, keyed by the plain
	// one's inputs, wasm-opt's version, the level and the flags.
	WasmOpt string
}

// BuildWith is Build with options.
//
// # Errors
//
// Those of Build; and with o.WasmOpt, an error for a level not in
// [WasmOptLevels] or a guest that is not Go, one that wraps [ErrNoWasmOpt]
// and names the package to install when wasm-opt is missing or broken, and
// wasm-opt's output when it rejects the module.
func BuildWith(ctx context.Context, dir string, o Options) (string, error) {
	cache := o.Cache
	if cache == "" {
		var err error
		if cache, err = cacheDir(); err != nil {
			return "", err
		}
	}
	if o.WasmOpt != "" {
		if err := checkWasmOptLevel(o.WasmOpt); err != nil {
			return "", fmt.Errorf("build guest %s: %w", dir, err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	} else if !st.IsDir() {
		return "", fmt.Errorf("build guest: %s is not a directory", dir)
	}
	// clang, rustc and asc optimize already; only Go's compiler leaves
	// work that wasm-opt finds (docs/RATIONALE.md).
	notGo := func(lang string) error {
		return fmt.Errorf("build guest %s: wasm-opt runs only over Go guests, and this is a %s guest: build it without --wasm-opt", dir, lang)
	}
	if isRustGuest(abs) {
		if o.WasmOpt != "" {
			return "", notGo("Rust")
		}
		return buildRust(ctx, dir, abs, cache)
	}
	if isAssemblyScript(abs) {
		if o.WasmOpt != "" {
			return "", notGo("AssemblyScript")
		}
		return buildAS(ctx, dir, abs, cache)
	}
	src, err := listSources(abs)
	if err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	}
	switch {
	case src.hasGo:
		return buildGo(ctx, dir, abs, cache, o.WasmOpt)
	case len(src.c) > 0:
		if o.WasmOpt != "" {
			return "", notGo("C")
		}
		return buildC(ctx, dir, abs, cache, src)
	default:
		return "", fmt.Errorf("build guest %s: the directory has no .go or .c files, no Cargo.toml and no %s; a guest is a Go main package, C sources, a Rust crate or an AssemblyScript project", dir, ASConfigFile)
	}
}

// CToolchain reports whether clang can build a wasm32-wasi reactor, by
// building a small C file that uses the C library in a temporary directory
// and removing it.
//
// # Errors
//
// The error wraps [ErrNoCToolchain] and names [CDebianPackages]; it holds
// clang's output when clang is on PATH but the build fails.
func CToolchain(ctx context.Context) error {
	const probe = `#include <stdlib.h>
#include <string.h>

__attribute__((export_name("probe"))) char *probe(unsigned n) {
	char *p = malloc(n);
	if (p) memset(p, 0, n);
	return p;
}
`
	tmp, err := os.MkdirTemp("", "sluice-cprobe-")
	if err != nil {
		return fmt.Errorf("check C toolchain: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "probe.c"), []byte(probe), 0o644); err != nil {
		return fmt.Errorf("check C toolchain: %w", err)
	}
	out := filepath.Join(tmp, "probe.wasm")
	args := append(append([]string{}, clangFlags...), "-o", out, "probe.c")
	if _, err := clangCmd(ctx, tmp, args...); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("check C toolchain: %w", ctxErr)
		}
		return toolchainError(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return fmt.Errorf("check C toolchain: %w", err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return fmt.Errorf("%w: clang did not write a wasm module; install the Debian packages %s", ErrNoCToolchain, CDebianPackages)
	}
	return nil
}

// CRequired reports whether the environment variable SLUICE_REQUIRE_CLANG
// is "1". Tests that need clang skip when [CToolchain] fails, unless
// CRequired, when they fail instead: `go run ./internal/check` sets it once
// it has made sure the toolchain works, so a broken toolchain cannot turn
// the C guest tests into silent skips.
func CRequired() bool { return os.Getenv(RequireCEnv) == "1" }

func cacheDir() (string, error) {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice", "guests"), nil
	}
	return filepath.Join(os.TempDir(), "sluice-guests"), nil
}

// sources are the guest source files at the top of a directory, by name.
type sources struct {
	hasGo bool
	c, h  []string // sorted
}

func listSources(dir string) (sources, error) {
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return sources{}, err
	}
	var s sources
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		switch filepath.Ext(e.Name()) {
		case ".go":
			// Tests (the host runs them) do not make a C guest a Go one.
			s.hasGo = s.hasGo || !strings.HasSuffix(e.Name(), "_test.go")
		case ".c":
			s.c = append(s.c, e.Name())
		case ".h":
			s.h = append(s.h, e.Name())
		}
	}
	return s, nil
}

// cached returns <cache>/<sum>.wasm, calling build to write it to a
// temporary file in cache first when it does not exist.
func cached(cache, sum string, build func(tmp string) error) (string, error) {
	out := filepath.Join(cache, sum+".wasm")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	}
	tmp, err := os.CreateTemp(cache, "build-*.wasm")
	if err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := build(tmp.Name()); err != nil {
		return "", err
	}
	// Rename is atomic, so a concurrent build or an interrupted one never
	// leaves a partial module under the final name.
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	}
	return out, nil
}

// buildGo builds a Go guest and, when level is not "", optimizes it with
// wasm-opt at that level.
func buildGo(ctx context.Context, dir, abs, cache, level string) (string, error) {
	sum, err := sourceHash(ctx, abs)
	if err != nil {
		return "", err
	}
	plain, err := cached(cache, sum, func(tmp string) error {
		if _, err := goCmd(ctx, abs, "build", "-buildmode=c-shared", "-trimpath", "-o", tmp, "."); err != nil {
			return fmt.Errorf("build guest %s: %w", dir, err)
		}
		return nil
	})
	if err != nil || level == "" {
		return plain, err
	}
	return wasmOpt(ctx, dir, plain, cache, sum, level)
}

func buildC(ctx context.Context, dir, abs, cache string, src sources) (string, error) {
	sum, err := cHash(ctx, abs, src)
	if err != nil {
		return "", fmt.Errorf("build guest %s: %w", dir, err)
	}
	return cached(cache, sum, func(tmp string) error {
		args := append(append(append([]string{}, clangFlags...), "-o", tmp), src.c...)
		_, err := clangCmd(ctx, abs, args...)
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("build guest %s: %w", dir, ctxErr)
		}
		// Tell a broken toolchain from broken sources, so the error says
		// what to install only when installing would help.
		if tcErr := CToolchain(ctx); tcErr != nil {
			return fmt.Errorf("build guest %s: %w", dir, tcErr)
		}
		return fmt.Errorf("build guest %s: %w", dir, err)
	})
}

// cHash hashes clang's version, the flags and the name and contents of
// every .c and .h file in dir. A header included from outside dir is not
// part of it.
func cHash(ctx context.Context, dir string, src sources) (string, error) {
	ver, err := clangCmd(ctx, dir, "--version")
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", ctxErr
		}
		return "", toolchainError(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "c guest\nclang %d\n", len(ver))
	h.Write(ver)
	fmt.Fprintf(h, "flags %q\n", clangFlags)
	names := append(append([]string{}, src.c...), src.h...)
	sort.Strings(names)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		// Lengths keep one file's end from passing for the next one's name.
		fmt.Fprintf(h, "file %q %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// sourceHash hashes the toolchain version and the contents of every file of
// every non-standard package dir's main package depends on.
func sourceHash(ctx context.Context, dir string) (string, error) {
	const tmpl = `{{if not .Standard}}{{.ImportPath}}|{{.Dir}}{{range .GoFiles}}|{{.}}{{end}}{{range .EmbedFiles}}|{{.}}{{end}}{{end}}`
	out, err := goCmd(ctx, dir, "list", "-deps", "-f", tmpl, ".")
	if err != nil {
		return "", fmt.Errorf("build guest %s: %w", dir, err)
	}
	ver, err := goCmd(ctx, dir, "env", "GOVERSION", "GOFLAGS")
	if err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	}
	h := sha256.New()
	h.Write(ver)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	for _, line := range lines {
		if line == "" {
			continue
		}
		fields := strings.Split(line, "|")
		if len(fields) < 2 {
			continue
		}
		fmt.Fprintf(h, "pkg %s\n", fields[0])
		pkgDir := fields[1]
		for _, name := range fields[2:] {
			f, err := os.Open(filepath.Join(pkgDir, name))
			if err != nil {
				return "", fmt.Errorf("build guest: %w", err)
			}
			fmt.Fprintf(h, "file %s\n", name)
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", fmt.Errorf("build guest: %w", err)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go %s: %w\n%s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return nil, fmt.Errorf("go %s: %w", args[0], err)
	}
	return stdout.Bytes(), nil
}

// clangCmd runs clang in dir and returns its standard output; see toolCmd.
func clangCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return toolCmd(ctx, dir, "clang", args...)
}

// toolCmd runs a build tool in dir and returns its standard output. Its
// error wraps [exec.ErrNotFound] when the tool is not on PATH and holds the
// first ten lines of its standard error when it ran and failed (wasm-opt's
// validation failure prints the whole module).
func toolCmd(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if lines := strings.SplitN(msg, "\n", 11); len(lines) > 10 {
			msg = strings.Join(lines[:10], "\n") + "\n..."
		}
		if msg != "" {
			return nil, fmt.Errorf("%s: %w\n%s", name, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return stdout.Bytes(), nil
}

// toolchainError turns a failed clang run into an error that says what to
// install, keeping clang's output when it ran.
func toolchainError(err error) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%w: clang is not on PATH; install the Debian packages %s", ErrNoCToolchain, CDebianPackages)
	}
	return fmt.Errorf("%w: clang cannot build a wasm32-wasi reactor; install the Debian packages %s\n%v", ErrNoCToolchain, CDebianPackages, err)
}
