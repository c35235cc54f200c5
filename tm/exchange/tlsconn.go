package exchange

import (
	"crypto/tls"
	"net"
	"sync"
)

// tlsBatch is how many bytes of frames tlsConn hands crypto/tls at once;
// it cuts them into records of up to 16 KiB, which go out in one write.
const tlsBatch = 64 << 10

// tlsConn is a data connection over TLS. net.Buffers.WriteTo writes each
// buffer by itself to anything but a plain socket, and crypto/tls makes a
// record and a system call of every Write, so each 9-byte frame header
// would cost one of each; writeBuffers copies a batch of frames into one
// Write, and the socket below holds the records it makes until the batch
// is encrypted.
type tlsConn struct {
	*tls.Conn
	raw     *holdingConn
	scratch []byte
}

func newTLSConn(nc net.Conn, wrap func(net.Conn) *tls.Conn) *tlsConn {
	raw := &holdingConn{Conn: nc}
	return &tlsConn{Conn: wrap(raw), raw: raw}
}

// tlsListener accepts data connections as tlsConns.
type tlsListener struct {
	net.Listener
	config *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newTLSConn(nc, func(raw net.Conn) *tls.Conn { return tls.Server(raw, l.config) }), nil
}

// holdingConn is the socket under a tlsConn: between hold and release its
// writes collect in a buffer, so the records of one batch leave in one
// system call. Writes crypto/tls makes on its own (an alert, a key update
// answer) take the same lock, so they keep their order.
type holdingConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	buf     []byte
}

func (c *holdingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *holdingConn) hold() {
	c.mu.Lock()
	c.holding = true
	c.mu.Unlock()
}

func (c *holdingConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// write hands b to crypto/tls and sends the records it makes at once.
func (tc *tlsConn) write(b []byte) error {
	tc.raw.hold()
	_, err := tc.Write(b)
	if rerr := tc.raw.release(); err == nil {
		err = rerr
	}
	return err
}

// writeBuffers writes bufs to nc: one vectored write on a socket, a few
// large writes on TLS.
func writeBuffers(nc net.Conn, bufs net.Buffers) error {
	tc, ok := nc.(*tlsConn)
	if !ok {
		_, err := bufs.WriteTo(nc)
		return err
	}
	if tc.scratch == nil {
		tc.scratch = make([]byte, 0, tlsBatch)
	}
	out := tc.scratch[:0]
	for _, b := range bufs {
		for len(b) > 0 {
			n := min(len(b), tlsBatch-len(out))
			out = append(out, b[:n]...)
			b = b[n:]
			if len(out) == tlsBatch {
				if err := tc.write(out); err != nil {
					return err
				}
				out = out[:0]
			}
		}
	}
	if len(out) > 0 {
		return tc.write(out)
	}
	return nil
}
