package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// DebianPackages is the Debian package that provides the browser; error
// messages name it and `go run ./internal/check` installs it.
const DebianPackages = "chromium"

// RequireEnv is the environment variable [Required] reads.
const RequireEnv = "SLUICE_REQUIRE_CHROMIUM"

// ErrNoBrowser is wrapped by the errors of [Find] and [Works] when no
// working headless Chromium is installed.
var ErrNoBrowser = errors.New("no headless chromium")

// names are the commands Chromium is installed as, most likely first.
var names = []string{"chromium", "chromium-browser", "google-chrome"}

// Find returns the path of the Chromium binary on PATH.
//
// # Errors
//
// The error wraps [ErrNoBrowser] and names [DebianPackages] when none is
// on PATH.
func Find() (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: none of %s is on PATH; install the Debian package %s", ErrNoBrowser, strings.Join(names, ", "), DebianPackages)
}

// Flags are the command-line flags of every headless run, for a profile
// in userDataDir (a fresh directory per run: no state leaks between tests).
// The machine may have no network at all, so everything that would call
// out (sync, updates, QUIC probes, background fetches) is off; the sandbox
// is off because the tests may run as root, where Chromium refuses it.
func Flags(userDataDir string) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir=" + userDataDir,
	}
}

// Works reports whether headless Chromium starts and renders a page: it
// dumps the DOM of a data: URL and looks for the page's text.
//
// # Errors
//
// The error wraps [ErrNoBrowser] when Chromium is missing or cannot render;
// it holds Chromium's output then.
func Works(ctx context.Context) error {
	bin, err := Find()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sluice-chromium-probe-")
	if err != nil {
		return fmt.Errorf("check chromium: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const marker = "sluice-probe-ok"
	args := append(Flags(dir), "--dump-dom", "data:text/html,<p>"+marker+"</p>")
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(ctxErr, context.DeadlineExceeded) {
		return fmt.Errorf("check chromium: %w", ctxErr)
	}
	if err != nil || !strings.Contains(string(out), marker) {
		return fmt.Errorf("%w: %s --headless cannot render a page (%v); reinstall the Debian package %s\n%s", ErrNoBrowser, bin, err, DebianPackages, out)
	}
	return nil
}

// Required reports whether SLUICE_REQUIRE_CHROMIUM is "1". The browser
// tests skip when [Works] fails, unless Required, when they fail instead:
// `go run ./internal/check` sets it once it has made sure Chromium works,
// so a broken browser cannot turn the dashboard tests into silent skips.
func Required() bool { return os.Getenv(RequireEnv) == "1" }
