package proctest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
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

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// The binary is built once per test binary, into a directory RunTests
// removes.
var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// RunTests runs the tests (call it from TestMain) and then removes the
// binary Bin built. It returns the exit code for os.Exit.
func RunTests(m *testing.M) int {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// Bin builds the sluice binary once per test binary and returns its path.
// With -short it skips the test.
func Bin(t testing.TB) string {
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
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/sluice")
		cmd.Dir = localtest.ModuleRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// Dir is a directory that lives as long as the test binary (the
// TaskManagers' shared compile cache, inputs made once).
func Dir(t testing.TB) string {
	Bin(t)
	return binDir
}

// Proc is a long-running sluice process (jm or tm).
type Proc struct {
	Name string
	Addr string // the RPC address it printed
	Data string // a TaskManager's data address

	t      testing.TB
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	done   chan struct{}
}

var listenRE = regexp.MustCompile(`(jobmanager|taskmanager) (listening|data port) on (\S+)`)

// StartProc runs `sluice args...` with env added to the test's, waits for
// the addresses it prints, and stops it (SIGTERM) when the test ends.
func StartProc(t testing.TB, env []string, name string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(Bin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, Name: name, cmd: cmd, stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- %s stderr:\n%s", p.Name, tail(p.stderr.String(), 60))
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
				p.Addr = m[3]
			} else {
				p.Data = m[3]
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

// Stop sends SIGTERM and waits for a clean exit (SIGKILL after 15s); an
// unclean exit fails the test.
func (p *Proc) Stop() {
	if !p.Alive() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if st := p.cmd.ProcessState; st != nil && !st.Success() {
			p.t.Errorf("%s exited with %v after SIGTERM:\n%s", p.Name, st, tail(p.stderr.String(), 30))
		}
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("%s did not stop within 15s of SIGTERM", p.Name)
	}
}

// Kill sends SIGKILL: the process gets no chance to say goodbye.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Freeze stops the process with SIGSTOP: it keeps its connections open
// and answers nothing, as a hung or swapped-out machine does. The test's
// cleanup thaws it, so a later Kill or Stop still ends it.
func (p *Proc) Freeze(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze %s: %v", p.Name, err)
	}
	t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGCONT) })
}

// Signal sends sig to the process (SIGHUP to reload a JobManager's
// tenants file, say).
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.Name, err)
	}
}

// Thaw resumes a process Freeze stopped (SIGCONT).
func (p *Proc) Thaw(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("thaw %s: %v", p.Name, err)
	}
}

// Stderr returns what the process wrote to stderr so far (its log).
func (p *Proc) Stderr() string { return p.stderr.String() }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Result is the outcome of one client command.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Sluice runs a client command to completion (4 minutes at most) with env
// added to the test's.
func Sluice(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Bin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("sluice %v: %v", args, err)
	}
	return r
}

// BlobURL is a store for the processes to share: the real MinIO when the
// test command started one (a fresh bucket per test), else a directory. env
// holds the credentials the processes need.
func BlobURL(t testing.TB) (url string, env []string) {
	t.Helper()
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

// Config configures a process cluster.
type Config struct {
	// JMArgs are added to `sluice jm --listen 127.0.0.1:0 --blob URL`.
	JMArgs []string
	// Slots has one entry per TaskManager: its slots.
	Slots []int
	// Env is added to the TaskManagers' and the client commands'
	// environment, not the JobManager's (SLUICE_TOKEN,
	// SLUICE_CLUSTER_SECRET).
	Env []string
	// Token is the token Client uses (the one in Env's SLUICE_TOKEN).
	Token string
	// TLS, when set, is what Client verifies the JobManager with (the
	// processes get their TLS files through JMArgs and Env).
	TLS *tls.Config
}

// Cluster is a JobManager and TaskManagers as separate processes sharing
// one blob store. It is a localtest.Cluster.
type Cluster struct {
	// Env is the client commands' environment: BaseEnv and Config.Env.
	Env []string
	// BaseEnv is SLUICE_JM and the blob store's credentials, without
	// Config.Env (to act as a caller without the cluster's token).
	BaseEnv []string
	// BlobURL is the store the processes share.
	BlobURL string
	JM      *Proc
	TMs     []*Proc // by index, killed ones included

	t      testing.TB
	token  string
	tls    *tls.Config
	jmArgs []string // the JobManager's full command line
	jmEnv  []string // its environment: the blob store's credentials
	extra  []string // Config.Env

	mu    sync.Mutex
	cl    *client.Client
	store blob.Store
}

var _ localtest.Cluster = (*Cluster)(nil)

// Start starts a JobManager with jmArgs and one TaskManager per entry of
// slots, and waits until every slot is registered and free.
func Start(t testing.TB, jmArgs []string, slots ...int) *Cluster {
	t.Helper()
	return StartConfig(t, Config{JMArgs: jmArgs, Slots: slots})
}

// StartConfig starts the cluster cfg describes and waits until every slot
// is registered and free. Everything stops when the test ends.
func StartConfig(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	url, env := BlobURL(t)
	c := &Cluster{t: t, BlobURL: url, token: cfg.Token, tls: cfg.TLS, jmEnv: env, extra: cfg.Env,
		jmArgs: append([]string{"jm", "--listen", "127.0.0.1:0", "--blob", url}, cfg.JMArgs...)}
	c.startJobManager("jm")
	total := 0
	for _, n := range cfg.Slots {
		c.StartTaskManager(n)
		total += n
	}
	localtest.WaitSlots(t, c, total)
	return c
}

// startJobManager starts the JobManager and points the client commands
// and later TaskManagers at it.
func (c *Cluster) startJobManager(name string) {
	c.t.Helper()
	jm := StartProc(c.t, c.jmEnv, name, c.jmArgs...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.JM = jm
	c.BaseEnv = append(append([]string{}, c.jmEnv...), "SLUICE_JM="+jm.Addr)
	c.Env = append(append([]string{}, c.BaseEnv...), c.extra...)
	c.cl = nil
}

// ReplaceJobManager kill -9s the JobManager (if it still runs) and starts
// a new one with the same flags and blob store, on a new address: what an
// operator does after losing it, without HA. It knows none of the old
// one's jobs, and TaskManagers started before still look for the old
// address: kill them and start new ones.
func (c *Cluster) ReplaceJobManager() {
	c.t.Helper()
	c.JM.Kill()
	c.startJobManager(fmt.Sprintf("jm-%d", time.Now().UnixNano()%1e6))
}

// Addr is the JobManager's address.
func (c *Cluster) Addr() string { return c.JM.Addr }

// Client returns a client of the JobManager with the cluster's token (made
// once).
func (c *Cluster) Client() *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == nil {
		var opts []client.Option
		if c.token != "" {
			opts = append(opts, client.WithToken(c.token))
		}
		if c.tls != nil {
			opts = append(opts, client.WithTLS(c.tls))
		}
		cl, err := client.New(c.JM.Addr, opts...)
		if err != nil {
			c.t.Fatal(err)
		}
		c.cl = cl
	}
	return c.cl
}

// Blob opens the processes' store from the test process (once).
func (c *Cluster) Blob() blob.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store != nil {
		return c.store
	}
	tg, err := blob.ParseURL(c.BlobURL)
	if err != nil {
		c.t.Fatal(err)
	}
	if tg.S3 != nil {
		s3 := testutil.RequireS3(c.t)
		tg.S3.AccessKey, tg.S3.SecretKey = s3.AccessKey, s3.SecretKey
		c.store, err = blob.OpenS3(context.Background(), *tg.S3)
	} else {
		c.store, err = blob.OpenFS(context.Background(), *tg.FS)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	s := c.store
	c.t.Cleanup(func() { s.Close() })
	return s
}

// StartTaskManager starts a `sluice tm` with slots slots, caching
// modules in the directory every TaskManager of the test binary shares;
// see localtest.Cluster.
func (c *Cluster) StartTaskManager(slots int) int {
	c.t.Helper()
	return c.StartTaskManagerCache(slots, filepath.Join(Dir(c.t), "cache"))
}

// StartTaskManagerCache is StartTaskManager with its own module cache
// directory: an empty one gives a TaskManager that compiles every module
// cold.
func (c *Cluster) StartTaskManagerCache(slots int, cacheDir string) int {
	c.t.Helper()
	c.mu.Lock()
	n := len(c.TMs)
	c.mu.Unlock()
	p := StartProc(c.t, c.Env, fmt.Sprintf("tm%d", n), "tm", "--listen", "127.0.0.1:0",
		"--slots", fmt.Sprint(slots), "--blob", c.BlobURL, "--cache-dir", cacheDir)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.TMs = append(c.TMs, p)
	return len(c.TMs) - 1
}

// KillTaskManager kill -9s TaskManager i; see localtest.Cluster.
func (c *Cluster) KillTaskManager(i int) {
	c.t.Helper()
	c.mu.Lock()
	ok := i >= 0 && i < len(c.TMs)
	c.mu.Unlock()
	if !ok {
		c.t.Fatalf("no task manager %d", i)
	}
	c.TMs[i].Kill()
}

// TaskManagerAddrs returns the TaskManagers' addresses; see
// localtest.Cluster.
func (c *Cluster) TaskManagerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.TMs))
	for i, p := range c.TMs {
		if p.Alive() {
			out[i] = p.Addr
		}
	}
	return out
}

// Run runs a client command with the cluster's environment.
func (c *Cluster) Run(args ...string) Result {
	c.t.Helper()
	return Sluice(c.t, c.Env, args...)
}

// jsonCmd runs a client command that prints JSON and decodes it into v.
func (c *Cluster) jsonCmd(v any, args ...string) {
	c.t.Helper()
	r := c.Run(args...)
	if r.Code != 0 {
		c.t.Fatalf("sluice %v: exit %d: %s", args, r.Code, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
		c.t.Fatalf("sluice %v: %v\n%s", args, err, r.Stdout)
	}
}

// Overview reads the cluster overview through `sluice overview --json`.
func (c *Cluster) Overview() client.Overview {
	c.t.Helper()
	var ov client.Overview
	c.jsonCmd(&ov, "overview", "--json")
	return ov
}

// Status reads a job's details through `sluice status --json`.
func (c *Cluster) Status(id string) client.JobDetails {
	c.t.Helper()
	var d client.JobDetails
	c.jsonCmd(&d, "status", "--json", id)
	return d
}

// Jobs lists the jobs through `sluice list --json`.
func (c *Cluster) Jobs() []client.JobSummary {
	c.t.Helper()
	var js []client.JobSummary
	c.jsonCmd(&js, "list", "--json")
	return js
}

// Checkpoints lists a job's checkpoints through `sluice checkpoints --json`.
func (c *Cluster) Checkpoints(id string) []client.Checkpoint {
	c.t.Helper()
	var cps []client.Checkpoint
	c.jsonCmd(&cps, "checkpoints", "--json", id)
	return cps
}

// Submit runs `sluice run --detached` at parallelism p and returns the job
// id.
func (c *Cluster) Submit(p int, module string, args ...string) string {
	c.t.Helper()
	cmd := []string{"run", "--detached", "--blob", c.BlobURL, "-p", fmt.Sprint(p), module}
	if len(args) > 0 {
		cmd = append(append(cmd, "--"), args...)
	}
	r := c.Run(cmd...)
	if r.Code != 0 {
		c.t.Fatalf("sluice run --detached: exit %d: %s", r.Code, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

// CPUTime is the CPU time (user + system) the process has used so far,
// read from /proc/<pid>/stat (Linux only: ok is false elsewhere).
func (p *Proc) CPUTime() (d time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are fields 14 and 15 of the line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, false
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ: 100 on every Linux Go supports
	return time.Duration(ut+st) * time.Second / ticks, true
}
