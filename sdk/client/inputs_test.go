package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/jobconfig"
)

func TestStageInputs(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one.txt", "hello world\n")
	write("books/a.txt", "a\n")
	write("books/b.txt", "b\n")
	write("books/.hidden", "x\n")
	write("logs/x.log", "x\n")
	write("logs/y.log", "y\n")

	args := []string{"--input", one, "--input=" + filepath.Join(dir, "books"), "--input", filepath.Join(dir, "logs", "*.log"), "--input", "tenants/default/inputs/elsewhere.txt", "--other", one}
	inputs, err := StageInputs(ctx, store, DefaultTenant, args)
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 3 {
		t.Fatalf("inputs = %v; want the file, the directory and the glob", inputs)
	}
	k := inputs[one]
	if !strings.HasPrefix(k, "tenants/default/inputs/sha256-") || !strings.HasSuffix(k, "/one.txt") {
		t.Errorf("file key = %q", k)
	}
	if info, err := store.Stat(ctx, k); err != nil || info.Size != 12 {
		t.Errorf("uploaded file: %+v %v", info, err)
	}
	for _, p := range []string{filepath.Join(dir, "books"), filepath.Join(dir, "logs", "*.log")} {
		prefix := inputs[p]
		if !strings.HasSuffix(prefix, "/") {
			t.Fatalf("%s -> %q; want a prefix", p, prefix)
		}
		page, err := store.List(ctx, prefix, "", 0)
		if err != nil || len(page.Items) != 2 {
			t.Errorf("%s: %d objects under %s (%v); want 2 (hidden files skipped)", p, len(page.Items), prefix, err)
		}
	}

	// Staging again uploads nothing new and maps to the same keys.
	again, err := StageInputs(ctx, store, DefaultTenant, args)
	if err != nil {
		t.Fatal(err)
	}
	for p, k := range inputs {
		if again[p] != k {
			t.Errorf("second staging mapped %s to %s, first to %s", p, again[p], k)
		}
	}

	// What the client sends is what the Dispatcher parses.
	conf := InputsConfig(map[string]string{jobconfig.KeyClock: "wall"}, inputs)
	if back, err := jobconfig.Parse(conf); err != nil || back.Inputs[one] != k || back.Clock != jobconfig.ClockWall {
		t.Errorf("InputsConfig = %v", conf)
	}
	if !HasLocalInputs(args) || HasLocalInputs([]string{"--input", "tenants/default/x"}) {
		t.Error("HasLocalInputs is wrong")
	}
	if got, _ := StageInputs(ctx, store, DefaultTenant, []string{"--input", "no/such/file"}); got != nil {
		t.Errorf("a path that names nothing local was staged: %v", got)
	}
}
