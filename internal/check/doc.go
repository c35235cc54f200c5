// Command check is the project's one test command: `go run ./internal/check`.
//
// It runs what CI runs, in order: gofmt, go vet (host and wasip1), the layer
// rules of layers.txt (imports checked with go list -deps), the Kitex
// generation check, the wasip1 build of sdk/guest, the C toolchain check, and
// `go test -race ./...` with a real MinIO server it installs (once, into the
// user cache directory, keyed by version), starts on a free loopback port
// with a temporary data directory, and stops whatever happens.
//
// The C toolchain check makes sure clang can build wasm32-wasi guests. When
// it cannot and the command runs as root with apt-get, it installs the
// Debian packages guestbuild.CDebianPackages names and fails if clang still
// cannot; otherwise it warns that the C guest tests will be skipped. When
// clang works, the tests run with SLUICE_REQUIRE_CLANG=1, so the C guest
// tests fail rather than skip.
//
// -run and -pkgs narrow the test step; -no-lint skips gofmt, vet, the
// generation check and the sdk/guest build.
package main
