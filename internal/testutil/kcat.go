package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Debian's kcat is the independent Kafka client the Kafka tests cross-check
// the connector with (librdkafka, not franz-go).
const (
	// KcatDebianPackages provide it.
	KcatDebianPackages = "kcat"
	// RequireKcatEnv set to 1 (the test command sets it once kcat runs)
	// makes [Kcat] fail a test instead of skipping it.
	RequireKcatEnv = "SLUICE_REQUIRE_KCAT"
)

// KcatWorks says why kcat cannot run here, or nil.
func KcatWorks(ctx context.Context) error {
	bin, err := exec.LookPath("kcat")
	if err != nil {
		return fmt.Errorf("no kcat on PATH: install Debian's package (apt-get install %s): %w", KcatDebianPackages, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "-V").CombinedOutput(); err != nil {
		return fmt.Errorf("%s -V: %v\n%s", bin, err, out)
	}
	return nil
}

// Kcat is kcat's path. Without a working kcat the test skips, or fails
// when RequireKcatEnv is 1.
func Kcat(t testing.TB) string {
	t.Helper()
	if err := KcatWorks(context.Background()); err != nil {
		if os.Getenv(RequireKcatEnv) == "1" {
			t.Fatalf("%s=1 but: %v", RequireKcatEnv, err)
		}
		t.Skip(err)
	}
	bin, _ := exec.LookPath("kcat")
	return bin
}
