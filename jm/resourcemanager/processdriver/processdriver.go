package processdriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// DefaultStopGrace is how long a released TaskManager has between SIGTERM
// and SIGKILL.
const DefaultStopGrace = 10 * time.Second

// Config configures a Driver.
type Config struct {
	// Executable is the sluice binary to run; empty means os.Executable().
	Executable string
	// Args go after "tm" and the driver's own flags (--jm, --slots,
	// --resource-id, --listen): the blob store, the cluster secret file, a
	// cache directory.
	Args []string
	// Env is the children's environment; nil means the JobManager's own
	// (so SLUICE_BLOB and SLUICE_SECRET pass on).
	Env []string
	// LogDir receives one log file per TaskManager, <resource id>.log,
	// with its stdout and stderr. Required.
	LogDir string
	// ListenHost is the host the TaskManagers listen on; empty means
	// 127.0.0.1.
	ListenHost string
	// StopGrace is how long a released TaskManager may take to stop after
	// SIGTERM before it is killed; 0 means DefaultStopGrace.
	StopGrace time.Duration
}

// Driver starts TaskManagers as child processes. Close stops every one
// still running (they belong to this JobManager alone).
type Driver struct {
	cfg Config

	mu    sync.Mutex
	env   resourcemanager.DriverEnv
	log   *slog.Logger
	procs map[string]*proc
	n     int
	pfx   string
	wg    sync.WaitGroup // one per child: its wait goroutine
}

type proc struct {
	cmd      *exec.Cmd
	released bool
	done     chan struct{} // closed when the process exited
}

var _ resourcemanager.Driver = (*Driver)(nil)

// New returns a process Driver.
//
// # Errors
//
// No LogDir, or an executable that cannot be found.
func New(cfg Config) (*Driver, error) {
	if cfg.LogDir == "" {
		return nil, errors.New("process driver: no log directory: set --tm-log-dir")
	}
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("process driver: find the sluice executable: %w (set --tm-executable)", err)
		}
		cfg.Executable = exe
	}
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	return &Driver{cfg: cfg, procs: map[string]*proc{}, pfx: strconv.Itoa(os.Getpid())}, nil
}

// Name returns "process".
func (d *Driver) Name() string { return "process" }

// Initialize checks the executable and the log directory. A JobManager
// that restarts finds no TaskManager of an earlier one: they were its
// children, stopped when it stopped.
//
// # Errors
//
// An executable that is not one, or a log directory that cannot be made.
func (d *Driver) Initialize(_ context.Context, env resourcemanager.DriverEnv) ([]string, error) {
	fi, err := os.Stat(d.cfg.Executable)
	if err != nil {
		return nil, fmt.Errorf("process driver: executable: %w (set --tm-executable)", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("process driver: executable %s is not an executable file (set --tm-executable)", d.cfg.Executable)
	}
	if err := os.MkdirAll(d.cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("process driver: log directory: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.env = env
	d.log = env.Logger
	if d.log == nil {
		d.log = slog.Default()
	}
	return nil, nil
}

// RequestTaskManager starts `sluice tm` with spec.Slots slots, registering
// with the JobManager under the id it returns. spec.MemoryBytes is
// reported, not enforced: the sandbox limits bound a task's memory.
//
// # Errors
//
// The log file or the process could not be created.
func (d *Driver) RequestTaskManager(_ context.Context, spec resourcemanager.ResourceSpec) (string, error) {
	if spec.Slots < 1 {
		return "", fmt.Errorf("process driver: %d slots: need at least 1", spec.Slots)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.env.JobManagerAddress == "" {
		return "", errors.New("process driver: not initialized")
	}
	d.n++
	id := fmt.Sprintf("proc-%s-%d", d.pfx, d.n)
	logPath := filepath.Join(d.cfg.LogDir, id+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("process driver: log file: %w", err)
	}
	args := []string{"tm",
		"--jm", d.env.JobManagerAddress,
		"--slots", strconv.Itoa(spec.Slots),
		"--resource-id", id,
		"--listen", d.cfg.ListenHost + ":0",
	}
	if spec.MemoryBytes > 0 {
		args = append(args, "--memory-bytes", strconv.FormatInt(spec.MemoryBytes, 10))
	}
	args = append(args, d.cfg.Args...)
	// Not CommandContext: the request's context ends when the call does,
	// the TaskManager must outlive it.
	cmd := exec.Command(d.cfg.Executable, args...)
	cmd.Env = d.cfg.Env
	cmd.Stdout, cmd.Stderr = lf, lf
	// Its own process group, so a terminal's ^C to the JobManager does not
	// reach it before the JobManager stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return "", fmt.Errorf("process driver: start %s: %w", d.cfg.Executable, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	d.procs[id] = p
	d.wg.Add(1)
	go d.wait(id, p, lf)
	d.log.Info("started task manager process", "tm", id, "pid", cmd.Process.Pid, "slots", spec.Slots, "log", logPath)
	return id, nil
}

// wait reaps a child and, unless it was released, reports it terminated.
func (d *Driver) wait(id string, p *proc, lf *os.File) {
	defer d.wg.Done()
	err := p.cmd.Wait()
	lf.Close()
	d.mu.Lock()
	delete(d.procs, id)
	released := p.released
	onTerm := d.env.OnTerminated
	d.mu.Unlock()
	// After the delete: who waited on done sees it gone from Running.
	close(p.done)
	if released {
		return
	}
	reason := "process exited"
	if err != nil {
		reason = "process exited: " + err.Error()
	}
	d.log.Warn("task manager process ended", "tm", id, "reason", reason, "log", filepath.Join(d.cfg.LogDir, id+".log"))
	if onTerm != nil {
		onTerm(id, reason)
	}
}

// ReleaseTaskManager stops a TaskManager: SIGTERM, then SIGKILL after the
// grace period. It returns once the process exited or ctx ended.
//
// # Errors
//
// ctx ended before the process exited.
func (d *Driver) ReleaseTaskManager(ctx context.Context, id string) error {
	d.mu.Lock()
	p, ok := d.procs[id]
	if ok {
		p.released = true
	}
	d.mu.Unlock()
	if !ok {
		return nil
	}
	return d.stop(ctx, id, p)
}

func (d *Driver) stop(ctx context.Context, id string, p *proc) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // fails only when it already exited
	t := time.NewTimer(d.cfg.StopGrace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		d.log.Warn("task manager process did not stop in time: killing it", "tm", id, "grace", d.cfg.StopGrace)
		_ = p.cmd.Process.Kill()
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("process driver: stop %s: %w", id, ctx.Err())
	}
	<-p.done
	return nil
}

// Close stops every TaskManager still running and waits for them.
//
// # Errors
//
// ctx ended before they all exited (they are killed then).
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	ps := make(map[string]*proc, len(d.procs))
	for id, p := range d.procs {
		p.released = true
		ps[id] = p
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(ps))
	var emu sync.Mutex
	for id, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.stop(ctx, id, p); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	d.wg.Wait()
	return errors.Join(errs...)
}

// Running returns how many TaskManager processes run.
func (d *Driver) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.procs)
}
