package auth

import (
	"regexp"
	"strings"
	"testing"
)

func TestParseTenantsAndLookup(t *testing.T) {
	ta, tb := NewToken(), NewToken()
	if !regexp.MustCompile(`^slc_[A-Za-z0-9_-]{43}$`).MatchString(ta) || ta == tb {
		t.Fatalf("tokens %q %q", ta, tb)
	}
	f := `{"tenants":[{"name":"a","token_sha256":["` + HashToken(ta) + `","` + strings.ToUpper(HashToken("old")) + `"],"quotas":{"slots":4,"running_jobs":2,"call_timeout_ms":1500,"cpu_weight":3,"fuel_per_second":1000000,"call_fuel":5000}},
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
		q.CPUWeight != 3 || q.FuelPerSecond != 1_000_000 || q.CallFuel != 5000 {
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
