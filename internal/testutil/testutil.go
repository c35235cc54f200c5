package testutil

import (
	"os"
	"testing"
	"time"
)

// CheckFor calls f every `every` until it returns nil, and fails the test
// if that has not happened within total. The failure message is f's last
// error, so f should say what it waits for and what it saw instead, e.g.
// fmt.Errorf("job %s is %s, want FINISHED", id, state).
func CheckFor(t testing.TB, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not met within %v: %v", total, err)
		}
		time.Sleep(every)
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
