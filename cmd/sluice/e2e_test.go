package main

// Process-level tests: the real `sluice` binary, built once per test binary,
// run as a JobManager and TaskManagers on loopback port 0, and driven by the
// same binary's client commands, as a user would.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	rmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

func TestMain(m *testing.M) { os.Exit(proctest.RunTests(m)) }

var (
	inputOnce sync.Once
	inputPath string
	inputWant []string
)

// wordInput is a generated multi-megabyte text and its coreutils counts,
// made once per test binary.
func wordInput(t *testing.T) (string, []string) {
	inputOnce.Do(func() {
		inputPath = filepath.Join(proctest.Dir(t), "input.txt")
		if err := localtest.GenerateText(inputPath, 3<<20, 7); err != nil {
			t.Fatal(err)
		}
		inputWant = localtest.CoreutilsWordCount(t, inputPath)
	})
	return inputPath, inputWant
}

func moduleDir(t *testing.T, rel string) string {
	return filepath.Join(localtest.ModuleRoot(t), rel)
}

func checkCounts(t *testing.T, want []string, stdout string) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	if d := localtest.Diff(want, localtest.Lines(toBytes(got))); d != "" {
		t.Fatalf("word counts differ from coreutils:\n%s", d)
	}
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestE2EWordCountAcrossTaskManagers: parallelism 4 on two TaskManagers of
// two slots each, so the keyed shuffle crosses the network.
func TestE2EWordCountAcrossTaskManagers(t *testing.T) {
	in, want := wordInput(t)
	c := proctest.Start(t, nil, 2, 2)
	r := c.Run("run", "--blob", c.BlobURL, "-p", "4", moduleDir(t, "examples/wordcount"), "--", "--input", in)
	if r.Code != 0 {
		t.Fatalf("sluice run: exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	checkCounts(t, want, r.Stdout)

	jobs := c.Jobs()
	if len(jobs) != 1 || jobs[0].State != client.StateFinished {
		t.Fatalf("jobs = %+v; want one FINISHED", jobs)
	}
	d := c.Status(jobs[0].ID)
	tms := map[string]bool{}
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			tms[s.TaskManager] = true
		}
	}
	if len(tms) != 2 {
		t.Errorf("subtasks ran on %d task managers (%v); want both", len(tms), tms)
	}
	localtest.WaitSlots(t, c, 4) // every slot back
}

// TestE2EKillTaskManager kills -9 a TaskManager under a running job: the
// JobManager notices within the heartbeat timeout, restarts the job on the
// remaining slots, and the counts are still right.
func TestE2EKillTaskManager(t *testing.T) {
	in, want := wordInput(t)
	const hbTimeout = 3 * time.Second
	c := proctest.Start(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", hbTimeout.String(),
		"--restart-attempts", "3", "--restart-delay", "200ms"}, 2, 2)
	c.StartTaskManager(2) // a spare, so the restart has slots
	localtest.WaitSlots(t, c, 6)

	id := c.Submit(2, moduleDir(t, "local/testdata/slowwc"), "--input", in, "--spin", "40")
	var victim string
	localtest.WaitJob(t, c, id, time.Minute, func(d client.JobDetails) error {
		for _, v := range d.Vertices {
			for _, s := range v.Subtasks {
				if s.State == client.StateRunning && s.TaskManager != "" {
					victim = s.TaskManager
					return nil
				}
			}
		}
		return fmt.Errorf("job %s is %s with no running subtask", id, d.State)
	})
	vi := localtest.TaskManagerIndex(t, c, victim)
	killed := time.Now()
	c.KillTaskManager(vi)

	// The job manager drops the killed task manager.
	localtest.WaitTaskManagers(t, c, 2, hbTimeout+5*time.Second)
	noticed := time.Since(killed)
	t.Logf("job manager dropped the killed task manager after %v (heartbeat timeout %v)", noticed.Round(10*time.Millisecond), hbTimeout)

	d := localtest.WaitTerminal(t, c, id, 3*time.Minute)
	if d.State != client.StateFinished {
		t.Fatalf("job ended %s after losing a task manager: %s", d.State, d.Failure)
	}
	if d.Restarts < 1 {
		t.Errorf("restarts = %d; want at least 1", d.Restarts)
	}
	res, err := c.Client().PollJob(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := localtest.Diff(want, localtest.Lines(res.Records)); diff != "" {
		t.Fatalf("counts after the restart differ from coreutils:\n%s", diff)
	}
}

// TestE2EKillTaskManagerRecoversWithDefaults kill -9s a TaskManager running
// tasks of a job, with a spare TaskManager present and the JobManager's
// default heartbeat and cancel timeouts, and checks that every subtask is
// RUNNING again: the broken data connections fail the job at once, and the
// restart does not wait for cancel confirmations from the dead TaskManager
// (the JobManager's cancel call cannot reach it). It logs the time from
// each kill to all-RUNNING, for BENCHMARKS.md: the spare's module cache
// is the others' (warm) in the first round and empty (cold) in the second.
func TestE2EKillTaskManagerRecoversWithDefaults(t *testing.T) {
	const kills = 3
	c := proctest.Start(t, []string{"--restart-attempts", "20"}, 1, 1)
	id := c.Submit(2, moduleDir(t, "local/testdata/spin"))
	cl := c.Client()
	restarts := 0
	for _, cold := range []bool{false, true} {
		var took []time.Duration
		for range kills {
			localtest.WaitAllRunning(t, c, id, 2*time.Minute)
			// The spare, with the others' module cache or an empty one.
			if cold {
				c.StartTaskManagerCache(1, t.TempDir())
			} else {
				c.StartTaskManager(1)
			}
			testutil.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
				ov, err := cl.Overview(context.Background())
				if err != nil {
					return err
				}
				if ov.SlotsFree < 1 {
					return fmt.Errorf("%d slots free, want the spare's", ov.SlotsFree)
				}
				return nil
			})
			d := localtest.WaitAllRunning(t, c, id, time.Minute)
			subtasks := d.Vertices[0].Subtasks
			victim := localtest.TaskManagerIndex(t, c, subtasks[len(subtasks)-1].TaskManager)
			killed := time.Now()
			c.KillTaskManager(victim)
			d = localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
				if d.Restarts <= restarts {
					return fmt.Errorf("job %s restarted %d times, want more than %d", id, d.Restarts, restarts)
				}
				return localtest.AllRunning(d)
			})
			took = append(took, time.Since(killed))
			restarts = d.Restarts
		}
		slices.Sort(took)
		t.Logf("spare with a cold module cache %v: kill -9 to every subtask RUNNING: median %v of %v", cold, took[len(took)/2].Round(10*time.Millisecond), took)
	}
	if r := c.Run("cancel", id); r.Code != 0 {
		t.Fatalf("sluice cancel: exit %d: %s", r.Code, r.Stderr)
	}
}

// TestE2EFrozenTaskManagerRecovers: a TaskManager stopped with SIGSTOP
// keeps its connections open and answers nothing, so only its missed
// heartbeats reveal it. With default settings the job is RUNNING again on
// the spare after the heartbeat timeout and one restart; the time from the
// freeze is logged (BENCHMARKS.md), not asserted.
func TestE2EFrozenTaskManagerRecovers(t *testing.T) {
	c := proctest.Start(t, []string{"--restart-attempts", "5"}, 1, 1)
	id := c.Submit(2, moduleDir(t, "local/testdata/spin"))
	d := localtest.WaitAllRunning(t, c, id, 2*time.Minute)
	c.StartTaskManager(1)
	localtest.WaitJob(t, c, id, time.Minute, func(client.JobDetails) error {
		if ov := c.Overview(); ov.SlotsFree < 1 {
			return fmt.Errorf("%d slots free, want the spare's", ov.SlotsFree)
		}
		return nil
	})
	subtasks := d.Vertices[0].Subtasks
	frozenAddr := subtasks[len(subtasks)-1].TaskManager
	frozen := localtest.TaskManagerIndex(t, c, frozenAddr)
	froze := time.Now()
	c.TMs[frozen].Freeze(t)
	d = localtest.WaitJob(t, c, id, 2*time.Minute, func(d client.JobDetails) error {
		if d.Restarts < 1 {
			return fmt.Errorf("job %s has not restarted", id)
		}
		return localtest.AllRunning(d)
	})
	took := time.Since(froze)
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			if s.TaskManager == frozenAddr {
				t.Errorf("subtask %s/%d RUNNING on the frozen TaskManager %s", v.Name, s.Index, frozenAddr)
			}
		}
	}
	t.Logf("SIGSTOP of a TaskManager to every subtask RUNNING on the spare: %v (heartbeat timeout 10s)", took.Round(10*time.Millisecond))
	if r := c.Run("cancel", id); r.Code != 0 {
		t.Fatalf("sluice cancel: exit %d: %s", r.Code, r.Stderr)
	}
}

// TestE2EKillTaskManagerNotEnoughSlots: with no spare slots the job fails
// with a clear error instead of hanging.
func TestE2EKillTaskManagerNotEnoughSlots(t *testing.T) {
	in, _ := wordInput(t)
	c := proctest.Start(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--slot-timeout", "3s",
		"--restart-attempts", "2", "--restart-delay", "200ms"}, 2, 2)
	id := c.Submit(4, moduleDir(t, "local/testdata/slowwc"), "--input", in, "--spin", "200")
	localtest.WaitJobState(t, c, id, client.StateRunning, time.Minute)
	c.KillTaskManager(1)
	d := localtest.WaitTerminal(t, c, id, 2*time.Minute) // recovered or failed

	if d.State != client.StateFailed {
		t.Fatalf("job ended %s; want FAILED for lack of slots", d.State)
	}
	if !strings.Contains(strings.ToLower(d.Failure), "slot") {
		t.Errorf("failure does not say slots were missing:\n%s", d.Failure)
	}
	r := c.Run("status", id)
	if !strings.Contains(r.Stdout, "FAILED") || !strings.Contains(r.Stdout, "failure:") {
		t.Errorf("sluice status does not show the failure:\n%s", r.Stdout)
	}
}

// TestE2ECancel: cancel ends every task, frees every slot, and the job
// reads CANCELED.
func TestE2ECancel(t *testing.T) {
	c := proctest.Start(t, nil, 2, 2)
	id := c.Submit(4, moduleDir(t, "local/testdata/spin"))
	localtest.WaitJob(t, c, id, time.Minute, func(d client.JobDetails) error {
		if d.State == client.StateRunning {
			for _, v := range d.Vertices {
				for _, s := range v.Subtasks {
					if s.State == client.StateRunning {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("spin job %s is %s with no running subtask", id, d.State)
	})
	if ov := c.Overview(); ov.SlotsFree != 0 {
		t.Errorf("slots free while p=4 runs on 4 slots: %d", ov.SlotsFree)
	}
	start := time.Now()
	r := c.Run("cancel", id)
	if r.Code != 0 || !strings.Contains(r.Stdout, "CANCELED") {
		t.Fatalf("sluice cancel: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("canceled in %v", time.Since(start).Round(time.Millisecond))
	d := c.Status(id)
	if d.State != client.StateCanceled {
		t.Fatalf("state after cancel = %s", d.State)
	}
	// Every task ended CANCELED, also one whose data connection its
	// peer's cancel broke before its own cancel arrived (as in Flink, a
	// task failing while its job is canceled ends CANCELED).
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			if s.State != "CANCELED" {
				t.Errorf("vertex %s subtask %d: %s after cancel", v.Name, s.Index, s.State)
			}
		}
	}
	localtest.WaitSlots(t, c, 4)
	r = c.Run("status", id)
	if !strings.Contains(r.Stdout, "CANCELED") {
		t.Errorf("sluice status does not say CANCELED:\n%s", r.Stdout)
	}
}

// TestE2ETrap: a guest that traps fails its job, and `sluice status` shows
// the guest's stack trace.
func TestE2ETrap(t *testing.T) {
	c := proctest.Start(t, nil, 2)
	r := c.Run("run", "-p", "1", moduleDir(t, "local/testdata/trap"))
	if r.Code == 0 {
		t.Fatalf("a trapping job exited 0:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "FAILED") {
		t.Errorf("sluice run does not say FAILED:\n%s", r.Stderr)
	}
	jobs := c.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs = %+v", jobs)
	}
	st := c.Run("status", jobs[0].ID)
	for _, want := range []string{"FAILED", "failure:", "explodeOnRecord", "nil map"} {
		if !strings.Contains(st.Stdout, want) {
			t.Errorf("sluice status lacks %q:\n%s", want, st.Stdout)
		}
	}
	localtest.WaitSlots(t, c, 2)
}

// TestE2EBadInput: each bad request gets a clear error and changes nothing.
func TestE2EBadInput(t *testing.T) {
	c := proctest.Start(t, nil, 2)
	notWasm := filepath.Join(t.TempDir(), "job.wasm")
	os.WriteFile(notWasm, []byte("#!/bin/sh\necho not a module\n"), 0o644)

	cases := []struct {
		name string
		args []string
		want string // in stderr, case-insensitive
	}{
		{"not wasm", []string{"run", notWasm}, "invalid module"},
		{"cycle", []string{"run", moduleDir(t, "local/testdata/cycle")}, "cycle"},
		{"parallelism beyond any cluster", []string{"run", "-p", "100000", moduleDir(t, "local/testdata/spin")}, "parallelism"},
		{"unknown job status", []string{"status", "no-such-job"}, "not found"},
		{"unknown job cancel", []string{"cancel", "no-such-job"}, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Run(tc.args...)
			if r.Code == 0 {
				t.Fatalf("exit 0; want an error\nstdout: %s", r.Stdout)
			}
			if !strings.Contains(strings.ToLower(r.Stderr), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.Stderr)
			}
		})
	}
	if jobs := c.Jobs(); len(jobs) != 0 {
		t.Errorf("bad input created jobs: %+v", jobs)
	}

	// A TaskManager with a malformed registration: slots=0, sent by a raw
	// Kitex client.
	rm, err := rmclient.NewClient("resourcemanager", rpcserver.ClientOptions(c.Addr(), rpcserver.ClientConfig{})...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rm.RegisterTaskManager(context.Background(), &resourcemanager.RegisterTaskManagerRequest{
		ResourceId: "evil", RpcAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 0,
	})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), "slots") {
		t.Errorf("registration with slots=0: %v; want INVALID_ARGUMENT about slots", err)
	}
	if ov := c.Overview(); len(ov.TaskManagers) != 1 || ov.SlotsTotal != 2 {
		t.Errorf("the malformed registration changed the cluster: %+v", ov)
	}
}

// TestE2ETenants: `sluice tenant add` makes the tenants file; a JobManager
// with it and a cluster secret runs a TaskManager that has the secret; the
// client commands act only with the right --token / SLUICE_TOKEN.
func TestE2ETenants(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tenants.json")
	token := func(name string, extra ...string) string {
		r := proctest.Sluice(t, nil, append([]string{"tenant", "add", name, "--file", file}, extra...)...)
		m := regexp.MustCompile(`token: (slc_[A-Za-z0-9_-]{43})`).FindStringSubmatch(r.Stdout)
		if r.Code != 0 || m == nil {
			t.Fatalf("tenant add %s: exit %d\n%s%s", name, r.Code, r.Stdout, r.Stderr)
		}
		return m[1]
	}
	ta, tb := token("a", "--running-jobs", "1"), token("b")
	if b, _ := os.ReadFile(file); bytes.Contains(b, []byte(ta)) || bytes.Contains(b, []byte(tb)) {
		t.Fatalf("the tenants file holds a token:\n%s", b)
	}
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("e2e-cluster-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := proctest.StartConfig(t, proctest.Config{
		JMArgs: []string{"--tenants", file, "--secret-file", secretFile},
		Slots:  []int{2},
		Env:    []string{"SLUICE_TOKEN=" + ta, "SLUICE_CLUSTER_SECRET=e2e-cluster-secret-0123456789abcdef"},
		Token:  ta,
	})
	base := c.BaseEnv

	id := c.Submit(1, moduleDir(t, "local/testdata/spin"))
	localtest.WaitJobState(t, c, id, client.StateRunning, time.Minute)
	if r := c.Run("run", "--detached", "--blob", c.BlobURL, moduleDir(t, "local/testdata/spin")); r.Code == 0 || !strings.Contains(r.Stderr, `tenant "a": running jobs quota 1 reached`) {
		t.Errorf("a's second job: exit %d: %s", r.Code, r.Stderr)
	}

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no token", base, nil, "no token"},
		{"wrong token", base, []string{"--token", "slc_wrong"}, "invalid token"},
		{"b's token", base, []string{"--token", tb}, `job "` + id + `" not found`},
		{"b's token in SLUICE_TOKEN", append(append([]string{}, base...), "SLUICE_TOKEN="+tb), nil, `job "` + id + `" not found`},
	} {
		for _, cmd := range [][]string{{"status", id}, {"cancel", id}} {
			r := proctest.Sluice(t, tc.env, append(cmd, tc.args...)...)
			if r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("%s: sluice %v: exit %d, stderr %q; want %q", tc.name, cmd, r.Code, r.Stderr, tc.want)
			}
		}
		if r := proctest.Sluice(t, tc.env, append([]string{"list", "--json"}, tc.args...)...); strings.Contains(r.Stdout, id) {
			t.Errorf("%s: sluice list shows a's job: %s", tc.name, r.Stdout)
		}
	}
	if d := c.Status(id); d.State != client.StateRunning {
		t.Fatalf("a's job is %s after the others' calls", d.State)
	}
	if js := c.Jobs(); len(js) != 1 || js[0].ID != id {
		t.Fatalf("a's list: %+v", js)
	}
	if r := c.Run("cancel", id); r.Code != 0 || !strings.Contains(r.Stdout, "CANCELED") {
		t.Fatalf("a cancels its job: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
}
