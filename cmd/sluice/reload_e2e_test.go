package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// addTenant runs `sluice tenant add name --file file` and returns the
// new tenant's token.
func addTenant(t *testing.T, file, name string) string {
	t.Helper()
	r := proctest.Sluice(t, nil, "tenant", "add", name, "--file", file)
	m := regexp.MustCompile(`token: (slc_[A-Za-z0-9_-]{43})`).FindStringSubmatch(r.Stdout)
	if r.Code != 0 || m == nil {
		t.Fatalf("tenant add %s: exit %d\n%s%s", name, r.Code, r.Stdout, r.Stderr)
	}
	return m[1]
}

// TestE2EReloadTenantsOnSIGHUP edits the tenants file of a running `sluice
// jm` and sends SIGHUP: a malformed file changes nothing and the log says
// where it is wrong; then a revoked token gets UNAUTHENTICATED on its next
// call, a new tenant runs a job, and a removed tenant's running job is
// canceled with the reason, which `sluice status` shows once the tenant is
// back.
func TestE2EReloadTenantsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tenants.json")
	token := func(name string) string { return addTenant(t, file, name) }
	ta, tb := token("a"), token("b")
	c := proctest.StartConfig(t, proctest.Config{JMArgs: []string{"--tenants", file}, Slots: []int{2}, Env: []string{"SLUICE_TOKEN=" + ta}, Token: ta})
	as := func(tok string, args ...string) proctest.Result {
		return proctest.Sluice(t, c.BaseEnv, append(args, "--token", tok)...)
	}
	// reload sends SIGHUP and waits for the log line that ends the
	// reload (the n-th of either outcome).
	reloads := 0
	reload := func() {
		t.Helper()
		reloads++
		c.JM.Signal(t, syscall.SIGHUP)
		testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
			if n := strings.Count(c.JM.Stderr(), "tenants file reloaded") + strings.Count(c.JM.Stderr(), "tenants file not reloaded"); n < reloads {
				return fmt.Errorf("%d reloads logged, want %d", n, reloads)
			}
			return nil
		})
	}
	spin := moduleDir(t, "local/testdata/spin")
	id := c.Submit(1, spin)
	localtest.WaitJobState(t, c, id, client.StateRunning, time.Minute)

	// A malformed file: nothing changes, the log names the line.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("{\"tenants\": [\n  {\"name\": \"a\",, }\n]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload()
	if log := c.JM.Stderr(); !strings.Contains(log, "tenants file not reloaded: nothing changed") || !strings.Contains(log, "line 2, column") {
		t.Fatalf("the malformed file's log lines:\n%s", log)
	}
	if d := c.Status(id); d.State != client.StateRunning {
		t.Fatalf("a's job is %s after a malformed reload", d.State)
	}
	if r := as(tb, "list"); r.Code != 0 {
		t.Fatalf("b after a malformed reload: exit %d: %s", r.Code, r.Stderr)
	}

	// a removed, b's token replaced, c added.
	var f auth.File
	if err := sonic.ConfigStd.Unmarshal(good, &f); err != nil {
		t.Fatal(err)
	}
	tb2 := auth.NewToken()
	f.Tenants = f.Tenants[1:]
	f.Tenants[0].TokenSHA256 = []string{auth.HashToken(tb2)}
	writeTenants(t, file, f)
	tc := token("c")
	reload()
	if r := as(tb, "list"); r.Code == 0 || !strings.Contains(r.Stderr, "invalid token") {
		t.Errorf("b's revoked token: exit %d: %s", r.Code, r.Stderr)
	}
	if r := as(ta, "status", id); r.Code == 0 || !strings.Contains(r.Stderr, "invalid token") {
		t.Errorf("removed a's token: exit %d: %s", r.Code, r.Stderr)
	}
	if r := as(tb2, "list"); r.Code != 0 {
		t.Errorf("b's new token: exit %d: %s", r.Code, r.Stderr)
	}
	r := as(tc, "run", "--detached", "--blob", c.BlobURL, spin)
	if r.Code != 0 {
		t.Fatalf("new tenant c runs a job: exit %d: %s", r.Code, r.Stderr)
	}
	idC := strings.TrimSpace(r.Stdout)
	if r := as(tc, "run", "--detached", "--blob", c.BlobURL, "-C", "sandbox.clock=wall", spin); r.Code == 0 || !strings.Contains(r.Stderr, `config sandbox.clock="wall": not allowed by the tenant's policy`) {
		t.Errorf("c asks for the wall clock: exit %d: %s", r.Code, r.Stderr)
	}
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		if !strings.Contains(c.JM.Stderr(), "tenant a was removed from the tenants file") {
			return fmt.Errorf("no removal reason in the job manager's log yet")
		}
		return nil
	})

	// a comes back with a new token: its job is CANCELED, and says why.
	ta2 := token("a")
	reload()
	testutil.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		r := as(ta2, "status", id)
		if r.Code != 0 || !strings.Contains(r.Stdout, "CANCELED") {
			return fmt.Errorf("status of a's job: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
		}
		if !strings.Contains(r.Stdout, "tenant a was removed from the tenants file") {
			t.Fatalf("status of a's canceled job does not say why:\n%s", r.Stdout)
		}
		return nil
	})
	if r := as(tc, "cancel", idC); r.Code != 0 {
		t.Errorf("c cancels its job: exit %d: %s", r.Code, r.Stderr)
	}
}

func writeTenants(t *testing.T, path string, f auth.File) {
	t.Helper()
	b, err := sonic.ConfigStd.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestE2EHAReloadTenantsOnSIGHUP: with --ha, SIGHUP reloads the tenants
// file on the leader and on a standby alike (neither process ends), and a
// standby that takes over later serves the reloaded tenants.
func TestE2EHAReloadTenantsOnSIGHUP(t *testing.T) {
	proctest.RequireEtcd(t)
	file := filepath.Join(t.TempDir(), "tenants.json")
	addTenant(t, file, "a")
	c := proctest.NewHA(t, proctest.StartEtcd(t), append([]string{"--tenants", file}, haJMArgs...))
	first, second := c.StartJobManager(), c.StartJobManager()
	_, lead := c.Leader()
	standby := first
	if lead == first {
		standby = second
	}
	tb := addTenant(t, file, "b")
	for _, j := range c.JMs {
		j.Signal(t, syscall.SIGHUP)
	}
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		for _, j := range c.JMs {
			if !j.Alive() {
				return fmt.Errorf("a JobManager ended on SIGHUP:\n%s", j.Stderr())
			}
			if !strings.Contains(j.Stderr(), "tenants file reloaded") {
				return fmt.Errorf("a JobManager has not logged the reload:\n%s", j.Stderr())
			}
		}
		return nil
	})
	asB := func() proctest.Result { return proctest.Sluice(t, c.Env, "list", "--token", tb) }
	if r := asB(); r.Code != 0 {
		t.Fatalf("new tenant b on the leader: exit %d: %s", r.Code, r.Stderr)
	}
	lead.Kill()
	testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if _, j := c.Leader(); j != standby {
			return errors.New("the standby does not lead yet")
		}
		return nil
	})
	if r := asB(); r.Code != 0 {
		t.Fatalf("new tenant b on the standby that took over: exit %d: %s", r.Code, r.Stderr)
	}
}
