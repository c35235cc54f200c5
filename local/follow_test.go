package local_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// TestFollowPrefix: a text source that follows a prefix which is empty at
// submit reads the objects written under it while it runs, each line once,
// across a TaskManager killed mid-run (the job restores from its latest
// checkpoint: the objects it had read are not read again, one written
// while it was down is read once); stop-with-savepoint ends it.
func TestFollowPrefix(t *testing.T) {
	wasm := localtest.Guest(t, "local/testdata/follow")
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 1, JobManager: func(j *jm.Config) {
		j.HeartbeatInterval = 100 * time.Millisecond
		j.HeartbeatTimeout = 3 * time.Second
	}})
	cl := c.Client()
	ctx := context.Background()
	store := c.Blob()
	put := func(name string, from, n int) []string {
		t.Helper()
		var b bytes.Buffer
		var lines []string
		for i := from; i < from+n; i++ {
			l := fmt.Sprintf("%s line %06d", name, i)
			lines = append(lines, l)
			b.WriteString(l + "\n")
		}
		if err := store.Put(ctx, "tenants/"+client.DefaultTenant+"/incoming/"+name, bytes.NewReader(b.Bytes()), int64(b.Len())); err != nil {
			t.Fatal(err)
		}
		return lines
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{jobconfig.KeyCheckpointInterval: "100ms",
		"restart-strategy": "fixeddelay", "restart-strategy.fixed-delay.attempts": "20", "restart-strategy.fixed-delay.delay": "200ms"}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: []string{"--input", "incoming/"}, Parallelism: 1, Config: conf})
	if err != nil {
		t.Fatalf("a followed prefix that names nothing yet is waited for, not refused: %v", err)
	}
	localtest.WaitAllRunning(t, c, id, time.Minute)

	var got []string
	read := func(want int) {
		t.Helper()
		testutil.CheckFor(t, 2*time.Minute, 10*time.Millisecond, func() error {
			r, err := cl.PollRecords(ctx, id, int64(len(got)), time.Second)
			if err != nil {
				return err
			}
			if client.Terminal(r.State) {
				t.Fatalf("the following job ended %s: %s", r.State, r.Failure)
			}
			got = append(got, localtest.Lines(r.Records)...)
			if len(got) < want {
				return fmt.Errorf("read %d lines of %d", len(got), want)
			}
			return nil
		})
	}
	var want []string
	want = append(want, put("a.txt", 0, 1000)...)
	read(len(want))
	want = append(want, put("b.txt", 0, 500)...)
	want = append(want, put("c.txt", 0, 700)...)
	read(len(want))

	d, err := cl.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	victim := localtest.TaskManagerIndex(t, c, d.Vertices[0].Subtasks[0].TaskManager)
	t.Logf("killing task manager %d after %d lines", victim, len(got))
	c.KillTaskManager(victim)
	// Written while the job is down: the restored job must find it.
	want = append(want, put("d.txt", 0, 800)...)
	c.StartTaskManager(1)
	want = append(want, put("e.txt", 0, 300)...)
	read(len(want))

	if _, err := cl.TriggerSavepoint(ctx, id, true, time.Minute); err != nil {
		t.Fatalf("stop-with-savepoint of a waiting following source: %v", err)
	}
	r := localtest.WaitTerminal(t, c, id, time.Minute)
	if r.State != client.StateFinished {
		t.Fatalf("after stop-with-savepoint the job is %s: %s", r.State, r.Failure)
	}
	if r.Restarts == 0 {
		t.Error("the job did not restart after its task manager was killed")
	}
	rest, err := cl.PollRecords(ctx, id, int64(len(got)), 0)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, localtest.Lines(rest.Records)...)
	slices.Sort(got)
	slices.Sort(want)
	if diff := localtest.Diff(want, got); diff != "" {
		t.Fatalf("lines read (%d) differ from lines written (%d): %s", len(got), len(want), diff)
	}
}

// TestFollowBadInterval: a monitor interval below the minimum is refused
// at submit, saying the minimum.
func TestFollowBadInterval(t *testing.T) {
	wasm := localtest.Guest(t, "local/testdata/follow")
	c := localtest.Start(t, local.Config{TaskManagers: 1, Slots: 1})
	cl := c.Client()
	ctx := context.Background()
	if err := c.Blob().Put(ctx, "tenants/"+client.DefaultTenant+"/in/x", strings.NewReader("x\n"), 2); err != nil {
		t.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	for _, every := range []string{"0s", "-1s", "50ms"} {
		_, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: []string{"--input", "in/", "--every", every}, Parallelism: 1})
		if err == nil || !strings.Contains(err.Error(), "at least 100ms") {
			t.Errorf("monitor interval %s: %v, want an error naming the minimum 100ms", every, err)
		}
	}
}
