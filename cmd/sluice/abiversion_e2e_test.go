package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/local/localtest"
)

// TestE2EOtherABIVersionRefused: a Go module (from the Go SDK) and a C
// module (from examples/wordcount-c's sources) that declare an ABI version
// the host does not speak are refused by `sluice plan` (compiled here) and
// by `sluice run` (the JobManager refuses the upload) with an error that
// names both versions and says what to do, and no job is made.
func TestE2EOtherABIVersionRefused(t *testing.T) {
	mods := map[string][]byte{
		"go": localtest.WithOtherABIVersion(t, localtest.Guest(t, "examples/wordcount")),
		"c":  localtest.CGuestWithOtherABIVersion(t, "examples/wordcount-c"),
	}
	c := proctest.Start(t, nil, 1)
	dir := t.TempDir()
	for lang, wasm := range mods {
		t.Run(lang, func(t *testing.T) {
			path := filepath.Join(dir, "wordcount-"+lang+"-v2.wasm")
			if err := os.WriteFile(path, wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"plan", path, "--", "--input", "in.txt"},
				{"run", path, "--", "--input", "in.txt"},
			} {
				r := c.Run(args...)
				if r.Code == 0 {
					t.Fatalf("sluice %s: exit 0; want the module refused\nstdout: %s", args[0], r.Stdout)
				}
				for _, want := range []string{localtest.RefusedABIVersion, "rebuild the module with an SDK for sluice_abi_v1"} {
					if !strings.Contains(r.Stderr, want) {
						t.Errorf("sluice %s: stderr lacks %q:\n%s", args[0], want, r.Stderr)
					}
				}
			}
		})
	}
	if jobs := c.Jobs(); len(jobs) != 0 {
		t.Errorf("refused modules made jobs: %+v", jobs)
	}
}
