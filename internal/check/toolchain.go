package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/sluicehq/sluice/internal/browser"
	"github.com/sluicehq/sluice/internal/guestbuild"
)

// A guestToolchain is what one language's guest tests need (or, for the
// browser, what the dashboard tests need: see tests). The test
// command makes sure of it before `go test`, installing Debian's packages
// with apt-get when it may (root, apt-get on PATH), and when it works sets
// requireEnv for the tests, so a broken toolchain fails them instead of
// skipping them. Otherwise a missing toolchain is a warning and those tests
// skip. It fails only when it installed the packages and the toolchain
// still does not work.
type guestToolchain struct {
	lang       string                      // in messages: "C", "Rust", ...
	tests      string                      // in messages: whose tests; empty means "<lang> guest"
	packages   string                      // the Debian packages that provide it
	requireEnv string                      // set to 1 for go test once it works
	works      func(context.Context) error // nil when guests can be built
	// aptHelps says whether installing the packages can help; nil: always.
	aptHelps func() bool
}

// guestToolchains are the languages whose guests the tests build.
var guestToolchains = []guestToolchain{
	// The dashboard's browser tests drive Debian's headless Chromium.
	{lang: "Chromium", tests: "dashboard browser", packages: browser.DebianPackages, requireEnv: browser.RequireEnv, works: browser.Works},
	{lang: "C", packages: guestbuild.CDebianPackages, requireEnv: guestbuild.RequireCEnv, works: guestbuild.CToolchain},
	{lang: "Rust", packages: guestbuild.RustDebianPackages, requireEnv: guestbuild.RequireRustEnv, works: guestbuild.RustToolchain},
	// The compiler itself comes from npm (the SDK's lock file, installed
	// once into the user cache); Debian gives node and npm, so apt-get helps
	// only when one of those is missing.
	{lang: "AssemblyScript", packages: guestbuild.ASDebianPackages, requireEnv: guestbuild.RequireASEnv, works: guestbuild.ASToolchain,
		aptHelps: func() bool {
			_, nodeErr := exec.LookPath("node")
			_, npmErr := exec.LookPath("npm")
			return nodeErr != nil || npmErr != nil
		}},
	// kcat, the independent client the Kafka tests cross-check with.
	// (internal/testutil.Kcat reads the same variable; not imported here,
	// as the test helpers would make this program slow to build.)
	{lang: "kcat", tests: "Kafka cross-check", packages: "kcat", requireEnv: "SLUICE_REQUIRE_KCAT", works: kcatWorks},
	// Binaryen's wasm-opt, for the tests of Go guests built with --wasm-opt.
	{lang: "wasm-opt", packages: guestbuild.WasmOptDebianPackages, requireEnv: guestbuild.RequireWasmOptEnv, works: guestbuild.WasmOptToolchain},
}

// testsName names the tests the toolchain serves, in messages.
func (g guestToolchain) testsName() string {
	if g.tests != "" {
		return g.tests
	}
	return g.lang + " guest"
}

// ensure makes sure the toolchain works and reports whether it does.
func (g guestToolchain) ensure(ctx context.Context, root string) (bool, error) {
	err := g.works(ctx)
	if err == nil {
		fmt.Fprintf(os.Stderr, "check: %s works; the %s tests will run\n", g.lang, g.testsName())
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	install := append([]string{"install", "-y", "-q", "--no-install-recommends"}, strings.Fields(g.packages)...)
	_, aptErr := exec.LookPath("apt-get")
	if os.Geteuid() != 0 || aptErr != nil || (g.aptHelps != nil && !g.aptHelps()) {
		fmt.Fprintf(os.Stderr, "check: WARNING: %v\n", err)
		fmt.Fprintf(os.Stderr, "check: WARNING: the %s tests will be skipped; to run them, install the packages as root: apt-get %s\n",
			g.testsName(), strings.Join(install, " "))
		return false, nil
	}
	fmt.Fprintf(os.Stderr, "check: %v\n", err)
	if err := aptInstall(ctx, root, install); err != nil {
		return false, err
	}
	if err := g.works(ctx); err != nil {
		return false, fmt.Errorf("%s still does not work after apt-get install: %w", g.lang, err)
	}
	fmt.Fprintf(os.Stderr, "check: installed %s; the %s tests will run\n", g.lang, g.testsName())
	return true, nil
}

// aptInstall runs apt-get with install's arguments, refreshing the package
// lists once when that fails (they may be stale or absent in a fresh
// container).
func aptInstall(ctx context.Context, root string, install []string) error {
	// Noninteractive, so a package that asks a debconf question cannot hang the run.
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	fmt.Fprintf(os.Stderr, "check: apt-get %s\n", strings.Join(install, " "))
	_, err := runIn(ctx, root, env, "apt-get", install...)
	if err == nil || ctx.Err() != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "check: %v\ncheck: apt-get install failed; running apt-get update -q and retrying\n", err)
	if _, err := runIn(ctx, root, env, "apt-get", "update", "-q"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "check: apt-get %s\n", strings.Join(install, " "))
	_, err = runIn(ctx, root, env, "apt-get", install...)
	return err
}

// kcatWorks says why Debian's kcat cannot run, or nil.
func kcatWorks(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, "kcat", "-V").CombinedOutput(); err != nil {
		return fmt.Errorf("kcat -V: %v\n%s", err, out)
	}
	return nil
}
