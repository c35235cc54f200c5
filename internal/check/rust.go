package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/sluicehq/sluice/internal/guestbuild"
)

// rustToolchain makes sure Debian's cargo can build Rust guests and reports
// whether it can, installing guestbuild.RustDebianPackages with apt-get
// when it may (root, apt-get on PATH), as cToolchain does for clang. It
// fails only when it tried and the build still fails; otherwise a missing
// toolchain is a warning, and the Rust guest tests skip.
func rustToolchain(ctx context.Context, root string) (bool, error) {
	err := guestbuild.RustToolchain(ctx)
	if err == nil {
		fmt.Fprintln(os.Stderr, "check: cargo builds wasm32-wasi guests; the Rust guest tests will run")
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	install := append([]string{"install", "-y", "-q", "--no-install-recommends"}, strings.Fields(guestbuild.RustDebianPackages)...)
	if _, lookErr := exec.LookPath("apt-get"); os.Geteuid() != 0 || lookErr != nil {
		fmt.Fprintf(os.Stderr, "check: WARNING: %v\n", err)
		fmt.Fprintf(os.Stderr, "check: WARNING: the Rust guest tests will be skipped; to run them, install the packages as root: apt-get %s\n",
			strings.Join(install, " "))
		return false, nil
	}
	fmt.Fprintf(os.Stderr, "check: %v\n", err)
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	fmt.Fprintf(os.Stderr, "check: apt-get %s\n", strings.Join(install, " "))
	if _, err := runIn(ctx, root, env, "apt-get", install...); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// The package lists may be stale or absent (a fresh container); refresh once.
		fmt.Fprintf(os.Stderr, "check: %v\ncheck: apt-get install failed; running apt-get update -q and retrying\n", err)
		if _, err := runIn(ctx, root, env, "apt-get", "update", "-q"); err != nil {
			return false, err
		}
		if _, err := runIn(ctx, root, env, "apt-get", install...); err != nil {
			return false, err
		}
	}
	if err := guestbuild.RustToolchain(ctx); err != nil {
		return false, fmt.Errorf("cargo still cannot build wasm32-wasi guests after apt-get install: %w", err)
	}
	fmt.Fprintln(os.Stderr, "check: installed the Rust toolchain; the Rust guest tests will run")
	return true, nil
}
