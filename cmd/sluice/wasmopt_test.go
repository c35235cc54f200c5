package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/guestbuild"
)

// planCmd runs `sluice plan args...` in process and returns its output and
// error.
func planCmd(args ...string) (string, error) {
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{"plan"}, args...))
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
}

var moduleLine = regexp.MustCompile(`module (sha256-[0-9a-f]+)`)

// TestPlanWasmOpt: `sluice plan --wasm-opt DIR` plans the module wasm-opt
// made (another digest, the same graph); --wasm-opt alone is the default
// level.
func TestPlanWasmOpt(t *testing.T) {
	if err := guestbuild.WasmOptToolchain(context.Background()); err != nil {
		if guestbuild.WasmOptRequired() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := "../../examples/wordcount"
	digest := func(args ...string) string {
		t.Helper()
		out, err := planCmd(append(args, dir, "--", "--input", "in.txt")...)
		if err != nil {
			t.Fatalf("plan %v: %v\n%s", args, err, out)
		}
		if !strings.Contains(out, "job wordcount") || !strings.Contains(out, "count     reduce") {
			t.Errorf("plan %v: not the word count's graph:\n%s", args, out)
		}
		m := moduleLine.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("plan %v: no module line:\n%s", args, out)
		}
		return m[1]
	}
	plain := digest()
	opt := digest("--wasm-opt")
	if opt == plain {
		t.Errorf("--wasm-opt planned the plain module %s", plain)
	}
	if level := digest("--wasm-opt=" + guestbuild.DefaultWasmOptLevel); level != opt {
		t.Errorf("--wasm-opt=%s planned %s, --wasm-opt alone %s", guestbuild.DefaultWasmOptLevel, level, opt)
	}
}

// TestWasmOptFlagErrors: each misuse says what was wrong and what to pass.
func TestWasmOptFlagErrors(t *testing.T) {
	wasm := filepath.Join(t.TempDir(), "job.wasm")
	if err := os.WriteFile(wasm, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--wasm-opt=O9", "../../examples/wordcount"}, `wasm-opt level "O9": want one of O1, O2, O3, O4, Os, Oz`},
		{[]string{"--wasm-opt", wasm}, "is a module file: pass the guest's source directory"},
		{[]string{"--wasm-opt", "../../examples/wordcount-c"}, "wasm-opt runs only over Go guests, and this is a C guest"},
	} {
		out, err := planCmd(append(tc.args, "--", "--input", "in.txt")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("plan %v: %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
