package rpcserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/gopkg/bufiox"
	"github.com/cloudwego/kitex/client"
	"github.com/cloudwego/kitex/pkg/endpoint"
	"github.com/cloudwego/kitex/pkg/remote"
	"github.com/cloudwego/kitex/pkg/remote/trans/gonet"
	"github.com/cloudwego/kitex/server"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// Kitex's default transport on Linux, netpoll, reads and writes the socket
// itself and cannot run TLS; its Go-net transport (gonet) works on any
// net.Conn. With TLS both sides switch to it: the server accepts from a
// tls.Listener, the client dials through tlsDialer.

// tlsServerOptions are the server options of a TLS listener on ln; the
// tracker they return closes the listener and the connections on Close.
func tlsServerOptions(ln net.Listener, cfg *tls.Config) ([]server.Option, *connTracker) {
	tr := &connTracker{Listener: tls.NewListener(ln, cfg), conns: make(map[*trackedConn]struct{}), release: make(chan struct{})}
	return []server.Option{
		server.WithListener(tr),
		server.WithTransServerFactory(gonet.NewTransServerFactory()),
		server.WithTransHandlerFactory(gonet.NewSvrTransHandlerFactory()),
		server.WithMiddleware(tr.countCalls),
	}, tr
}

// connTracker is the TLS listener of a Server. Kitex's gonet transport
// neither closes its listener nor its connections when it stops (it only
// waits, up to the exit wait time, for the peers to hang up), so the
// tracker does both, after the calls in flight have ended.
type connTracker struct {
	net.Listener
	inflight atomic.Int64
	release  chan struct{} // closed once the server has stopped

	mu     sync.Mutex
	closed bool
	conns  map[*trackedConn]struct{}
}

// Accept returns the next connection. Once the tracker is closed it holds
// the accept loop until the server has stopped: Kitex takes an accept
// error before its own shutdown began as a failure of the server.
func (t *connTracker) Accept() (net.Conn, error) {
	nc, err := t.Listener.Accept()
	if err != nil {
		t.mu.Lock()
		closed := t.closed
		t.mu.Unlock()
		if closed {
			<-t.release
			return nil, net.ErrClosed
		}
		return nil, err
	}
	c := &trackedConn{Conn: nc, t: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		nc.Close()
		<-t.release
		return nil, net.ErrClosed
	}
	t.conns[c] = struct{}{}
	return c, nil
}

// countCalls is a server middleware that counts the calls in flight.
func (t *connTracker) countCalls(next endpoint.Endpoint) endpoint.Endpoint {
	return func(ctx context.Context, req, resp any) error {
		t.inflight.Add(1)
		defer t.inflight.Add(-1)
		return next(ctx, req, resp)
	}
}

// shutdown stops accepting, waits up to wait for the calls in flight and
// closes every connection.
func (t *connTracker) shutdown(wait time.Duration) {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.Listener.Close()
	deadline := time.Now().Add(wait)
	for t.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // a poll at shutdown, not a wait for a test's state
	}
	t.mu.Lock()
	conns := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// trackedConn is an accepted connection that leaves its tracker when
// closed.
type trackedConn struct {
	net.Conn
	t    *connTracker
	once sync.Once
	err  error
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.err = c.Conn.Close()
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.err
}

// tlsClientOptions are the client options of a TLS client; config gives
// the tls.Config of each connection for the server's name.
func tlsClientOptions(config func(serverName string) *tls.Config) []client.Option {
	return []client.Option{
		client.WithTransHandlerFactory(gonet.NewCliTransHandlerFactory()),
		client.WithDialer(tlsDialer{config: config}),
	}
}

// tlsDialer dials TCP and completes the TLS handshake within the connect
// timeout, so a server that refuses the client's certificate (or a
// plaintext server) fails the dial, not the first call's read.
type tlsDialer struct {
	config func(serverName string) *tls.Config
}

var _ remote.Dialer = tlsDialer{}

func (d tlsDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, d.config(tlsconf.ServerName(address)))
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, explainHandshake(address, err)
	}
	return newBufferedConn(tc), nil
}

// bufferedConn is a client connection in the shape gonet's transport
// reads and writes through: a net.Conn with its own bufiox reader and
// writer (Kitex asserts the Reader and Writer methods). Reads go through
// the reader so nothing it buffered is skipped.
type bufferedConn struct {
	net.Conn
	r         *bufiox.DefaultReader
	w         *bufiox.DefaultWriter
	closeOnce sync.Once
	closeErr  error
}

func newBufferedConn(c net.Conn) *bufferedConn {
	return &bufferedConn{Conn: c, r: bufiox.NewDefaultReader(c), w: bufiox.NewDefaultWriter(c)}
}

// Reader is the buffered reader Kitex decodes from.
func (c *bufferedConn) Reader() *bufiox.DefaultReader { return c.r }

// Writer is the buffered writer Kitex encodes into.
func (c *bufferedConn) Writer() *bufiox.DefaultWriter { return c.w }

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *bufferedConn) Close() error {
	c.closeOnce.Do(func() {
		c.r.Release(nil)
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}

// explainHandshake says what a failed client handshake with addr means and
// what to do about it.
func explainHandshake(addr string, err error) error {
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var he x509.HostnameError
	switch {
	case errors.As(err, &rh):
		return fmt.Errorf("tls handshake with %s: it does not speak TLS (%w): drop the TLS settings or dial a server that has them", addr, err)
	case errors.As(err, &ua), errors.As(err, &ci):
		return fmt.Errorf("tls handshake with %s: its certificate is not one the CA file (--tls-ca) vouches for (%w)", addr, err)
	case errors.As(err, &he):
		return fmt.Errorf("tls handshake with %s: its certificate is for other names (%w): dial a name it holds or pass --tls-server-name", addr, err)
	}
	return fmt.Errorf("tls handshake with %s: %w", addr, err)
}
