package exchange

import (
	"crypto/tls"
	"net"
)

// tlsBatch is how many bytes of frames tlsConn hands crypto/tls at once,
// which cuts them into records of up to 16 KiB.
const tlsBatch = 64 << 10

// tlsConn is a data connection over TLS. net.Buffers.WriteTo writes each
// buffer by itself to anything but a plain socket, and crypto/tls makes a
// record and a system call of every Write, so each 9-byte frame header
// would cost one; writeBuffers copies a batch of frames into few Writes
// instead.
type tlsConn struct {
	*tls.Conn
	scratch []byte
}

// writeBuffers writes bufs to nc: one vectored write on a socket, few
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
				if _, err := tc.Write(out); err != nil {
					return err
				}
				out = out[:0]
			}
		}
	}
	if len(out) > 0 {
		if _, err := tc.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// withTLSWrites returns nc as a tlsConn when it is a TLS connection.
func withTLSWrites(nc net.Conn) net.Conn {
	if tc, ok := nc.(*tls.Conn); ok {
		return &tlsConn{Conn: tc}
	}
	return nc
}
