package guestbuild

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// RustDebianPackages are the Debian packages that build Rust guests: the
// compiler, cargo, and the standard library for wasm32-wasi. Error
// messages name them; `go run ./internal/check` installs them.
const RustDebianPackages = "rustc cargo libstd-rust-dev-wasm32"

// RequireRustEnv is the environment variable [RustRequired] reads.
const RequireRustEnv = "SLUICE_REQUIRE_RUST"

// ErrNoRustToolchain is wrapped by the errors of [RustToolchain], and of
// [Build] for a Rust guest, when rustc or cargo is missing or cannot build
// a wasm32-wasi cdylib. A Rust guest that merely fails to compile does not
// wrap it.
var ErrNoRustToolchain = errors.New("no Rust toolchain for wasm32-wasi")

// rustTarget is Debian's rustc 1.63 name for WASI preview 1 (later
// releases call it wasm32-wasip1).
const rustTarget = "wasm32-wasi"

// rustBin holds the rustc and cargo that build guests: Debian's, by full
// path, because a rustup toolchain earlier on PATH has no wasm targets.
// Tests point it at fakes.
var rustBin = "/usr/bin"

// rustBuildArgs are the cargo flags of every Rust guest build; they are
// part of the hash.
var rustBuildArgs = []string{"build", "--offline", "--release", "--target", rustTarget, "--message-format=json-render-diagnostics"}

// RustRequired reports whether the environment variable
// SLUICE_REQUIRE_RUST is "1". Tests that need Rust skip when
// [RustToolchain] fails, unless RustRequired, when they fail instead: `go
// run ./internal/check` sets it once it has made sure the toolchain works.
func RustRequired() bool { return os.Getenv(RequireRustEnv) == "1" }

// isRustGuest reports whether dir is a Rust crate: it has a Cargo.toml.
func isRustGuest(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "Cargo.toml"))
	return err == nil && st.Mode().IsRegular()
}

// RustToolchain reports whether cargo and rustc can build a wasm32-wasi
// cdylib, by building a small crate that uses the standard library in a
// temporary directory and removing it.
//
// # Errors
//
// The error wraps [ErrNoRustToolchain] and names [RustDebianPackages]; it
// holds cargo's output when cargo ran but the build failed.
func RustToolchain(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "sluice-rustprobe-")
	if err != nil {
		return fmt.Errorf("check Rust toolchain: %w", err)
	}
	defer os.RemoveAll(tmp)
	files := map[string]string{
		"Cargo.toml": "[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n",
		"src/lib.rs": "#[no_mangle]\npub extern \"C\" fn probe(n: u32) -> u32 {\n    let v: Vec<u32> = (0..n).collect();\n    v.iter().sum()\n}\n",
	}
	for name, content := range files {
		p := filepath.Join(tmp, "crate", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("check Rust toolchain: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("check Rust toolchain: %w", err)
		}
	}
	wasm, err := cargoBuild(ctx, filepath.Join(tmp, "crate"), filepath.Join(tmp, "target"), nil)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("check Rust toolchain: %w", ctxErr)
		}
		return rustToolchainError(err)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		return fmt.Errorf("check Rust toolchain: %w", err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return fmt.Errorf("%w: cargo did not write a wasm module; install the Debian packages %s", ErrNoRustToolchain, RustDebianPackages)
	}
	return nil
}

func buildRust(ctx context.Context, dir, abs, cache string) (string, error) {
	// Tell a broken toolchain from broken sources, so the error says what
	// to install only when installing would help.
	fail := func(err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("build guest %s: %w", dir, ctxErr)
		}
		if !errors.Is(err, ErrNoRustToolchain) {
			if tcErr := RustToolchain(ctx); tcErr != nil {
				return fmt.Errorf("build guest %s: %w", dir, tcErr)
			}
		}
		return fmt.Errorf("build guest %s: %w", dir, err)
	}
	meta, err := cargoMetadata(ctx, abs)
	if err != nil {
		return "", fail(err)
	}
	sum, err := rustHash(ctx, meta)
	if err != nil {
		return "", fail(err)
	}
	return cached(cache, sum, func(tmp string) error {
		// One target directory per crate directory, outside the sources,
		// so a rebuild after an edit reuses what did not change.
		d := sha256.Sum256([]byte(abs))
		target := filepath.Join(cache, "rust-target", hex.EncodeToString(d[:8]))
		wasm, err := cargoBuild(ctx, abs, target, remapFlags(meta))
		if err != nil {
			return fail(err)
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			return fmt.Errorf("build guest %s: %w", dir, err)
		}
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("build guest %s: %w", dir, err)
		}
		return nil
	})
}

// cargoMeta is what the build needs of `cargo metadata`.
type cargoMeta struct {
	Packages []struct {
		Name         string  `json:"name"`
		Version      string  `json:"version"`
		ID           string  `json:"id"`
		Source       *string `json:"source"` // nil for a local (path) package
		ManifestPath string  `json:"manifest_path"`
	} `json:"packages"`
	WorkspaceRoot string `json:"workspace_root"`
}

// local is a package whose sources are on this machine: the guest crate
// and its path dependencies (the SDK).
type local struct{ name, dir string }

func (m *cargoMeta) locals() []local {
	var l []local
	for _, p := range m.Packages {
		if p.Source == nil {
			l = append(l, local{name: p.Name + "-" + p.Version, dir: filepath.Dir(p.ManifestPath)})
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].name < l[j].name })
	return l
}

func cargoMetadata(ctx context.Context, dir string) (*cargoMeta, error) {
	out, err := rustCmd(ctx, dir, nil, "cargo", "metadata", "--offline", "--format-version", "1", "--manifest-path", filepath.Join(dir, "Cargo.toml"))
	if err != nil {
		if ctx.Err() == nil && missingTool(err) {
			return nil, rustToolchainError(err)
		}
		return nil, err
	}
	var m cargoMeta
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("cargo metadata: %w", err)
	}
	return &m, nil
}

// remapFlags take each local package's directory out of the module (panic
// messages name source files), so the same sources give the same bytes
// wherever they are.
func remapFlags(m *cargoMeta) []string {
	var f []string
	for _, l := range m.locals() {
		f = append(f, "--remap-path-prefix="+l.dir+"="+l.name)
	}
	return f
}

// rustHash hashes rustc's and cargo's versions, the build flags, the lock
// file and every file of every local package (target directories and dot
// files aside), by package name and relative path, so it does not depend
// on where the sources are.
func rustHash(ctx context.Context, m *cargoMeta) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "rust guest\nflags %q\n", rustBuildArgs)
	for _, tool := range []string{"rustc", "cargo"} {
		ver, err := rustCmd(ctx, "", nil, tool, "-vV")
		if err != nil {
			if ctx.Err() == nil && missingTool(err) {
				return "", rustToolchainError(err)
			}
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", tool, len(ver))
		h.Write(ver)
	}
	if b, err := os.ReadFile(filepath.Join(m.WorkspaceRoot, "Cargo.lock")); err == nil {
		fmt.Fprintf(h, "lock %d\n", len(b))
		h.Write(b)
	}
	for _, l := range m.locals() {
		fmt.Fprintf(h, "package %q\n", l.name)
		err := filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if p != l.dir && (strings.HasPrefix(name, ".") || (d.IsDir() && name == "target")) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(l.dir, p)
			// Lengths keep one file's end from passing for the next one's name.
			fmt.Fprintf(h, "file %q %d\n", filepath.ToSlash(rel), len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// cargoBuild builds the cdylib of the crate in dir into target and returns
// the path of its .wasm file.
func cargoBuild(ctx context.Context, dir, target string, rustflags []string) (string, error) {
	env := []string{"CARGO_TARGET_DIR=" + target, "CARGO_ENCODED_RUSTFLAGS=" + strings.Join(rustflags, "\x1f")}
	args := append(append([]string{}, rustBuildArgs...), "--manifest-path", filepath.Join(dir, "Cargo.toml"))
	out, err := rustCmd(ctx, dir, env, "cargo", args...)
	if err != nil {
		return "", err
	}
	// Each line is a JSON message; the artifacts of the crate being built
	// name its files.
	var wasm string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			Reason       string   `json:"reason"`
			ManifestPath string   `json:"manifest_path"`
			Filenames    []string `json:"filenames"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.Reason != "compiler-artifact" {
			continue
		}
		if filepath.Clean(msg.ManifestPath) != filepath.Join(dir, "Cargo.toml") {
			continue
		}
		for _, f := range msg.Filenames {
			if strings.HasSuffix(f, ".wasm") {
				wasm = f
			}
		}
	}
	if wasm == "" {
		return "", errors.New(`cargo built no .wasm file: a guest crate needs crate-type = ["cdylib"] in its [lib] section`)
	}
	return wasm, nil
}

// rustCmd runs rustBin's tool in dir (when not empty) and returns its
// standard output; its error holds the tool's standard error.
func rustCmd(ctx context.Context, dir string, env []string, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(rustBin, tool), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUSTC="+filepath.Join(rustBin, "rustc"), "RUSTDOC="+filepath.Join(rustBin, "rustdoc"))
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s: %w\n%s", tool, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	return stdout.Bytes(), nil
}

func missingTool(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound)
}

// rustToolchainError turns a failed cargo or rustc run into an error that
// says what to install, keeping the tool's output when it ran.
func rustToolchainError(err error) error {
	if missingTool(err) {
		return fmt.Errorf("%w: %s or %s is not installed; install the Debian packages %s (a rustup toolchain does not do: it has no %s standard library)",
			ErrNoRustToolchain, filepath.Join(rustBin, "cargo"), filepath.Join(rustBin, "rustc"), RustDebianPackages, rustTarget)
	}
	return fmt.Errorf("%w: cargo cannot build a %s cdylib; install the Debian packages %s\n%v", ErrNoRustToolchain, rustTarget, RustDebianPackages, err)
}
