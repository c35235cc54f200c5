package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
)

// TestE2EJetStreamExactlyOnceAcrossKills: the JetStream pipeline (a
// stream read, a keyed count, an exactly-once JetStream sink) on a
// JobManager and two TaskManager processes; the TaskManager running the
// sink is kill -9ed three times, and the output stream still holds each
// result exactly once.
func TestE2EJetStreamExactlyOnceAcrossKills(t *testing.T) {
	srv := testutil.StartNATS(t)
	c := proctest.Start(t, []string{"--heartbeat-interval", "100ms", "--heartbeat-timeout", "3s"}, 4, 4)
	localtest.CheckJetStreamAcrossTaskManagerKills(t, c, srv.URL, 20_000, 7)
}

// TestE2ERunJobSecret: sluice run --job-secret passes a password from a
// file to a JetStream job on a server that wants one, and neither sluice
// status nor the processes' logs show it.
func TestE2ERunJobSecret(t *testing.T) {
	const user, password = "sluice", "hunter2-c0ffee"
	srv := testutil.StartNATSUser(t, user, password)
	const n, keys = 1000, 3
	js := localtest.JetStreamSetup(t, strings.Replace(srv.URL, "nats://", "nats://"+user+":"+password+"@", 1), n, keys)
	c := proctest.Start(t, nil, 4)
	file := filepath.Join(t.TempDir(), "nats-password")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.Run("run", "--detached", "-p", "2", "--checkpoint-interval", "100ms", "--job-secret", "nats="+file,
		moduleDir(t, localtest.JetStreamGuest), "--", "--url", srv.URL, "--stream", "IN", "--subject", "out.counts",
		"--user", user, "--password-secret", "nats")
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d\n%s", r.Code, r.Stderr)
	}
	id := strings.TrimSpace(r.Stdout)
	t.Cleanup(func() { c.Run("cancel", id) })
	localtest.JetStreamWaitOutput(t, js, n, 2*time.Minute)
	localtest.JetStreamCheck(t, js, n, keys)
	st := c.Run("status", "--json", id)
	if st.Code != 0 {
		t.Fatalf("sluice status: exit %d\n%s", st.Code, st.Stderr)
	}
	if !strings.Contains(st.Stdout, id) || strings.Contains(st.Stdout, password) {
		t.Errorf("sluice status --json %s shows the password, or not the job:\n%s", id, st.Stdout)
	}
	for _, p := range append([]*proctest.Proc{c.JM}, c.TMs...) {
		if strings.Contains(p.Stderr(), password) {
			t.Errorf("a process's log shows the password")
		}
	}
}
