package main

// Process-level tests: the real `sluice` binary, built once per test binary,
// run as a JobManager and TaskManagers on loopback port 0, and driven by the
// same binary's client commands, as a user would.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	rmclient "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sluiceBin builds the binary once per test binary.
func sluiceBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("process-level test: skipped with -short")
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "sluice-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sluice")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proc is a long-running sluice process (jm or tm).
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	addr   string // the first "listening on" address
	data   string // a TaskManager's data address
	stderr *testutil.SyncBuffer
	done   chan struct{}
}

var listenRE = regexp.MustCompile(`(jobmanager|taskmanager) (listening|data port) on (\S+)`)

// start runs `sluice args...` and waits for the addresses it prints.
func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(sluiceBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- %s stderr:\n%s", p.name, tail(p.stderr.String(), 60))
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	want := 1
	if args[0] == "tm" {
		want = 2
	}
	timeout := time.After(30 * time.Second)
	for got := 0; got < want; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("%s exited before printing its address:\n%s", name, p.stderr.String())
			}
			m := listenRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			got++
			if m[2] == "listening" {
				p.addr = m[3]
			} else {
				p.data = m[3]
			}
		case <-timeout:
			t.Fatalf("%s printed no address within 30s:\n%s", name, p.stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

// stop sends SIGTERM and waits for a clean exit (SIGKILL after 15s).
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if st := p.cmd.ProcessState; st != nil && !st.Success() {
			p.t.Errorf("%s exited with %v after SIGTERM:\n%s", p.name, st, tail(p.stderr.String(), 30))
		}
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("%s did not stop within 15s of SIGTERM", p.name)
	}
}

// kill sends SIGKILL: the process gets no chance to say goodbye.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// result of one client command.
type result struct {
	stdout, stderr string
	code           int
}

// sluice runs a client command to completion.
func sluice(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("sluice %v: %v", args, err)
	}
	return r
}

// testCluster is a JobManager and TaskManagers as separate processes
// sharing one blob store.
type testCluster struct {
	t    *testing.T
	env  []string // SLUICE_JM and blob credentials
	blob string
	jm   *proc
	tms  []*proc
}

// blobURL is the store the processes share: the real MinIO when the test
// command started one (a fresh bucket per test), else a directory.
func blobURL(t *testing.T) (string, []string) {
	if os.Getenv("SLUICE_TEST_S3_ENDPOINT") == "" {
		return "file://" + filepath.ToSlash(t.TempDir()), nil
	}
	s3 := testutil.RequireS3(t)
	bucket := strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-"))
	bucket = strings.Trim(fmt.Sprintf("e2e-%s-%d", bucket, time.Now().UnixNano()%1e6), "-")
	if len(bucket) > 63 {
		bucket = bucket[len(bucket)-63:]
		bucket = strings.TrimLeft(bucket, "-")
	}
	return fmt.Sprintf("s3://%s?endpoint=%s&secure=false&create_bucket=true", bucket, s3.Endpoint),
		[]string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey}
}

func startCluster(t *testing.T, jmArgs []string, slots ...int) *testCluster {
	t.Helper()
	url, env := blobURL(t)
	c := &testCluster{t: t, blob: url}
	c.jm = start(t, env, "jm", append([]string{"jm", "--listen", "127.0.0.1:0", "--blob", url}, jmArgs...)...)
	c.env = append(env, "SLUICE_JM="+c.jm.addr)
	for _, n := range slots {
		c.addTM(n)
	}
	c.waitSlots(sum(slots))
	return c
}

func (c *testCluster) addTM(slots int) *proc {
	c.t.Helper()
	p := start(c.t, c.env, fmt.Sprintf("tm%d", len(c.tms)), "tm", "--listen", "127.0.0.1:0",
		"--slots", fmt.Sprint(slots), "--blob", c.blob, "--cache-dir", filepath.Join(binDirFor(c.t), "cache"))
	c.tms = append(c.tms, p)
	return p
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// overview reads the cluster overview through `sluice overview --json`.
func (c *testCluster) overview() client.Overview {
	c.t.Helper()
	r := sluice(c.t, c.env, "overview", "--json")
	if r.code != 0 {
		c.t.Fatalf("sluice overview: exit %d: %s", r.code, r.stderr)
	}
	var ov client.Overview
	if err := json.Unmarshal([]byte(r.stdout), &ov); err != nil {
		c.t.Fatalf("sluice overview --json: %v\n%s", err, r.stdout)
	}
	return ov
}

func (c *testCluster) waitSlots(total int) {
	c.t.Helper()
	testutil.Eventually(c.t, 30*time.Second, func() bool {
		ov := c.overview()
		return ov.SlotsTotal == total && ov.SlotsFree == total
	}, "cluster never showed %d free slots", total)
}

func (c *testCluster) status(id string) client.JobDetails {
	c.t.Helper()
	r := sluice(c.t, c.env, "status", "--json", id)
	if r.code != 0 {
		c.t.Fatalf("sluice status %s: exit %d: %s", id, r.code, r.stderr)
	}
	var d client.JobDetails
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		c.t.Fatalf("sluice status --json: %v\n%s", err, r.stdout)
	}
	return d
}

func (c *testCluster) jobs() []client.JobSummary {
	c.t.Helper()
	r := sluice(c.t, c.env, "list", "--json")
	if r.code != 0 {
		c.t.Fatalf("sluice list: exit %d: %s", r.code, r.stderr)
	}
	var js []client.JobSummary
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		c.t.Fatalf("sluice list --json: %v\n%s", err, r.stdout)
	}
	return js
}

// submit runs `sluice run --detached` and returns the job id.
func (c *testCluster) submit(p int, module string, args ...string) string {
	c.t.Helper()
	cmd := []string{"run", "--detached", "--blob", c.blob, "-p", fmt.Sprint(p), module}
	if len(args) > 0 {
		cmd = append(append(cmd, "--"), args...)
	}
	r := sluice(c.t, c.env, cmd...)
	if r.code != 0 {
		c.t.Fatalf("sluice run --detached: exit %d: %s", r.code, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

var (
	inputOnce sync.Once
	inputPath string
	inputWant []string
)

// wordInput is a generated multi-megabyte text and its coreutils counts,
// made once per test binary.
func wordInput(t *testing.T) (string, []string) {
	inputOnce.Do(func() {
		inputPath = filepath.Join(binDirFor(t), "input.txt")
		if err := localtest.GenerateText(inputPath, 3<<20, 7); err != nil {
			t.Fatal(err)
		}
		inputWant = localtest.CoreutilsWordCount(t, inputPath)
	})
	return inputPath, inputWant
}

func binDirFor(t *testing.T) string {
	sluiceBin(t)
	return binDir
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
	c := startCluster(t, nil, 2, 2)
	r := sluice(t, c.env, "run", "--blob", c.blob, "-p", "4", moduleDir(t, "examples/wordcount"), "--", "--input", in)
	if r.code != 0 {
		t.Fatalf("sluice run: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	checkCounts(t, want, r.stdout)

	jobs := c.jobs()
	if len(jobs) != 1 || jobs[0].State != client.StateFinished {
		t.Fatalf("jobs = %+v; want one FINISHED", jobs)
	}
	d := c.status(jobs[0].ID)
	tms := map[string]bool{}
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			tms[s.TaskManager] = true
		}
	}
	if len(tms) != 2 {
		t.Errorf("subtasks ran on %d task managers (%v); want both", len(tms), tms)
	}
	c.waitSlots(4) // every slot back
}

// TestE2EKillTaskManager kills -9 a TaskManager under a running job: the
// JobManager notices within the heartbeat timeout, restarts the job on the
// remaining slots, and the counts are still right.
func TestE2EKillTaskManager(t *testing.T) {
	in, want := wordInput(t)
	const hbTimeout = 3 * time.Second
	c := startCluster(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", hbTimeout.String(),
		"--restart-attempts", "3", "--restart-delay", "200ms"}, 2, 2)
	c.addTM(2) // a spare, so the restart has slots
	c.waitSlots(6)

	id := c.submit(2, moduleDir(t, "local/testdata/slowwc"), "--input", in, "--spin", "40")
	var victim string
	testutil.Eventually(t, time.Minute, func() bool {
		d := c.status(id)
		for _, v := range d.Vertices {
			for _, s := range v.Subtasks {
				if s.State == "RUNNING" && s.TaskManager != "" {
					victim = s.TaskManager
					return true
				}
			}
		}
		return false
	}, "job never had a running subtask")
	var vp *proc
	for _, p := range c.tms {
		if strings.Contains(victim, p.addr) || victimMatches(c, victim, p) {
			vp = p
		}
	}
	if vp == nil {
		t.Fatalf("no task manager process matches %q", victim)
	}
	killed := time.Now()
	vp.kill()

	testutil.Eventually(t, hbTimeout+5*time.Second, func() bool {
		return len(c.overview().TaskManagers) == 2
	}, "the job manager never dropped the killed task manager")
	noticed := time.Since(killed)
	t.Logf("job manager dropped the killed task manager after %v (heartbeat timeout %v)", noticed.Round(10*time.Millisecond), hbTimeout)

	var d client.JobDetails
	testutil.Eventually(t, 3*time.Minute, func() bool {
		d = c.status(id)
		return client.Terminal(d.State)
	}, "job did not end after the restart")
	if d.State != client.StateFinished {
		t.Fatalf("job ended %s after losing a task manager: %s", d.State, d.Failure)
	}
	if d.Restarts < 1 {
		t.Errorf("restarts = %d; want at least 1", d.Restarts)
	}
	cl, err := client.New(c.jm.addr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.PollJob(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := localtest.Diff(want, localtest.Lines(res.Records)); diff != "" {
		t.Fatalf("counts after the restart differ from coreutils:\n%s", diff)
	}
}

// victimMatches matches a subtask's task manager (a resource id or an
// address) to a process through the overview.
func victimMatches(c *testCluster, victim string, p *proc) bool {
	for _, tm := range c.overview().TaskManagers {
		if (tm.ResourceID == victim || tm.Address == victim) && tm.Address == p.addr {
			return true
		}
	}
	return false
}

// TestE2EKillTaskManagerNotEnoughSlots: with no spare slots the job fails
// with a clear error instead of hanging.
func TestE2EKillTaskManagerNotEnoughSlots(t *testing.T) {
	in, _ := wordInput(t)
	c := startCluster(t, []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--slot-timeout", "3s",
		"--restart-attempts", "2", "--restart-delay", "200ms"}, 2, 2)
	id := c.submit(4, moduleDir(t, "local/testdata/slowwc"), "--input", in, "--spin", "200")
	testutil.Eventually(t, time.Minute, func() bool { return c.status(id).State == client.StateRunning })
	c.tms[1].kill()
	var d client.JobDetails
	testutil.Eventually(t, 2*time.Minute, func() bool {
		d = c.status(id)
		return client.Terminal(d.State)
	}, "job neither recovered nor failed")
	if d.State != client.StateFailed {
		t.Fatalf("job ended %s; want FAILED for lack of slots", d.State)
	}
	if !strings.Contains(strings.ToLower(d.Failure), "slot") {
		t.Errorf("failure does not say slots were missing:\n%s", d.Failure)
	}
	r := sluice(t, c.env, "status", id)
	if !strings.Contains(r.stdout, "FAILED") || !strings.Contains(r.stdout, "failure:") {
		t.Errorf("sluice status does not show the failure:\n%s", r.stdout)
	}
}

// TestE2ECancel: cancel ends every task, frees every slot, and the job
// reads CANCELED.
func TestE2ECancel(t *testing.T) {
	c := startCluster(t, nil, 2, 2)
	id := c.submit(4, moduleDir(t, "local/testdata/spin"))
	testutil.Eventually(t, time.Minute, func() bool {
		d := c.status(id)
		running := 0
		for _, v := range d.Vertices {
			for _, s := range v.Subtasks {
				if s.State == "RUNNING" {
					running++
				}
			}
		}
		return d.State == client.StateRunning && running > 0
	}, "spin job never ran")
	if ov := c.overview(); ov.SlotsFree != 0 {
		t.Errorf("slots free while p=4 runs on 4 slots: %d", ov.SlotsFree)
	}
	start := time.Now()
	r := sluice(t, c.env, "cancel", id)
	if r.code != 0 || !strings.Contains(r.stdout, "CANCELED") {
		t.Fatalf("sluice cancel: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("canceled in %v", time.Since(start).Round(time.Millisecond))
	d := c.status(id)
	if d.State != client.StateCanceled {
		t.Fatalf("state after cancel = %s", d.State)
	}
	// Every task ended. (A task may read FAILED rather than CANCELED when
	// its peer's cancel broke its data connection before its own cancel
	// arrived; the job is CANCELED either way.)
	for _, v := range d.Vertices {
		for _, s := range v.Subtasks {
			if s.State != "CANCELED" && s.State != "FAILED" {
				t.Errorf("vertex %s subtask %d: %s after cancel", v.Name, s.Index, s.State)
			}
		}
	}
	c.waitSlots(4)
	r = sluice(t, c.env, "status", id)
	if !strings.Contains(r.stdout, "CANCELED") {
		t.Errorf("sluice status does not say CANCELED:\n%s", r.stdout)
	}
}

// TestE2ETrap: a guest that traps fails its job, and `sluice status` shows
// the guest's stack trace.
func TestE2ETrap(t *testing.T) {
	c := startCluster(t, nil, 2)
	r := sluice(t, c.env, "run", "-p", "1", moduleDir(t, "local/testdata/trap"))
	if r.code == 0 {
		t.Fatalf("a trapping job exited 0:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "FAILED") {
		t.Errorf("sluice run does not say FAILED:\n%s", r.stderr)
	}
	jobs := c.jobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs = %+v", jobs)
	}
	st := sluice(t, c.env, "status", jobs[0].ID)
	for _, want := range []string{"FAILED", "failure:", "explodeOnRecord", "nil map"} {
		if !strings.Contains(st.stdout, want) {
			t.Errorf("sluice status lacks %q:\n%s", want, st.stdout)
		}
	}
	c.waitSlots(2)
}

// TestE2EBadInput: each bad request gets a clear error and changes nothing.
func TestE2EBadInput(t *testing.T) {
	c := startCluster(t, nil, 2)
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
			r := sluice(t, c.env, tc.args...)
			if r.code == 0 {
				t.Fatalf("exit 0; want an error\nstdout: %s", r.stdout)
			}
			if !strings.Contains(strings.ToLower(r.stderr), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
			}
		})
	}
	if jobs := c.jobs(); len(jobs) != 0 {
		t.Errorf("bad input created jobs: %+v", jobs)
	}

	// A TaskManager with a malformed registration: slots=0, sent by a raw
	// Kitex client.
	rm, err := rmclient.NewClient("resourcemanager", rpcserver.ClientOptions(c.jm.addr, rpcserver.ClientConfig{})...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rm.RegisterTaskManager(context.Background(), &resourcemanager.RegisterTaskManagerRequest{
		ResourceId: "evil", RpcAddress: "127.0.0.1:1", DataAddress: "127.0.0.1:2", Slots: 0,
	})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), "slots") {
		t.Errorf("registration with slots=0: %v; want INVALID_ARGUMENT about slots", err)
	}
	if ov := c.overview(); len(ov.TaskManagers) != 1 || ov.SlotsTotal != 2 {
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
		r := sluice(t, nil, append([]string{"tenant", "add", name, "--file", file}, extra...)...)
		m := regexp.MustCompile(`token: (slc_[A-Za-z0-9_-]{43})`).FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil {
			t.Fatalf("tenant add %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
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
	url, env := blobURL(t)
	c := &testCluster{t: t, blob: url}
	c.jm = start(t, env, "jm", "jm", "--listen", "127.0.0.1:0", "--blob", url, "--tenants", file, "--secret-file", secretFile)
	base := append(env, "SLUICE_JM="+c.jm.addr)
	c.env = append(append([]string{}, base...), "SLUICE_TOKEN="+ta, "SLUICE_CLUSTER_SECRET=e2e-cluster-secret-0123456789abcdef")
	c.addTM(2)
	c.waitSlots(2)

	id := c.submit(1, moduleDir(t, "local/testdata/spin"))
	testutil.Eventually(t, time.Minute, func() bool { return c.status(id).State == client.StateRunning }, "spin job never ran")
	if r := sluice(t, c.env, "run", "--detached", "--blob", c.blob, moduleDir(t, "local/testdata/spin")); r.code == 0 || !strings.Contains(r.stderr, `tenant "a": running jobs quota 1 reached`) {
		t.Errorf("a's second job: exit %d: %s", r.code, r.stderr)
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
			r := sluice(t, tc.env, append(cmd, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s: sluice %v: exit %d, stderr %q; want %q", tc.name, cmd, r.code, r.stderr, tc.want)
			}
		}
		if r := sluice(t, tc.env, append([]string{"list", "--json"}, tc.args...)...); strings.Contains(r.stdout, id) {
			t.Errorf("%s: sluice list shows a's job: %s", tc.name, r.stdout)
		}
	}
	if d := c.status(id); d.State != client.StateRunning {
		t.Fatalf("a's job is %s after the others' calls", d.State)
	}
	if js := c.jobs(); len(js) != 1 || js[0].ID != id {
		t.Fatalf("a's list: %+v", js)
	}
	if r := sluice(t, c.env, "cancel", id); r.code != 0 || !strings.Contains(r.stdout, "CANCELED") {
		t.Fatalf("a cancels its job: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}
