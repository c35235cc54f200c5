package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/sluicehq/sluice/internal/promtest"
)

// ensurePrometheus makes sure the Prometheus server the metrics tests
// start (internal/promtest) runs, installing Debian's package with
// apt-get when it may, as guestToolchain.ensure does for the guest
// toolchains. It returns the environment that makes those tests require
// it, or none (they skip) when it cannot be had. The package may start a
// service of its own; the tests never use it.
func ensurePrometheus(ctx context.Context, root string) ([]string, error) {
	require := []string{promtest.RequireEnv + "=1"}
	err := promtest.Works(ctx)
	if err == nil {
		fmt.Fprintln(os.Stderr, "check: prometheus runs; the metrics tests will scrape with it")
		return require, nil
	}
	install := append([]string{"install", "-y", "-q", "--no-install-recommends"}, strings.Fields(promtest.DebianPackages)...)
	if _, aptErr := exec.LookPath("apt-get"); os.Geteuid() != 0 || aptErr != nil {
		fmt.Fprintf(os.Stderr, "check: WARNING: %v\n", err)
		fmt.Fprintf(os.Stderr, "check: WARNING: the Prometheus tests will be skipped; to run them, install the package as root: apt-get %s\n", strings.Join(install, " "))
		return nil, nil
	}
	fmt.Fprintf(os.Stderr, "check: %v\n", err)
	if err := aptInstall(ctx, root, install); err != nil {
		return nil, err
	}
	if err := promtest.Works(ctx); err != nil {
		return nil, fmt.Errorf("prometheus still does not run after apt-get install: %w", err)
	}
	fmt.Fprintln(os.Stderr, "check: installed prometheus; the metrics tests will scrape with it")
	return require, nil
}
