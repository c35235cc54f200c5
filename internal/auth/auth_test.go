package auth

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseTenantsAndLookup(t *testing.T) {
	ta, tb := NewToken(), NewToken()
	if !regexp.MustCompile(`^slc_[A-Za-z0-9_-]{43}$`).MatchString(ta) || ta == tb {
		t.Fatalf("tokens %q %q", ta, tb)
	}
	f := `{"tenants":[{"name":"a","token_sha256":["` + HashToken(ta) + `","` + strings.ToUpper(HashToken("old")) + `"],"quotas":{"slots":4,"running_jobs":2,"call_timeout_ms":1500,"cpu_weight":3,"fuel_per_second":1000000,"call_fuel":5000,"submits_per_minute":30}},
		{"name":"b","token_sha256":["` + HashToken(tb) + `"]}]}`
	ts, err := ParseTenants([]byte(f))
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{ta: "a", "old": "a", tb: "b"} {
		if got, err := ts.Lookup(tok); err != nil || got.Name != want {
			t.Errorf("Lookup(%q) = %q %v, want %q", tok, got.Name, err, want)
		}
	}
	for _, tok := range []string{"", "slc_nope", HashToken(ta), ta + " "} {
		if _, err := ts.Lookup(tok); err != ErrUnknownToken {
			t.Errorf("Lookup(%q): %v", tok, err)
		}
	}
	if q := ts.Quotas("a"); q.Slots != 4 || q.RunningJobs != 2 || q.CallTimeout().Milliseconds() != 1500 ||
		q.CPUWeight != 3 || q.FuelPerSecond != 1_000_000 || q.CallFuel != 5000 || q.SubmitsPerMinute != 30 {
		t.Errorf("quotas %+v", q)
	}
	if q := ts.Quotas("nobody"); q != (Quotas{}) {
		t.Errorf("unknown tenant's quotas %+v", q)
	}
}

func TestParseTenantsRefusesBadFiles(t *testing.T) {
	h := HashToken("x")
	for name, f := range map[string]string{
		"not json":         `{`,
		"bad name":         `{"tenants":[{"name":"../a","token_sha256":[]}]}`,
		"upper-case name":  `{"tenants":[{"name":"A","token_sha256":[]}]}`,
		"duplicate tenant": `{"tenants":[{"name":"a"},{"name":"a"}]}`,
		"short hash":       `{"tenants":[{"name":"a","token_sha256":["abcd"]}]}`,
		"shared hash":      `{"tenants":[{"name":"a","token_sha256":["` + h + `"]},{"name":"b","token_sha256":["` + h + `"]}]}`,
		"negative quota":   `{"tenants":[{"name":"a","quotas":{"slots":-1}}]}`,
		"negative fuel":    `{"tenants":[{"name":"a","quotas":{"call_fuel":-1}}]}`,
		"negative rate":    `{"tenants":[{"name":"a","quotas":{"fuel_per_second":-1}}]}`,
		"negative submits": `{"tenants":[{"name":"a","quotas":{"submits_per_minute":-1}}]}`,
		"negative weight":  `{"tenants":[{"name":"a","quotas":{"cpu_weight":-1}}]}`,
		"huge weight":      `{"tenants":[{"name":"a","quotas":{"cpu_weight":10001}}]}`,
	} {
		if _, err := ParseTenants([]byte(f)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSecretProofs(t *testing.T) {
	if _, err := NewSecret([]byte(" \n")); err == nil {
		t.Fatal("empty secret accepted")
	}
	if _, err := NewSecret([]byte("short")); err == nil {
		t.Fatal("short secret accepted")
	}
	s, err := NewSecret([]byte("0123456789abcdef0123\n"))
	if err != nil {
		t.Fatal(err)
	}
	o, _ := NewSecret([]byte("0123456789abcdef0124"))
	if !s.CheckRPC(s.RPCProof()) || s.CheckRPC(o.RPCProof()) || s.CheckRPC("") {
		t.Fatal("rpc proof")
	}
	if !s.CheckData(s.DataToken()) || s.CheckData(o.DataToken()) || s.CheckData([]byte(s.RPCProof())) || s.CheckData(nil) {
		t.Fatal("data token")
	}
	if strings.Contains(s.RPCProof(), "0123456789abcdef") {
		t.Fatal("the proof contains the secret")
	}
	var open *Secret
	if !open.CheckRPC("") || open.RPCProof() != "" || open.DataToken() != nil {
		t.Fatal("nil secret is not open")
	}
}

func TestReplaceSwapsEveryHolder(t *testing.T) {
	ta, tb, tc := NewToken(), NewToken(), NewToken()
	live, err := ParseTenants([]byte(`{"tenants":[{"name":"a","token_sha256":["` + HashToken(ta) + `"]},{"name":"b","token_sha256":["` + HashToken(tb) + `"],"quotas":{"slots":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	holder := live // what the RPC auth and the dispatcher keep
	next, err := ParseTenants([]byte(`{"tenants":[{"name":"b","token_sha256":["` + HashToken(tb) + `"],"quotas":{"slots":2}},{"name":"c","token_sha256":["` + HashToken(tc) + `"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := live.Replace(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Added, []string{"c"}) || !slices.Equal(ch.Removed, []string{"a"}) || !slices.Equal(ch.Changed, []string{"b"}) {
		t.Errorf("changes %+v", ch)
	}
	if _, err := holder.Lookup(ta); err != ErrUnknownToken {
		t.Errorf("removed tenant's token: %v", err)
	}
	if got, err := holder.Lookup(tc); err != nil || got.Name != "c" {
		t.Errorf("added tenant's token: %q %v", got.Name, err)
	}
	if q := holder.Quotas("b"); q.Slots != 2 {
		t.Errorf("b's new quota: %+v", q)
	}
	if !slices.Equal(holder.Names(), []string{"b", "c"}) {
		t.Errorf("names %v", holder.Names())
	}
	if _, err := live.Replace(nil); err == nil {
		t.Error("replaced with nil")
	}
	if _, err := live.Replace(&Tenants{}); err == nil {
		t.Error("replaced with a zero Tenants")
	}
	if got, err := holder.Lookup(tb); err != nil || got.Name != "b" {
		t.Errorf("after refused replaces: %q %v", got.Name, err)
	}
}

func TestParseTenantsSaysWhere(t *testing.T) {
	for f, want := range map[string]string{
		"{\"tenants\": [\n  {\"name\": \"a\",,}\n]}":                 "line 2, column",
		"{\"tenants\": [\n  {\"name\": \"a\"},\n  {\"name\": 7}\n]}": "line 3, column",
		"{\"tenants\": [\n  {\"name\": \"a\", \"quotaz\": {}}]}":     "line 2, column 17: unknown field \"quotaz\"",
		"{\"tenants\": [":      "ends before",
		"{\"tenants\": []} {}": "more than one",
		"{\"tenants\": [{\"name\": \"a\"}, {\"name\": \"B\"}]}": "tenant 2",
	} {
		if _, err := ParseTenants([]byte(f)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", f, err, want)
		}
	}
}

// FuzzParseTenants: the tenants file is outside input read on every reload;
// it never panics, and what it accepts answers for every tenant it lists.
func FuzzParseTenants(f *testing.F) {
	f.Add([]byte(`{"tenants":[{"name":"a","token_sha256":["` + HashToken("x") + `"],"quotas":{"slots":4},"policy":{"config_keys":["sandbox.clock=wall","execution.checkpointing.*"],"min_checkpoint_interval_ms":1000,"connectors":["text"],"connector_hosts":["*.example.com:9092"]}}]}`))
	f.Add([]byte(`{"tenants":[{"name":"a"},{"name":"b","policy":{"config_keys":["*"]}}]}`))
	f.Add([]byte(`{"tenants":[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := ParseTenants(b)
		if err != nil {
			return
		}
		for _, n := range ts.Names() {
			p := ts.Policy(n)
			if err := p.validate(configKeys()); err != nil {
				t.Fatalf("accepted policy of %q fails validation: %v", n, err)
			}
			_ = p.CheckHost("a.example.com:9092")
		}
		if _, err := ParseTenants(b); err != nil {
			t.Fatalf("second parse: %v", err)
		}
	})
}

// TestSecurityDocExampleParses keeps the tenants file of docs/SECURITY.md
// true: its example is accepted, policy and all.
func TestSecurityDocExampleParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "reads the tenants file, JSON:\n\n```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/SECURITY.md has no tenants file example")
	}
	ts, err := ParseTenants([]byte(example))
	if err != nil {
		t.Fatalf("the example of docs/SECURITY.md: %v", err)
	}
	if p := ts.Policy("analytics"); len(p.ConfigKeys) == 0 || len(p.ConnectorHosts) == 0 {
		t.Fatalf("the example's policy: %+v", p)
	}
}

// tenantsFileOf is a tenants file of n tenants with one token each and a
// policy, and the tokens.
func tenantsFileOf(n int) ([]byte, []string) {
	var b strings.Builder
	toks := make([]string, n)
	b.WriteString(`{"tenants":[`)
	for i := range n {
		toks[i] = NewToken()
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"t%d","token_sha256":["%s"],"quotas":{"slots":4},"policy":{"config_keys":["execution.checkpointing.*","sandbox.clock=wall"],"connectors":["text","collect"]}}`, i, HashToken(toks[i]))
	}
	b.WriteString("]}")
	return []byte(b.String()), toks
}

// BenchmarkLookup is the path every client call takes: one atomic load,
// then every hash compared in constant time.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 1000} {
		f, toks := tenantsFileOf(n)
		ts, err := ParseTenants(f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint(n, "-tenants"), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := ts.Lookup(toks[i%n]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReload is what SIGHUP costs the JobManager: parse, check and
// swap in a file of 1000 tenants.
func BenchmarkReload(b *testing.B) {
	f, _ := tenantsFileOf(1000)
	live, err := ParseTenants(f)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		next, err := ParseTenants(f)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := live.Replace(next); err != nil {
			b.Fatal(err)
		}
	}
}
