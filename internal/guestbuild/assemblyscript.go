package guestbuild

import (
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
	"regexp"
	"sort"
	"strconv"
	"strings"

	assemblyscript "github.com/sluicehq/sluice/sdk/assemblyscript"
)

// ASConfigFile marks a directory as an AssemblyScript guest.
const ASConfigFile = "asconfig.json"

// ASDebianPackages are the Debian packages that give node and npm, which
// install and run the AssemblyScript compiler. Error messages name them;
// `go run ./internal/check` installs them.
const ASDebianPackages = "nodejs npm"

// RequireASEnv is the environment variable [ASRequired] reads.
const RequireASEnv = "SLUICE_REQUIRE_ASC"

// minNodeMajor is the oldest node the pinned compiler supports (its
// package.json's engines).
const minNodeMajor = 20

// ErrNoASToolchain is wrapped by the errors of [ASToolchain], and of [Build]
// for an AssemblyScript guest, when node or npm is missing or too old, or
// npm cannot install the pinned compiler. A guest that merely fails to
// compile does not wrap it.
var ErrNoASToolchain = errors.New("no AssemblyScript toolchain")

// ascFlags are the flags of every AssemblyScript guest build, after the
// guest's asconfig.json (flags given on the command line win). They make
// the module what docs/ABI.md asks for: the start function exported as
// _initialize instead of run at instantiation, and abort, trace and seed
// handled inside the module (see sdk/assemblyscript/assembly/runtime.ts)
// rather than imported from "env", which the host refuses. They are part of
// the hash.
var ascFlags = []string{
	"--optimizeLevel", "3", "--shrinkLevel", "0",
	"--runtime", "incremental",
	"--exportStart", "_initialize",
	"--use", "abort=~lib/sluice/runtime/sluiceAbort",
	"--use", "trace=~lib/sluice/runtime/sluiceTrace",
	"--use", "seed=~lib/sluice/runtime/sluiceSeed",
}

// ASRequired reports whether the environment variable SLUICE_REQUIRE_ASC is
// "1". Tests that need the AssemblyScript compiler skip when [ASToolchain]
// fails, unless ASRequired, when they fail instead: `go run
// ./internal/check` sets it once it has installed the compiler.
func ASRequired() bool { return os.Getenv(RequireASEnv) == "1" }

// asToolchain is the installed compiler and the SDK sources, both in the
// user's cache directory.
type asToolchain struct {
	node    string // path of node
	nodeVer string // node --version
	asc     string // path of asc.js
	lockSum string // hash of the SDK's package-lock.json
	sdkDir  string // a directory holding the SDK as the package "sluice"
	sdkSum  string // hash of the SDK sources
}

// ASToolchain makes sure the pinned AssemblyScript compiler is installed:
// node and npm on PATH, node new enough, and the compiler of the SDK's
// package-lock.json installed with `npm ci` into <user cache>/sluice/
// assemblyscript/<hash of the lock file> (once; later calls find it).
//
// # Errors
//
// The error wraps [ErrNoASToolchain] and names [ASDebianPackages] when node
// or npm is missing or too old; it holds npm's output when npm ci fails.
func ASToolchain(ctx context.Context) error {
	_, err := ensureAS(ctx)
	return err
}

func asBaseDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice", "assemblyscript")
	}
	return filepath.Join(os.TempDir(), "sluice-assemblyscript")
}

func ensureAS(ctx context.Context) (*asToolchain, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: node is not on PATH; install the Debian packages %s (node %d or later)", ErrNoASToolchain, ASDebianPackages, minNodeMajor)
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: node --version: %v", ErrNoASToolchain, err)
	}
	ver := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(ver, "v"), ".", 2)[0])
	if major < minNodeMajor {
		return nil, fmt.Errorf("%w: node %s is too old for the pinned compiler, which needs node %d or later; install a newer nodejs", ErrNoASToolchain, ver, minNodeMajor)
	}
	lock := assemblyscript.PackageLock()
	tc := &asToolchain{node: node, nodeVer: ver, lockSum: hashBytes(lock)}
	base := asBaseDir()
	dir := filepath.Join(base, tc.lockSum)
	tc.asc = filepath.Join(dir, "node_modules", "assemblyscript", "bin", "asc.js")
	if _, err := os.Stat(tc.asc); err != nil {
		if err := installAS(ctx, base, dir, lock); err != nil {
			return nil, err
		}
	}
	if err := tc.writeSDK(base); err != nil {
		return nil, fmt.Errorf("assemblyscript sdk: %w", err)
	}
	return tc, nil
}

// installAS runs npm ci for the SDK's lock file in a scratch directory and
// renames it to dir, so an interrupted install never leaves a half one
// under the final name.
func installAS(ctx context.Context, base, dir string, lock []byte) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w: npm is not on PATH; install the Debian packages %s", ErrNoASToolchain, ASDebianPackages)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("install assemblyscript: %w", err)
	}
	tmp, err := os.MkdirTemp(base, "install-")
	if err != nil {
		return fmt.Errorf("install assemblyscript: %w", err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range map[string][]byte{"package.json": assemblyscript.PackageJSON(), "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return fmt.Errorf("install assemblyscript: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("install assemblyscript: %w", ctx.Err())
		}
		return fmt.Errorf("%w: npm ci of sdk/assemblyscript/package-lock.json failed (npm must reach its registry once; later builds reuse %s): %v\n%s",
			ErrNoASToolchain, dir, err, strings.TrimSpace(outb.String()))
	}
	if err := os.Rename(tmp, dir); err != nil {
		// A concurrent install may have won the race; its result is as good.
		if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "assemblyscript", "bin", "asc.js")); statErr == nil {
			return nil
		}
		return fmt.Errorf("install assemblyscript: %w", err)
	}
	return nil
}

// writeSDK writes the SDK sources as <base>/sdk-<hash>/sluice, the package
// "sluice" for the compiler's --path, unless they are there already.
func (tc *asToolchain) writeSDK(base string) error {
	src := assemblyscript.Sources()
	h := sha256.New()
	names, err := fs.Glob(src, "*.ts")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := fs.ReadFile(src, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "file %q %d\n", name, len(b))
		h.Write(b)
	}
	tc.sdkSum = hex.EncodeToString(h.Sum(nil))[:32]
	tc.sdkDir = filepath.Join(base, "sdk-"+tc.sdkSum)
	if _, err := os.Stat(filepath.Join(tc.sdkDir, "sluice", "index.ts")); err == nil {
		return nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(base, "sdk-tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(filepath.Join(tmp, "sluice"), 0o755); err != nil {
		return err
	}
	for _, name := range names {
		b, _ := fs.ReadFile(src, name)
		if err := os.WriteFile(filepath.Join(tmp, "sluice", name), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, tc.sdkDir); err != nil {
		if _, statErr := os.Stat(filepath.Join(tc.sdkDir, "sluice", "index.ts")); statErr == nil {
			return nil
		}
		return err
	}
	return nil
}

// isAssemblyScript reports whether dir is an AssemblyScript guest.
func isAssemblyScript(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, ASConfigFile))
	return err == nil && st.Mode().IsRegular()
}

// asConfig is what the build reads of asconfig.json.
type asConfig struct {
	Entries []string `json:"entries"`
	Extends string   `json:"extends"`
}

func buildAS(ctx context.Context, dir, abs, cache string) (string, error) {
	cfgBytes, err := os.ReadFile(filepath.Join(abs, ASConfigFile))
	if err != nil {
		return "", fmt.Errorf("build guest %s: %w", dir, err)
	}
	var cfg asConfig
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		return "", fmt.Errorf("build guest %s: %s is not valid JSON: %v", dir, ASConfigFile, err)
	}
	if len(cfg.Entries) == 0 && cfg.Extends == "" {
		return "", fmt.Errorf("build guest %s: %s lists no entries: add \"entries\": [\"assembly/index.ts\"]", dir, ASConfigFile)
	}
	tc, err := ensureAS(ctx)
	if err != nil {
		return "", fmt.Errorf("build guest %s: %w", dir, err)
	}
	sum, err := asHash(abs, tc)
	if err != nil {
		return "", fmt.Errorf("build guest %s: %w", dir, err)
	}
	return cached(cache, sum, func(tmp string) error {
		args := append([]string{tc.asc, "--config", ASConfigFile, "--path", tc.sdkDir, "--noColors"}, ascFlags...)
		args = append(args, "--outFile", tmp)
		cmd := exec.CommandContext(ctx, tc.node, args...)
		cmd.Dir = abs
		var outb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &outb, &outb
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("build guest %s: %w", dir, ctx.Err())
			}
			return fmt.Errorf("build guest %s: asc: %w\n%s", dir, err, strings.TrimSpace(outb.String()))
		}
		b, err := os.ReadFile(tmp)
		if err != nil {
			return fmt.Errorf("build guest %s: %w", dir, err)
		}
		if !bytes.HasPrefix(b, []byte("\x00asm")) {
			return fmt.Errorf("build guest %s: asc wrote no wasm module:\n%s", dir, strings.TrimSpace(outb.String()))
		}
		if !bytes.Contains(b, []byte("sluice_abi_v")) {
			return fmt.Errorf("build guest %s: the module exports no sluice_abi_v1: add `export * from \"sluice/abi\";` to the entry file (only an entry file's exports become the module's)", dir)
		}
		return nil
	})
}

// relImport finds the relative module specifiers of import and export
// statements: the files a guest's sources reach outside the packages.
var relImport = regexp.MustCompile(`(?:from|import)\s*\(?\s*["'](\.{1,2}/[^"']+)["']`)

// asHash hashes the toolchain (lock file, node, SDK, flags) and the guest's
// sources: asconfig.json, every .ts and .json file under dir (node_modules
// and hidden directories aside) and every file they import by a relative
// path, wherever it is.
func asHash(dir string, tc *asToolchain) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "assemblyscript guest\nlock %s\nnode %s\nsdk %s\nflags %q\n", tc.lockSum, tc.nodeVer, tc.sdkSum, ascFlags)
	seen := map[string]bool{}
	var queue []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext == ".ts" || ext == ".json" {
			seen[p] = true
			queue = append(queue, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if !strings.HasSuffix(p, ".ts") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		for _, m := range relImport.FindAllSubmatch(b, -1) {
			target := filepath.Join(filepath.Dir(p), string(m[1]))
			for _, cand := range []string{target + ".ts", filepath.Join(target, "index.ts"), target} {
				if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() {
					if !seen[cand] {
						seen[cand] = true
						queue = append(queue, cand)
					}
					break
				}
			}
		}
	}
	files := make([]string, 0, len(seen))
	for p := range seen {
		files = append(files, p)
	}
	sort.Strings(files)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			rel = p
		}
		fmt.Fprintf(h, "file %q %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:32]
}
