package wasmhost

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDiskCacheKeepsTheRecentlyUsedWithinBudget checks the bound on the
// compile cache directory: files there before count and go oldest first,
// files appearing during a compile are its module's, a later compile of
// that module makes them recent again, and the total never ends above
// the budget.
func TestDiskCacheKeepsTheRecentlyUsedWithinBudget(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "wazero-v0-arch-os")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	write := func(name string, size int, mod time.Time) {
		t.Helper()
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	left := func() []string {
		t.Helper()
		ents, err := os.ReadDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	write("prev1", 100, old)
	write("prev2", 100, old.Add(time.Minute))
	write("partial.123.tmp", 1000, old) // a write under way: not counted, not touched
	// Not wazero's: the TaskManager keeps module files beside it.
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules", "m.wasm"), make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDiskCache(dir, 300)
	d.sweep("")
	if d.entries != 2 || d.bytes != 200 || d.evictions != 0 {
		t.Fatalf("first sweep: %d entries, %d bytes, %d evictions", d.entries, d.bytes, d.evictions)
	}
	// Module a compiles: its file appears; within budget.
	write("a", 100, old.Add(2*time.Minute))
	d.sweep("sha256-a")
	if got := d.files["sha256-a"]; len(got) != 1 || filepath.Base(got[0]) != "a" {
		t.Fatalf("files of a: %v", got)
	}
	// b appears: over budget, prev1 (oldest) goes.
	write("b", 100, old.Add(3*time.Minute))
	d.sweep("sha256-b")
	if got := left(); !slices.Equal(got, []string{"a", "b", "partial.123.tmp", "prev2"}) {
		t.Fatalf("after b: %v", got)
	}
	// a compiles again (its file read): it becomes recent, so c's arrival
	// evicts prev2 and then b, not a.
	d.sweep("sha256-a")
	write("c", 150, time.Now().Add(-time.Second))
	d.sweep("sha256-c")
	if got := left(); !slices.Equal(got, []string{"a", "c", "partial.123.tmp"}) {
		t.Fatalf("after a again and c: %v", got)
	}
	if d.entries != 2 || d.bytes != 250 || d.evictions != 3 {
		t.Fatalf("at the end: %d entries, %d bytes, %d evictions", d.entries, d.bytes, d.evictions)
	}
	if _, ok := d.files["sha256-b"]; ok {
		t.Fatal("an evicted file is still attributed")
	}
	// A file bigger than the budget goes at once.
	write("huge", 400, time.Now())
	d.sweep("sha256-huge")
	if d.bytes > 300 {
		t.Fatalf("%d bytes left with a budget of 300", d.bytes)
	}
	if _, err := os.Stat(filepath.Join(dir, "modules", "m.wasm")); err != nil {
		t.Fatalf("a file outside wazero's directories: %v", err)
	}
}
