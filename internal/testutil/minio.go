package testutil

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MinIO is a MinIO server a test started for itself, so that it can stop,
// kill and restart it (the shared server from RequireS3 must stay up).
// It listens on a loopback port and keeps its data in a t.TempDir(); a
// restart reuses both.
type MinIO struct {
	Endpoint  string // 127.0.0.1:port
	AccessKey string
	SecretKey string
	Dir       string // the data directory

	t       testing.TB
	bin     string
	console string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartMinIO starts a private MinIO server from the cached binary the test
// command provides (RequireS3(t).MinIOBin), waits until it is live, and
// stops it when the test ends. Without the binary the test is skipped, or
// fails under CI=true.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	s3 := RequireS3(t)
	if s3.MinIOBin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SLUICE_MINIO_BIN is not set under CI=true: run the tests through `go run ./internal/check`")
		}
		t.Skip("no MinIO binary (SLUICE_MINIO_BIN): run through `go run ./internal/check`")
	}
	dir := t.TempDir()
	m := &MinIO{
		Endpoint:  "127.0.0.1:" + freePort(t),
		AccessKey: "sluiceprivate",
		SecretKey: "sluiceprivate-secret",
		Dir:       filepath.Join(dir, "data"),
		t:         t,
		bin:       s3.MinIOBin,
		console:   "127.0.0.1:" + freePort(t),
		logPath:   filepath.Join(dir, "minio.log"),
	}
	t.Cleanup(m.Stop)
	m.Start()
	return m
}

// freePort returns a loopback port nobody listens on right now.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// Start starts the server (again, on the same port and data directory) and
// waits up to 60s for /minio/health/live and /minio/health/cluster. It fails the test if the server
// does not come up; it does nothing if the server is running.
func (m *MinIO) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		m.t.Fatalf("minio log: %v", err)
	}
	cmd := exec.Command(m.bin, "server", "--quiet", "--address", m.Endpoint, "--console-address", m.console, m.Dir)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and die with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		m.t.Fatalf("start minio: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	m.cmd, m.done = cmd, done

	// /minio/health/live answers 200 as soon as the HTTP server is up,
	// before the object layer is initialised (requests then fail with
	// XMinioServerNotInitialized); /minio/health/cluster answers 200 only
	// once it can serve writes. Wait for both.
	client := &http.Client{Timeout: time.Second}
	ok := func(path string) bool {
		resp, err := client.Get("http://" + m.Endpoint + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ok("/minio/health/live") && ok("/minio/health/cluster") {
			return
		}
		select {
		case <-done:
			m.cmd = nil
			log, _ := os.ReadFile(m.logPath)
			m.t.Fatalf("minio exited while starting:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stopLocked(syscall.SIGKILL)
			log, _ := os.ReadFile(m.logPath)
			m.t.Fatalf("minio not live on %s after 60s:\n%s", m.Endpoint, log)
		}
	}
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10s) and
// waits for it to exit. It does nothing if the server is not running.
func (m *MinIO) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked(syscall.SIGTERM)
}

// Kill kills the server at once (SIGKILL), as a crash would, and waits for
// it to exit.
func (m *MinIO) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked(syscall.SIGKILL)
}

func (m *MinIO) stopLocked(sig syscall.Signal) {
	if m.cmd == nil {
		return
	}
	pgid := m.cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-m.done
	}
	m.cmd = nil
}
