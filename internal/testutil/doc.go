// Package testutil holds helpers shared by the project's tests: polling
// instead of sleeping, and access to the real services the test command
// (internal/check) starts. Nothing outside tests imports it.
package testutil
