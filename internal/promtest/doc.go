// Package promtest runs a real Prometheus server (Debian's prometheus
// package) for tests: on a free loopback port, with its own config and
// storage in the test's temporary directory, scraping the targets the test
// names, and asks it PromQL through its HTTP API. It never uses a
// Prometheus service the package may have started.
//
// Without the binary a test skips, unless RequireEnv is set (the test
// command sets it once it made sure of the package): then it fails.
package promtest
