// Package guestbuild compiles a Go package directory into a Sluice guest
// module: `go build -buildmode=c-shared` for GOOS=wasip1 GOARCH=wasm,
// cached by a hash of every source file the package depends on, so a second
// build of unchanged sources costs one `go list`.
//
// The CLI (`sluice plan`, `sluice run`) and the tests use it; it shells out
// to the go command on PATH.
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

// Build compiles the main package in dir to a wasip1 reactor module and
// returns the path of the .wasm file in the cache directory
// (<user cache>/sluice/guests, or the temp directory when there is none).
//
// # Errors
//
// The go command's output is part of the error when the build fails.
func Build(ctx context.Context, dir string) (wasmPath string, err error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	return BuildTo(ctx, dir, cache)
}

// BuildTo is Build with an explicit cache directory.
func BuildTo(ctx context.Context, dir, cache string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	} else if !st.IsDir() {
		return "", fmt.Errorf("build guest: %s is not a directory", dir)
	}
	sum, err := sourceHash(ctx, abs)
	if err != nil {
		return "", err
	}
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
	if _, err := goCmd(ctx, abs, "build", "-buildmode=c-shared", "-trimpath", "-o", tmp.Name(), "."); err != nil {
		return "", fmt.Errorf("build guest %s: %w", dir, err)
	}
	// Rename is atomic, so a concurrent build or an interrupted one never
	// leaves a partial module under the final name.
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("build guest: %w", err)
	}
	return out, nil
}

func cacheDir() (string, error) {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice", "guests"), nil
	}
	return filepath.Join(os.TempDir(), "sluice-guests"), nil
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
