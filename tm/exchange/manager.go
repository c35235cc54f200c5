package exchange

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// Errors of the exchange. Each is wrapped with context; check them with
// errors.Is.
var (
	// ErrManagerClosed: the Manager was closed.
	ErrManagerClosed = errors.New("data exchange closed")
	// ErrGateClosed: the InputGate was closed.
	ErrGateClosed = errors.New("input gate closed")
	// ErrWriterClosed: the ResultWriter was closed, or finished.
	ErrWriterClosed = errors.New("result writer closed")
	// ErrChannelClosed: the consumer of a channel closed its input before
	// the producer finished.
	ErrChannelClosed = errors.New("consumer closed the channel")
	// ErrProducerAborted: a producer went away before END_OF_PARTITION.
	ErrProducerAborted = errors.New("producer aborted the channel")
	// ErrConsumerNotFound: a consumer did not open its input within
	// Config.RegistrationTimeout.
	ErrConsumerNotFound = errors.New("consumer input not found")
	// ErrInputExists: OpenInput for a (result, consumer subtask) that is
	// already open on this Manager.
	ErrInputExists = errors.New("input already open")
	// ErrNoKey: a record without a key on a hash-partitioned output.
	ErrNoKey = errors.New("record has no key on a hash-partitioned output")
	// ErrRecordTooLarge: a record does not fit in the largest buffer.
	ErrRecordTooLarge = errors.New("record larger than the max buffer size")
	// ErrHandshake: the remote data port refused the connection (bad
	// token, protocol version) or is not a Sluice data port.
	ErrHandshake = errors.New("data connection handshake failed")
	// ErrConnectionLost: the connection carrying a channel failed.
	ErrConnectionLost = errors.New("data connection lost")
)

type inputKey struct {
	resultID string
	consumer int
}

// Manager is a TaskManager's data exchange: its data port, the inputs its
// consumer subtasks opened, the writers of its producer subtasks and the
// connections to other Managers.
//
// # Notes
//
// Lock order: ResultWriter.mu, Manager.mu, conn.mu, InputGate.mu, then the
// credit lock of an output channel; most paths hold just one. Only
// ResultWriter.mu is held while blocking (a Write waiting for credit, which
// Close interrupts); no lock is held across network I/O.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	ln   net.Listener
	addr string
	free chan []byte     // recycled buffers of cap BufferSize
	ctx  context.Context // canceled by Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	// flushArmed is true while flushLoop is watching for stale buffers; a
	// writer that starts a buffer while it is false wakes the loop through
	// flushWake (cap 1). So an idle Manager has no timer running.
	flushArmed atomic.Bool
	flushWake  chan struct{}

	mu        sync.Mutex
	closed    bool
	inputs    map[inputKey]*InputGate
	regChange chan struct{} // closed and replaced whenever an input opens
	peers     map[string]*peer
	conns     map[*conn]struct{}
	pending   map[net.Conn]struct{} // accepted, in handshake
	writers   map[*ResultWriter]struct{}
}

type peer struct {
	ready chan struct{}
	c     *conn
	err   error
}

// NewManager starts a Manager listening on cfg.ListenAddr.
//
// # Errors
//
// An invalid Config, or an address that cannot be listened on.
func NewManager(ctx context.Context, cfg Config) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on data address %s: %w", cfg.ListenAddr, err)
	}
	if cfg.ServerTLS != nil {
		ln = &tlsListener{Listener: ln, config: cfg.ServerTLS}
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = ln.Addr().String()
	}
	mctx, stop := context.WithCancel(context.Background())
	m := &Manager{
		cfg:       cfg,
		log:       cfg.Logger.With("data_addr", addr),
		ln:        ln,
		addr:      addr,
		free:      make(chan []byte, 256),
		ctx:       mctx,
		stop:      stop,
		inputs:    make(map[inputKey]*InputGate),
		regChange: make(chan struct{}),
		peers:     make(map[string]*peer),
		conns:     make(map[*conn]struct{}),
		pending:   make(map[net.Conn]struct{}),
		writers:   make(map[*ResultWriter]struct{}),
		flushWake: make(chan struct{}, 1),
	}
	m.wg.Add(2)
	go m.acceptLoop()
	go m.flushLoop()
	return m, nil
}

// Addr returns the data address of this Manager: what producers put in
// control.OutputSpec.Targets to reach its inputs.
func (m *Manager) Addr() string { return m.addr }

// Close stops the data port, closes every connection and fails every open
// gate and writer with ErrManagerClosed. It waits for the Manager's
// goroutines to end. Gates and writers still need their own Close.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	conns := make([]*conn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	gates := make([]*InputGate, 0, len(m.inputs))
	for _, g := range m.inputs {
		gates = append(gates, g)
	}
	writers := make([]*ResultWriter, 0, len(m.writers))
	for w := range m.writers {
		writers = append(writers, w)
	}
	for nc := range m.pending {
		nc.Close()
	}
	m.mu.Unlock()

	m.stop()
	err := m.ln.Close()
	for _, c := range conns {
		c.fail(ErrManagerClosed)
	}
	for _, g := range gates {
		g.fail(ErrManagerClosed)
	}
	for _, w := range writers {
		w.failAll(ErrManagerClosed)
	}
	m.wg.Wait()
	for {
		select {
		case <-m.free:
		default:
			if errors.Is(err, net.ErrClosed) {
				err = nil
			}
			return err
		}
	}
}

func (m *Manager) getBuf(n int) []byte {
	if n <= m.cfg.BufferSize {
		select {
		case b := <-m.free:
			return b[:n]
		default:
			return make([]byte, n, m.cfg.BufferSize)
		}
	}
	return make([]byte, n)
}

func (m *Manager) putBuf(b []byte) {
	if cap(b) != m.cfg.BufferSize {
		return // grown for a large record, or not ours
	}
	select {
	case m.free <- b[:0]:
	default:
	}
}

func (m *Manager) acceptLoop() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			// Temporary (e.g. out of file descriptors): wait and retry.
			m.log.Warn("data port accept failed", "err", err)
			select {
			case <-time.After(backoff):
			case <-m.ctx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			nc.Close()
			return
		}
		m.pending[nc] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.serveInbound(nc)
	}
}

// serveInbound runs the consumer side of the handshake on an accepted
// connection, then its read loop.
func (m *Manager) serveInbound(nc net.Conn) {
	// The WaitGroup count taken for this goroutine is released by the read
	// loop, or here on failure.
	c, err := m.acceptHandshake(nc)
	m.mu.Lock()
	delete(m.pending, nc)
	if err == nil && m.closed {
		err = ErrManagerClosed
	}
	if err != nil {
		m.mu.Unlock()
		nc.Close()
		defer m.wg.Done()
		if m.ctx.Err() == nil {
			m.log.Warn("rejected data connection", "peer", nc.RemoteAddr().String(), "err", err)
		}
		return
	}
	m.conns[c] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go c.writeLoop()
	c.readLoop()
}

func (m *Manager) acceptHandshake(nc net.Conn) (*conn, error) {
	nc.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	if tc, ok := nc.(*tlsConn); ok {
		if err := tc.HandshakeContext(m.ctx); err != nil {
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
	}
	var hb [headerSize]byte
	reject := func(err error) (*conn, error) {
		nc.Write(appendFrame(nil, frameError, 0, textPayload(err.Error())))
		return nil, err
	}
	h, err := readHeader(nc, &hb, 0)
	if err != nil {
		err = fmt.Errorf("read HELLO: %w", err)
		if errors.Is(err, ErrProtocol) || errors.Is(err, ErrFrameTooLarge) {
			return reject(err)
		}
		return nil, err
	}
	if h.typ != frameHello {
		return reject(fmt.Errorf("%w: first frame is %s, want HELLO", ErrProtocol, frameName(h.typ)))
	}
	p := make([]byte, h.length)
	if _, err := io.ReadFull(nc, p); err != nil {
		return nil, fmt.Errorf("read HELLO: %w", err)
	}
	hl, err := parseHello(p)
	if err != nil {
		return reject(err)
	}
	if hl.version != protocolVersion {
		return reject(fmt.Errorf("%w: data protocol version %d, this TaskManager speaks %d", ErrHandshake, hl.version, protocolVersion))
	}
	if m.cfg.Authenticate != nil {
		if err := m.cfg.Authenticate(hl.token); err != nil {
			return reject(fmt.Errorf("%w: authentication: %v", ErrHandshake, err))
		}
	}
	ok := helloOK{version: protocolVersion, maxFrame: uint32(m.cfg.MaxBufferSize)}
	if _, err := nc.Write(appendFrame(nil, frameHelloOK, 0, ok.payload())); err != nil {
		return nil, fmt.Errorf("write HELLO_OK: %w", err)
	}
	nc.SetDeadline(time.Time{})
	return newConn(m, nc, true, m.cfg.MaxBufferSize), nil
}

// peerConn returns the connection to the Manager at addr, dialing it (with
// retries until ctx ends) if there is none.
func (m *Manager) peerConn(ctx context.Context, addr string) (*conn, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrManagerClosed
		}
		p := m.peers[addr]
		if p == nil {
			p = &peer{ready: make(chan struct{})}
			m.peers[addr] = p
			m.mu.Unlock()
			c, err := m.dial(ctx, addr)
			m.mu.Lock()
			if err == nil && m.closed {
				c.nc.Close()
				err = ErrManagerClosed
			}
			if err != nil {
				if m.peers[addr] == p {
					delete(m.peers, addr)
				}
				p.err = err
				close(p.ready)
				m.mu.Unlock()
				return nil, err
			}
			p.c = c
			m.conns[c] = struct{}{}
			m.wg.Add(2)
			close(p.ready)
			m.mu.Unlock()
			go c.writeLoop()
			go c.readLoop()
			return c, nil
		}
		m.mu.Unlock()
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if p.err != nil {
			return nil, p.err
		}
		if !p.c.isDead() {
			return p.c, nil
		}
		m.forgetConn(p.c) // and dial again
	}
}

// dial connects to addr and runs the producer side of the handshake,
// retrying refused connections until ctx ends.
func (m *Manager) dial(ctx context.Context, addr string) (*conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	backoff := 5 * time.Millisecond
	var d net.Dialer
	for {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if m.cfg.ClientTLS != nil {
				nc = newTLSConn(nc, func(raw net.Conn) *tls.Conn {
					return tls.Client(raw, m.cfg.ClientTLS(tlsconf.ServerName(addr)))
				})
			}
			c, err := m.dialHandshake(ctx, nc)
			if err != nil {
				nc.Close()
				return nil, fmt.Errorf("data connection to %s: %w", addr, err)
			}
			return c, nil
		}
		if ctx.Err() != nil {
			if m.ctx.Err() != nil {
				return nil, ErrManagerClosed
			}
			return nil, fmt.Errorf("dial data address %s: %w (last error: %v)", addr, ctx.Err(), err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func (m *Manager) dialHandshake(ctx context.Context, nc net.Conn) (*conn, error) {
	deadline := time.Now().Add(m.cfg.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if tc, ok := nc.(*tlsConn); ok {
		// Apart, so a refused certificate reads as such, not as a failed
		// HELLO.
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("%w: tls: %v", ErrHandshake, err)
		}
	}
	hl := hello{version: protocolVersion, token: m.cfg.Token}
	if _, err := nc.Write(appendFrame(nil, frameHello, 0, hl.payload())); err != nil {
		return nil, fmt.Errorf("write HELLO: %w", err)
	}
	var hb [headerSize]byte
	h, err := readHeader(nc, &hb, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: read HELLO_OK: %v", ErrHandshake, err)
	}
	p := make([]byte, h.length)
	if _, err := io.ReadFull(nc, p); err != nil {
		return nil, fmt.Errorf("%w: read HELLO_OK: %v", ErrHandshake, err)
	}
	switch h.typ {
	case frameHelloOK:
	case frameError:
		return nil, fmt.Errorf("%w: the peer said: %s", ErrHandshake, p)
	default:
		return nil, fmt.Errorf("%w: got %s, want HELLO_OK", ErrHandshake, frameName(h.typ))
	}
	ok, err := parseHelloOK(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if !stop() {
		return nil, ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	sendMax := min(int(ok.maxFrame), m.cfg.MaxBufferSize)
	c := newConn(m, nc, false, m.cfg.MaxBufferSize)
	c.sendMax = sendMax
	return c, nil
}

func (m *Manager) forgetConn(c *conn) {
	m.mu.Lock()
	delete(m.conns, c)
	for addr, p := range m.peers {
		if p.c == c {
			delete(m.peers, addr)
		}
	}
	m.mu.Unlock()
}

// armFlush wakes flushLoop if it is not watching already. Writers call it
// with their own mu held after starting a buffer, which is what makes the
// loop's disarm-then-rescan in flushLoop miss no buffer.
func (m *Manager) armFlush() {
	if m.flushArmed.Load() || !m.flushArmed.CompareAndSwap(false, true) {
		return
	}
	select {
	case m.flushWake <- struct{}{}:
	default:
	}
}

// flushLoop sends partly filled buffers that waited FlushTimeout, for
// writers that are idle (a busy writer flushes its own stale buffers). It
// sleeps on one timer set to the earliest such deadline, and on nothing
// at all while no buffer holds records: an idle TaskManager does not wake.
func (m *Manager) flushLoop() {
	defer m.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var ws []*ResultWriter
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.flushWake:
		}
		for {
			next, ok := m.flushDue(&ws)
			if !ok {
				// Disarm, then look once more: a writer that started a
				// buffer before the store is seen by this scan, one that
				// starts after it sees the loop disarmed and wakes it.
				m.flushArmed.Store(false)
				if next, ok = m.flushDue(&ws); !ok {
					break
				}
				m.flushArmed.Store(true)
			}
			timer.Reset(time.Until(next))
			select {
			case <-m.ctx.Done():
				return
			case <-timer.C:
			}
		}
	}
}

// flushDue sends the stale buffers of every writer and returns when the
// next one is due; ok is false when no writer holds unsent records.
func (m *Manager) flushDue(ws *[]*ResultWriter) (next time.Time, ok bool) {
	*ws = (*ws)[:0]
	m.mu.Lock()
	for w := range m.writers {
		*ws = append(*ws, w)
	}
	m.mu.Unlock()
	now := time.Now()
	for _, w := range *ws {
		var due time.Time
		if w.mu.TryLock() {
			due = w.flushDue(now)
			w.mu.Unlock()
		} else {
			// Busy in a Write, which flushes its own stale buffers when it
			// returns, or blocked on credit: look again later.
			due = now.Add(m.cfg.flushRecheck())
		}
		if !due.IsZero() && (!ok || due.Before(next)) {
			next, ok = due, true
		}
	}
	clear(*ws)
	return next, ok
}
