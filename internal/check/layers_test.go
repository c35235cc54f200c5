package main

import (
	"context"
	"strings"
	"testing"
)

const mod = "example.com/m"

// The rules as written parse, and each names at least one package pattern
// on its FROM side.
func TestLayersFileParses(t *testing.T) {
	rules, err := parseRules(layersFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 5 {
		t.Fatalf("layers.txt has %d rules; the file lost some", len(rules))
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, src := range []string{"jm/... tm/...", "must-not-reach tm/...", "jm/... must-not-reach"} {
		if _, err := parseRules(src); err == nil || !strings.Contains(err.Error(), "layers.txt:1") {
			t.Errorf("parseRules(%q) = %v, want an error naming the line", src, err)
		}
	}
}

// A violation names the direct import it comes through.
func TestViolationNamesTheImport(t *testing.T) {
	rules, err := parseRules("jm/...  must-not-reach  idl/...")
	if err != nil {
		t.Fatal(err)
	}
	g := graph{
		imports: map[string][]string{mod + "/jm/jobmaster": {"context", mod + "/internal/wire"}},
		deps: map[string][]string{
			mod + "/jm/jobmaster":  {"context", mod + "/internal/wire", mod + "/idl/gen"},
			mod + "/internal/wire": {mod + "/idl/gen"},
		},
	}
	got := violations(mod, g, rules)
	if len(got) != 1 || !strings.Contains(got[0], "jm/jobmaster reaches "+mod+"/idl/gen through its import of internal/wire, which layers.txt:1 forbids") {
		t.Fatalf("violations = %q", got)
	}
}

func TestViolations(t *testing.T) {
	rules, err := parseRules(`
jm/... !jm/rpc  must-not-reach  idl/kitex_gen/... github.com/cloudwego/... !github.com/cloudwego/base64x/...
internal/...  must-not-reach  jm/...
sdk/guest  reaches-only  internal/abi
`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		deps map[string][]string
		want []string // substrings, one per violation; none means clean
	}{
		{"clean", map[string][]string{
			mod + "/jm/jobmaster": {"context", mod + "/internal/rpcerr", "github.com/cloudwego/base64x"},
			mod + "/jm/rpc":       {mod + "/idl/kitex_gen/sluice/common", "github.com/cloudwego/kitex/pkg/kerrors"},
			mod + "/sdk/guest":    {"unsafe", mod + "/internal/abi"},
		}, nil},
		{"domain reaches generated code transitively", map[string][]string{
			mod + "/jm/jobmaster": {mod + "/internal/rpcerr", mod + "/idl/kitex_gen/sluice/common"},
		}, []string{"jm/jobmaster reaches " + mod + "/idl/kitex_gen/sluice/common"}},
		{"domain reaches kitex", map[string][]string{
			mod + "/jm/dispatcher": {"github.com/cloudwego/kitex/pkg/kerrors"},
		}, []string{"jm/dispatcher reaches github.com/cloudwego/kitex"}},
		{"plumbing holds a floor above", map[string][]string{
			mod + "/internal/cluster": {mod + "/jm"},
		}, []string{"internal/cluster reaches " + mod + "/jm,"}},
		{"guest reaches a module outside its list", map[string][]string{
			mod + "/sdk/guest": {"fmt", mod + "/internal/abi", "github.com/bytedance/sonic"},
		}, []string{"sdk/guest reaches github.com/bytedance/sonic"}},
		{"the module's own package is named before what it brings", map[string][]string{
			mod + "/jm/jobmaster": {"github.com/cloudwego/gopkg/bufiox", mod + "/idl/kitex_gen/sluice/common"},
		}, []string{"jm/jobmaster reaches " + mod + "/idl/kitex_gen/sluice/common,"}},
		{"a prefix is not a parent", map[string][]string{
			mod + "/jmx": {mod + "/idl/kitex_gen/x"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(mod, graph{deps: tt.deps}, rules)
			if len(got) != len(tt.want) {
				t.Fatalf("violations = %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "layers.txt:") {
					t.Errorf("violation %d = %q, want it to contain %q and the rule's line", i, got[i], w)
				}
			}
		})
	}
}

// The repository itself keeps its rules (the test command checks this too;
// here it also runs under plain go test).
func TestRepositoryKeepsLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := layersCheck(context.Background(), root); err != nil {
		t.Fatal(err)
	}
}
