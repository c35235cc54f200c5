package wasmhost

import (
	"os/exec"
	"strings"
	"testing"
)

// TestInternalPackagesKeepTheirImports holds the internal packages to what
// their doc.go files promise they do not import.
func TestInternalPackagesKeepTheirImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/sluicehq/sluice/"
	for pkg, forbidden := range map[string][]string{
		"./internal/wasmbin":    {"github.com/tetratelabs/wazero", mod},
		"./internal/statecodec": {"github.com/tetratelabs/wazero", mod},
		"./internal/rewrite":    {"github.com/tetratelabs/wazero", mod + "wasmhost/internal/validate", mod + "wasmhost/internal/statecodec", mod + "wasmhost\n", mod + "jm", mod + "tm"},
		"./internal/validate":   {mod + "wasmhost/internal/rewrite", mod + "wasmhost/internal/statecodec", mod + "wasmhost\n", mod + "jm", mod + "tm"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, d := range deps[:len(deps)-1] { // the last is pkg itself
			for _, f := range forbidden {
				if strings.HasSuffix(f, "\n") && d == strings.TrimSuffix(f, "\n") || !strings.HasSuffix(f, "\n") && strings.HasPrefix(d, f) {
					t.Errorf("%s imports %s", pkg, d)
				}
			}
		}
	}
}
