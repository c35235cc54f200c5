package guestbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An AssemblyScript guest using the SDK, with a helper imported from
// outside its directory.
const asGuestSrc = `import { job, Env, Record } from "sluice";
import { same } from "../../shared/same";
export * from "sluice/abi";

function plan(env: Env): void {
  env.textSource("lines", ["in.txt"]).map("same", same).collect("out");
}

job(plan);
`

const asSharedSrc = `import { Record } from "sluice";

export function same(r: Record): Record {
  return r;
}
`

func needAS(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := ASToolchain(ctx); err != nil {
		if ASRequired() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBuildAssemblyScriptCachesByContent: a directory with an asconfig.json
// builds to a reactor module exporting the ABI (and importing nothing from
// "env"); a second build returns the cached file; changing the guest or a
// file it imports from outside its directory builds anew.
func TestBuildAssemblyScriptCachesByContent(t *testing.T) {
	needAS(t)
	ctx := context.Background()
	root, cache := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "guest")
	writeFiles(t, root, map[string]string{
		"guest/asconfig.json":      `{"entries": ["assembly/index.ts"]}`,
		"guest/assembly/index.ts":  asGuestSrc,
		"shared/same.ts":           asSharedSrc,
		"guest/node_modules/x.ts":  "not part of the guest",
		"guest/.hidden/ignored.ts": "nor this",
	})
	p1, err := BuildTo(ctx, dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p1)
	if err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Fatalf("not a wasm module: %v", err)
	}
	for _, want := range []string{"sluice_abi_v1", "sluice_process", "_initialize", "memory"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the module lacks %q", want)
		}
	}
	for _, bad := range []string{"env", "_start"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("the module mentions %q (an env import or a command's entry point)", bad)
		}
	}
	st1, _ := os.Stat(p1)
	p2, err := BuildTo(ctx, dir, cache)
	if err != nil || p2 != p1 {
		t.Fatalf("second build: %q %v, want the cached %q", p2, err, p1)
	}
	if st2, _ := os.Stat(p2); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("unchanged sources were rebuilt")
	}
	writeFiles(t, root, map[string]string{"guest/node_modules/x.ts": "changed", "guest/.hidden/ignored.ts": "changed"})
	if p, err := BuildTo(ctx, dir, cache); err != nil || p != p1 {
		t.Errorf("a change in node_modules or a hidden directory rebuilt the guest: %q %v", p, err)
	}
	writeFiles(t, root, map[string]string{"shared/same.ts": strings.Replace(asSharedSrc, "return r;", "return r; // changed", 1)})
	p3, err := BuildTo(ctx, dir, cache)
	if err != nil || p3 == p1 {
		t.Fatalf("a changed import from outside the directory kept its cache entry: %q %v", p3, err)
	}
}

func TestBuildAssemblyScriptErrors(t *testing.T) {
	needAS(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"no entries": {
			map[string]string{"asconfig.json": `{"options": {}}`},
			`asconfig.json lists no entries: add "entries": ["assembly/index.ts"]`,
		},
		"bad json": {
			map[string]string{"asconfig.json": `{"entries": [`},
			"asconfig.json is not valid JSON",
		},
		"no abi export": {
			map[string]string{
				"asconfig.json":     `{"entries": ["assembly/index.ts"]}`,
				"assembly/index.ts": strings.Replace(asGuestSrc, `export * from "sluice/abi";`, "", 1),
				"../shared/same.ts": asSharedSrc,
			},
			"add `export * from \"sluice/abi\";` to the entry file",
		},
		"compile error": {
			map[string]string{
				"asconfig.json":     `{"entries": ["assembly/index.ts"]}`,
				"assembly/index.ts": "export function f(): i32 { return undefinedName; }\n",
			},
			"undefinedName",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "guest")
			writeFiles(t, dir, tc.files)
			_, err := BuildTo(ctx, dir, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if errors.Is(err, ErrNoASToolchain) {
				t.Errorf("a broken guest blamed the toolchain: %v", err)
			}
		})
	}
}
