package localtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/guestbuild"
)

// OtherABIVersion is the ABI version the tests make a module declare: one
// this host does not speak.
const OtherABIVersion = "sluice_abi_v2"

// RefusedABIVersion is the part of the host's error, at upload, plan or
// compile, for a module that declares [OtherABIVersion].
const RefusedABIVersion = "module implements " + OtherABIVersion + "; this host speaks " + abi.Version

// WithOtherABIVersion returns a copy of the module wasm with every
// occurrence of the name of its version export, sluice_abi_v1, renamed to
// [OtherABIVersion] (the same length, so nothing else in the module moves):
// the module an SDK of another ABI version would build, as far as the
// host's version check can tell. It fails the test when wasm does not name
// the version.
func WithOtherABIVersion(t testing.TB, wasm []byte) []byte {
	t.Helper()
	if !bytes.Contains(wasm, []byte(abi.Version)) {
		t.Fatalf("the module has no %s export to rename", abi.Version)
	}
	return bytes.ReplaceAll(wasm, []byte(abi.Version), []byte(OtherABIVersion))
}

// CGuestWithOtherABIVersion rebuilds the C guest at rel (as [CGuest] would,
// skipping the test without a toolchain) from a copy of its sources whose
// version export, EXPORT("sluice_abi_v1"), is [OtherABIVersion]'s, and
// returns the module.
func CGuestWithOtherABIVersion(t testing.TB, rel string) []byte {
	t.Helper()
	CGuest(t, rel) // the toolchain check, and the sources build as they are
	src := filepath.Join(ModuleRoot(t), rel)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	renamed := 0
	for _, e := range ents {
		if ext := filepath.Ext(e.Name()); e.IsDir() || (ext != ".c" && ext != ".h") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		decl := []byte(`EXPORT("` + abi.Version + `")`)
		renamed += bytes.Count(b, decl)
		b = bytes.ReplaceAll(b, decl, []byte(`EXPORT("`+OtherABIVersion+`")`))
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if renamed != 1 {
		t.Fatalf("%s: %d declarations EXPORT(%q), want one", rel, renamed, abi.Version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path, err := guestbuild.BuildTo(ctx, dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(wasm, []byte(abi.Version)) || !bytes.Contains(wasm, []byte(OtherABIVersion)) {
		t.Fatalf("the rebuilt module does not declare %s alone", OtherABIVersion)
	}
	return wasm
}
