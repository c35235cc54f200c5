package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/leader"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// StartEtcd, RequireEtcd, StartEtcdAt and FreeAddr are testutil's, kept
// here so the e2e tests read as one vocabulary.
func StartEtcd(t testing.TB) string { return testutil.StartEtcd(t) }

// RequireEtcd skips the test without SLUICE_ETCD_BIN.
func RequireEtcd(t testing.TB) { testutil.RequireEtcd(t) }

// StartEtcdAt starts etcd serving clients at client (host:port).
func StartEtcdAt(t testing.TB, client string) string { return testutil.StartEtcdAt(t, client) }

// FreeAddr is a loopback address with a port free a moment ago.
func FreeAddr(t testing.TB) string { return testutil.FreeAddr(t) }

var haListenRE = regexp.MustCompile(`jobmanager (standing by|listening on)( \S+)?`)

// HAJobManager is a `sluice jm --ha` process: it stands by until elected,
// and prints its address each time it starts to lead.
type HAJobManager struct {
	*Proc
	mu      sync.Mutex
	leading string // the address it last printed
}

// Leading is the address the JobManager last said it leads on ("" while
// it never led).
func (j *HAJobManager) Leading() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.leading
}

// HACluster is JobManagers with HA on one etcd, and TaskManagers that find
// the leader there. It is a localtest.Cluster whose Addr and Client are
// the current leader's.
type HACluster struct {
	URL     string // etcd://ENDPOINT/CLUSTER
	BlobURL string
	// Env points client commands at the leader through etcd.
	Env []string
	JMs []*HAJobManager
	TMs []*Proc

	t      testing.TB
	target leader.Target
	jmArgs []string

	mu    sync.Mutex
	addr  string
	cl    *client.Client
	store blob.Store
}

var _ localtest.Cluster = (*HACluster)(nil)

// StartHA starts etcd, jms JobManagers with `--ha` and jmArgs, and one
// TaskManager per entry of slots, and waits until a leader has every slot
// registered.
func StartHA(t testing.TB, jms int, jmArgs []string, slots ...int) *HACluster {
	t.Helper()
	c := NewHA(t, StartEtcd(t), jmArgs)
	for range jms {
		c.StartJobManager()
	}
	total := 0
	for _, n := range slots {
		c.StartTaskManager(n)
		total += n
	}
	localtest.WaitSlots(t, c, total)
	return c
}

// NewHA is an HA cluster on the etcd at etcd (which may not run yet),
// with no process started: its JobManagers get jmArgs.
func NewHA(t testing.TB, etcd string, jmArgs []string) *HACluster {
	t.Helper()
	url := "file://" + filepath.ToSlash(t.TempDir())
	c := &HACluster{URL: "etcd://" + etcd + "/test", BlobURL: url, t: t}
	c.target, _ = leader.ParseURL(c.URL)
	c.Env = []string{"SLUICE_JM=" + c.URL}
	c.jmArgs = append([]string{"jm", "--listen", "127.0.0.1:0", "--blob", url, "--ha", c.URL}, jmArgs...)
	return c
}

// StartJobManager starts one more `sluice jm --ha` and waits until it
// stands by (or leads).
func (c *HACluster) StartJobManager() *HAJobManager {
	c.t.Helper()
	j, up := c.startJobManager()
	select {
	case <-up:
	case <-j.done:
		c.t.Fatalf("%s exited at start:\n%s", j.Name, j.Stderr())
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s did not stand by within 60s:\n%s", j.Name, j.Stderr())
	}
	return j
}

// StartJobManagerNoWait starts one more `sluice jm --ha` and returns at
// once (its etcd may not be up).
func (c *HACluster) StartJobManagerNoWait() *HAJobManager {
	c.t.Helper()
	j, _ := c.startJobManager()
	return j
}

// startJobManager starts a JobManager; up is closed once it stands by.
func (c *HACluster) startJobManager() (*HAJobManager, chan struct{}) {
	c.t.Helper()
	cmd := exec.Command(Bin(c.t), c.jmArgs...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	name := fmt.Sprintf("jm%d", len(c.JMs))
	c.mu.Unlock()
	p := &Proc{t: c.t, Name: name, cmd: cmd, stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		p.Stop()
		if c.t.Failed() {
			c.t.Logf("--- %s stderr:\n%s", p.Name, tail(p.stderr.String(), 80))
		}
	})
	j := &HAJobManager{Proc: p}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			m := haListenRE.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			if m[1] == "listening on" {
				j.mu.Lock()
				j.leading = strings.TrimSpace(m[2])
				j.mu.Unlock()
			}
			if first {
				first = false
				close(up)
			}
		}
	}()
	c.mu.Lock()
	c.JMs = append(c.JMs, j)
	c.mu.Unlock()
	return j, up
}

// Leader returns the leader etcd names (waiting up to a minute for one) and
// the JobManager process that leads there.
func (c *HACluster) Leader() (leader.Info, *HAJobManager) {
	c.t.Helper()
	var in leader.Info
	var lead *HAJobManager
	testutil.CheckFor(c.t, time.Minute, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cli, err := leader.Connect(ctx, c.target, nil)
		if err != nil {
			return err
		}
		defer cli.Close()
		if in, err = leader.Current(ctx, cli, c.target); err != nil {
			return err
		}
		c.mu.Lock()
		jms := slices.Clone(c.JMs)
		c.mu.Unlock()
		for _, j := range jms {
			if j.Alive() && j.Leading() == in.Address {
				lead = j
				return nil
			}
		}
		return fmt.Errorf("leader at %s (session %s) is none of the live JobManagers", in.Address, in.Session)
	})
	return in, lead
}

// Addr is the current leader's address.
func (c *HACluster) Addr() string {
	in, _ := c.Leader()
	return in.Address
}

// Client returns a client of the current leader.
func (c *HACluster) Client() *client.Client {
	addr := c.Addr()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == nil || c.addr != addr {
		cl, err := client.New(addr)
		if err != nil {
			c.t.Fatal(err)
		}
		c.cl, c.addr = cl, addr
	}
	return c.cl
}

// Blob opens the processes' store from the test process (once).
func (c *HACluster) Blob() blob.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == nil {
		tg, err := blob.ParseURL(c.BlobURL)
		if err != nil || tg.FS == nil {
			c.t.Fatalf("blob %s: %v", c.BlobURL, errors.Join(err, errors.New("want a file:// store")))
		}
		if c.store, err = blob.OpenFS(context.Background(), *tg.FS); err != nil {
			c.t.Fatal(err)
		}
		s := c.store
		c.t.Cleanup(func() { s.Close() })
	}
	return c.store
}

// StartTaskManager starts a `sluice tm --ha` with slots slots.
func (c *HACluster) StartTaskManager(slots int) int {
	c.t.Helper()
	p := StartProc(c.t, nil, fmt.Sprintf("tm%d", len(c.TMs)), "tm", "--listen", "127.0.0.1:0",
		"--slots", fmt.Sprint(slots), "--blob", c.BlobURL, "--cache-dir", filepath.Join(Dir(c.t), "cache"), "--ha", c.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.TMs = append(c.TMs, p)
	return len(c.TMs) - 1
}

// KillTaskManager kill -9s TaskManager i.
func (c *HACluster) KillTaskManager(i int) { c.TMs[i].Kill() }

// TaskManagerAddrs returns the TaskManagers' addresses ("" for dead ones).
func (c *HACluster) TaskManagerAddrs() []string {
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

// Status reads a job's details through `sluice status --json`.
func (c *HACluster) Status(id string) client.JobDetails {
	c.t.Helper()
	r := c.Run("status", "--json", id)
	var d client.JobDetails
	if r.Code != 0 {
		c.t.Fatalf("sluice status: exit %d: %s", r.Code, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &d); err != nil {
		c.t.Fatalf("sluice status --json: %v\n%s", err, r.Stdout)
	}
	return d
}

// Run runs a client command that finds the leader through etcd.
func (c *HACluster) Run(args ...string) Result {
	c.t.Helper()
	return Sluice(c.t, c.Env, args...)
}
