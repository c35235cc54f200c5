package blob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/blob"
)

func TestKeys(t *testing.T) {
	k, err := blob.ForTenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256-" + strings.Repeat("ab", 32)
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if blob.ValidateKey(strings.TrimSuffix(s, "/")) != nil {
			t.Fatalf("%q is not a valid key prefix", s)
		}
		return s
	}
	for got, want := range map[string]string{
		k.Prefix():                      "tenants/acme/",
		k.Modules():                     "tenants/acme/modules/",
		k.Savepoints():                  "tenants/acme/savepoints/",
		must(k.Module(digest)):          "tenants/acme/modules/" + digest + ".wasm",
		must(k.Job("wordcount-1")):      "tenants/acme/jobs/wordcount-1/",
		must(k.Checkpoints("wc")):       "tenants/acme/jobs/wc/checkpoints/",
		must(k.Checkpoint("wc", 42)):    "tenants/acme/jobs/wc/checkpoints/00000000000000000042/",
		must(k.Savepoint("sp_2026.01")): "tenants/acme/savepoints/sp_2026.01/",
		must(k.Results("wc")):           "tenants/acme/results/wc/",
		must(blob.Join("tenants/acme/results/wc/", "part-0/out")): "tenants/acme/results/wc/part-0/out",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if k.Tenant() != "acme" {
		t.Errorf("Tenant() = %q", k.Tenant())
	}
	// Checkpoint numbers list in numeric order.
	c9, _ := k.Checkpoint("wc", 9)
	c10, _ := k.Checkpoint("wc", 10)
	if c9 >= c10 {
		t.Errorf("checkpoint 9 sorts after 10: %q, %q", c9, c10)
	}
	if n, err := blob.ParseCheckpoint("00000000000000000042"); err != nil || n != 42 {
		t.Errorf("ParseCheckpoint = %d, %v", n, err)
	}
	maxCp, _ := k.Checkpoint("wc", ^uint64(0))
	if !strings.Contains(maxCp, "/18446744073709551615/") {
		t.Errorf("max checkpoint = %q", maxCp)
	}

	for _, bad := range []func() error{
		func() error { _, err := blob.ForTenant(""); return err },
		func() error { _, err := blob.ForTenant("Acme"); return err },
		func() error { _, err := blob.ForTenant("a/b"); return err },
		func() error { _, err := blob.ForTenant("-a"); return err },
		func() error { _, err := blob.ForTenant("a-"); return err },
		func() error { _, err := blob.ForTenant(strings.Repeat("a", 64)); return err },
		func() error { _, err := k.Module("sha256-" + strings.Repeat("AB", 32)); return err },
		func() error { _, err := k.Module(digest + "0"); return err },
		func() error { _, err := k.Module("sha512-" + strings.Repeat("ab", 32)); return err },
		func() error { _, err := k.Job(""); return err },
		func() error { _, err := k.Job(".."); return err },
		func() error { _, err := k.Job("a/b"); return err },
		func() error { _, err := k.Job("_x"); return err },
		func() error { _, err := k.Job(strings.Repeat("j", 129)); return err },
		func() error { _, err := k.Savepoint("sp 1"); return err },
		func() error { _, err := k.Results("r\x00"); return err },
		func() error { _, err := blob.Join("tenants/acme", "x"); return err },
		func() error { _, err := blob.Join("tenants/acme/", "../x"); return err },
		func() error { _, err := blob.Join("tenants/acme/", ""); return err },
		func() error { _, err := blob.ParseCheckpoint("42"); return err },
		func() error { _, err := blob.ParseCheckpoint("-0000000000000000042"); return err },
	} {
		if err := bad(); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("got %v, want ErrInvalidKey", err)
		}
	}
	if d := blob.Digest([]byte("abc")); d != "sha256-ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Digest(abc) = %s", d)
	}
	if err := blob.ValidateDigest(blob.Digest(nil)); err != nil {
		t.Error(err)
	}
}
