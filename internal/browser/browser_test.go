package browser

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestWorksOrSaysWhatToInstall(t *testing.T) {
	err := Works(context.Background())
	if err == nil {
		return
	}
	if Required() {
		t.Fatalf("%s=1 but chromium does not work: %v", RequireEnv, err)
	}
	if !errors.Is(err, ErrNoBrowser) || !strings.Contains(err.Error(), DebianPackages) {
		t.Fatalf("error %q: want ErrNoBrowser naming the package %s", err, DebianPackages)
	}
	t.Skipf("no headless chromium: %v", err)
}

func TestFlagsUseTheProfileAndStayOffline(t *testing.T) {
	f := strings.Join(Flags("/tmp/p"), " ")
	for _, want := range []string{"--headless", "--user-data-dir=/tmp/p", "--disable-background-networking", "--disable-quic", "--disable-component-update", "--disable-sync"} {
		if !strings.Contains(f, want) {
			t.Errorf("flags %q lack %s", f, want)
		}
	}
}
