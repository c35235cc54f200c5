package testutil

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS is a nats-server with JetStream embedded in the test process, on a
// loopback port with its store in a t.TempDir(). Stop and Start stop it
// and start it again on the same port and store, so a test can take it
// away for a while; the test's cleanup stops it.
type NATS struct {
	URL      string // nats://127.0.0.1:port
	StoreDir string

	t              testing.TB
	port           int
	user, password string

	mu  sync.Mutex
	srv *server.Server
}

// StartNATS starts an embedded nats-server with JetStream and waits until
// it accepts connections.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	return StartNATSUser(t, "", "")
}

// StartNATSUser is StartNATS with a server that admits only user with
// password (neither set: anyone).
func StartNATSUser(t testing.TB, user, password string) *NATS {
	t.Helper()
	p, err := strconv.Atoi(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	n := &NATS{StoreDir: t.TempDir(), t: t, port: p, user: user, password: password}
	n.URL = "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	t.Cleanup(n.Stop)
	n.Start()
	return n
}

// Start starts the server (again), on the same port and store.
func (n *NATS) Start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return
	}
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      n.port,
		JetStream: true,
		StoreDir:  n.StoreDir,
		NoLog:     true,
		NoSigs:    true,
		// The port is reused at once after a Stop.
		ServerName: "sluice-test",
		Username:   n.user,
		Password:   n.password,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		n.t.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		n.t.Fatalf("nats-server on %s did not accept connections in 30s", n.URL)
	}
	n.srv = srv
}

// Stop shuts the server down (its store stays); a stopped server's Stop
// does nothing.
func (n *NATS) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}
