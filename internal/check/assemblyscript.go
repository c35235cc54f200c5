package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/sluicehq/sluice/internal/guestbuild"
)

// assemblyScript makes sure the pinned AssemblyScript compiler is installed
// (npm ci of sdk/assemblyscript/package-lock.json into the user cache, once
// per lock file) and, when it is, requires the AssemblyScript guest tests
// of the test run: it sets guestbuild.RequireASEnv in this process's
// environment, which the go test command inherits. Without node and npm it
// installs Debian's packages when it may (root, apt-get on PATH); otherwise
// a missing toolchain is a warning and those tests skip. It fails only when
// it installed the packages and the compiler still cannot be installed.
func assemblyScript(ctx context.Context, root string) error {
	step("AssemblyScript compiler")
	err := guestbuild.ASToolchain(ctx)
	if err == nil {
		fmt.Fprintln(os.Stderr, "check: the AssemblyScript compiler is installed; the AssemblyScript guest tests will run")
		return os.Setenv(guestbuild.RequireASEnv, "1")
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_, nodeErr := exec.LookPath("node")
	_, npmErr := exec.LookPath("npm")
	install := append([]string{"install", "-y", "-q", "--no-install-recommends"}, strings.Fields(guestbuild.ASDebianPackages)...)
	_, aptErr := exec.LookPath("apt-get")
	if (nodeErr == nil && npmErr == nil) || os.Geteuid() != 0 || aptErr != nil {
		// Installing node and npm would not help, or is not ours to do.
		fmt.Fprintf(os.Stderr, "check: WARNING: %v\n", err)
		fmt.Fprintf(os.Stderr, "check: WARNING: the AssemblyScript guest tests will be skipped; they need node %s and npm reaching its registry once (as root: apt-get %s)\n",
			"20 or later", strings.Join(install, " "))
		return nil
	}
	fmt.Fprintf(os.Stderr, "check: %v\n", err)
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	fmt.Fprintf(os.Stderr, "check: apt-get %s\n", strings.Join(install, " "))
	if _, err := runIn(ctx, root, env, "apt-get", install...); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "check: %v\ncheck: apt-get install failed; running apt-get update -q and retrying\n", err)
		if _, err := runIn(ctx, root, env, "apt-get", "update", "-q"); err != nil {
			return fmt.Errorf("AssemblyScript compiler: %w", err)
		}
		if _, err := runIn(ctx, root, env, "apt-get", install...); err != nil {
			return fmt.Errorf("AssemblyScript compiler: %w", err)
		}
	}
	if err := guestbuild.ASToolchain(ctx); err != nil {
		return fmt.Errorf("AssemblyScript compiler: still not installed after apt-get install: %w", err)
	}
	fmt.Fprintln(os.Stderr, "check: installed the AssemblyScript compiler; the AssemblyScript guest tests will run")
	return os.Setenv(guestbuild.RequireASEnv, "1")
}
