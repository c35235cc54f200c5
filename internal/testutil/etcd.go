package testutil

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartEtcd starts the etcd server SLUICE_ETCD_BIN names (go run
// ./internal/check builds it) on free loopback ports and returns its
// client endpoint; it is stopped when the test ends. Without the variable
// the test is skipped.
func StartEtcd(t testing.TB) string {
	t.Helper()
	RequireEtcd(t)
	return StartEtcdAt(t, FreeAddr(t))
}

// RequireEtcd skips the test without SLUICE_ETCD_BIN.
func RequireEtcd(t testing.TB) {
	t.Helper()
	if os.Getenv("SLUICE_ETCD_BIN") == "" {
		t.Skip("no etcd: set SLUICE_ETCD_BIN to an etcd server binary (go run ./internal/check builds one)")
	}
}

// StartEtcdAt starts etcd serving clients at client (host:port).
func StartEtcdAt(t testing.TB, client string) string {
	t.Helper()
	RequireEtcd(t)
	bin, peer := os.Getenv("SLUICE_ETCD_BIN"), FreeAddr(t)
	cmd := exec.Command(bin, "-data-dir", filepath.Join(t.TempDir(), "etcd"),
		"-listen-client-urls", "http://"+client, "-listen-peer-urls", "http://"+peer)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("etcd exited at start:\n%s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("etcd not ready after 60s:\n%s", stderr.String())
	}
	return client
}

// FreeAddr is a loopback address with a port free a moment ago (etcd takes
// ports, not port 0).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
