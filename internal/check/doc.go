// Command check is the project's one test command: `go run ./internal/check`.
//
// It runs what CI runs, in order: gofmt, go vet (host and wasip1), the layer
// rules of layers.txt (imports checked with go list -deps), the Kitex
// generation check, the wasip1 build of sdk/guest, the guest toolchain
// checks (C, Rust, AssemblyScript), and `go test -race ./...` with a real
// MinIO server it installs (once, into the user cache directory, keyed by
// version), starts on a free loopback port with a temporary data directory,
// and stops whatever happens.
//
// A guest toolchain check (toolchain.go) makes sure the language's guests
// can be built: clang for wasm32-wasi, Debian's cargo for wasm32-wasi, and
// the AssemblyScript compiler the SDK's lock file pins (npm ci into the user
// cache). When a toolchain does not work and the command runs as root with
// apt-get, it installs the Debian packages guestbuild names and fails if the
// toolchain still does not work; otherwise it warns that those tests will be
// skipped. When the toolchain works, the tests run with its guestbuild
// Require*Env set (SLUICE_REQUIRE_CLANG, SLUICE_REQUIRE_RUST,
// SLUICE_REQUIRE_ASC), so they fail rather than skip.
//
// -run and -pkgs narrow the test step; -no-lint skips gofmt, vet, the
// generation check and the sdk/guest build.
package main
