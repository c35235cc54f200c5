// Package testutil holds helpers shared by the project's tests: polling
// instead of sleeping, and access to the real services the test command
// (internal/check) starts. Nothing outside tests imports it.
package testutil

import (
	"os"
	"testing"
	"time"
)

// Eventually polls cond every few milliseconds until it returns true, and
// fails the test if that has not happened within timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			if len(msgAndArgs) > 0 {
				t.Fatalf("condition not met within %v: "+msgAndArgs[0].(string), append([]any{timeout}, msgAndArgs[1:]...)...)
			}
			t.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(wait)
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}

// S3 describes the MinIO server the test command started.
type S3 struct {
	Endpoint  string // host:port on loopback
	AccessKey string
	SecretKey string
	MinIOBin  string // the server binary, for tests that start their own
}

// RequireS3 returns the MinIO server the test command started. Under CI=true
// a missing server fails the test; elsewhere the test is skipped with a hint.
func RequireS3(t testing.TB) S3 {
	t.Helper()
	s := S3{
		Endpoint:  os.Getenv("SLUICE_TEST_S3_ENDPOINT"),
		AccessKey: os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("SLUICE_TEST_S3_SECRET_KEY"),
		MinIOBin:  os.Getenv("SLUICE_MINIO_BIN"),
	}
	if s.Endpoint == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SLUICE_TEST_S3_ENDPOINT is not set under CI=true: run the tests through `go run ./internal/check`")
		}
		t.Skip("no MinIO: run through `go run ./internal/check` to include the S3 tests")
	}
	return s
}
