package exchange

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Manager. The zero value of every field means its
// default.
type Config struct {
	// ListenAddr is where the data port listens; default "127.0.0.1:0".
	ListenAddr string
	// AdvertiseAddr is the data address other TaskManagers dial and the one
	// Addr returns; default the listener's address. A target equal to it is
	// served in memory.
	AdvertiseAddr string
	// BufferSize is the size at which a channel's buffer of serialized
	// records is sent; default 32 KiB.
	BufferSize int
	// MaxBufferSize is the largest buffer (frame payload) accepted or sent;
	// a single record larger than this cannot be written. Default 4 MiB.
	MaxBufferSize int
	// Credits is the number of buffers a consumer accepts per channel
	// before the producer must wait; default 8. A channel holds at most
	// Credits buffers in flight, so per-channel memory is bounded by
	// Credits × MaxBufferSize (Credits × BufferSize in practice).
	Credits int
	// FlushTimeout is how long records may wait in a partly filled buffer
	// before it is sent anyway (when the channel has credit); default 5ms.
	FlushTimeout time.Duration
	// RegistrationTimeout bounds how long OpenOutput retries a consumer
	// that is not listening or has not opened its input yet; default 30s.
	RegistrationTimeout time.Duration
	// HandshakeTimeout bounds dialing plus the HELLO exchange; default 10s.
	HandshakeTimeout time.Duration
	// Token is sent in this Manager's HELLO to the Managers it dials.
	Token []byte
	// Authenticate, when set, checks the token of every incoming HELLO; an
	// error rejects the connection (the dialer gets it as an ERROR frame).
	Authenticate func(token []byte) error
	// ServerTLS, when set, makes the data port accept TLS only, with this
	// configuration (tlsconf.Source.ServerConfig with
	// tls.RequireAndVerifyClientCert: only members dial it).
	ServerTLS *tls.Config
	// ClientTLS, when set, makes every connection this Manager dials TLS:
	// it returns the configuration of one connection to a data port that
	// must prove serverName, the host of its address
	// (tlsconf.Source.ClientConfig). Nil means plaintext.
	ClientTLS func(serverName string) *tls.Config
	// Logger receives connection errors; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:0"
	}
	if c.BufferSize == 0 {
		c.BufferSize = 32 << 10
	}
	if c.MaxBufferSize == 0 {
		c.MaxBufferSize = 4 << 20
		if c.MaxBufferSize < c.BufferSize {
			c.MaxBufferSize = c.BufferSize
		}
	}
	if c.Credits == 0 {
		c.Credits = 8
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = 5 * time.Millisecond
	}
	if c.RegistrationTimeout == 0 {
		c.RegistrationTimeout = 30 * time.Second
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.BufferSize < 64:
		return c, fmt.Errorf("exchange config: BufferSize %d is below 64 bytes", c.BufferSize)
	case c.MaxBufferSize < c.BufferSize || c.MaxBufferSize < minMaxBufferSize:
		return c, fmt.Errorf("exchange config: MaxBufferSize %d must be at least BufferSize (%d) and %d", c.MaxBufferSize, c.BufferSize, minMaxBufferSize)
	case c.MaxBufferSize > 1<<30:
		return c, fmt.Errorf("exchange config: MaxBufferSize %d is above 1 GiB", c.MaxBufferSize)
	case c.Credits < 1 || c.Credits > 1<<16:
		return c, fmt.Errorf("exchange config: Credits %d must be in [1, 65536]", c.Credits)
	case c.FlushTimeout < 0 || c.RegistrationTimeout < 0 || c.HandshakeTimeout < 0:
		return c, fmt.Errorf("exchange config: negative timeout")
	case len(c.Token) > maxTokenLen:
		return c, fmt.Errorf("exchange config: Token of %d bytes is above %d", len(c.Token), maxTokenLen)
	}
	return c, nil
}

// flushRecheck is how soon a due buffer that could not be sent (no credit,
// or its writer busy) is looked at again.
func (c Config) flushRecheck() time.Duration {
	return max(c.FlushTimeout/2, 100*time.Microsecond)
}
