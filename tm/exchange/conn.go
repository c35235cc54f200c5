package exchange

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// conn is one data connection between two Managers. The dialing side
// (outbound) is the producer side: it opens channels and sends BUFFER and
// EVENT frames; the accepting side (inbound) is the consumer side: it grants
// and returns credits. Each conn has a read loop and a write loop; frames to
// send are queued (never more than the credits granted, plus control frames)
// and written in batches with writev.
type conn struct {
	m       *Manager
	nc      net.Conn
	peer    string
	inbound bool
	recvMax int // largest BUFFER payload accepted
	sendMax int // largest BUFFER payload the peer accepts

	wake chan struct{} // cap 1: the write loop has work
	done chan struct{} // closed when the conn failed

	mu       sync.Mutex
	queue    []outFrame
	closing  bool // an ERROR frame is queued; the write loop fails the conn after it
	closeErr error
	dead     bool
	err      error
	nextID   uint32
	outs     map[uint32]*outputChannel // producer side
	ins      map[uint32]*inputChannel  // consumer side
}

type outFrame struct {
	hdr     [headerSize]byte
	payload []byte // a pooled buffer when recycle, else owned
	recycle bool
	small   [9]byte // payload of CREDIT and EVENT frames, to avoid allocating
	smallN  int8
}

func newConn(m *Manager, nc net.Conn, inbound bool, recvMax int) *conn {
	return &conn{
		m: m, nc: nc, peer: nc.RemoteAddr().String(), inbound: inbound,
		recvMax: recvMax, sendMax: recvMax,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		outs: make(map[uint32]*outputChannel),
		ins:  make(map[uint32]*inputChannel),
	}
}

func (c *conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// enqueue queues a frame for the write loop. It never blocks. It fails
// (recycling payload) when the conn is dead or closing.
func (c *conn) enqueue(typ byte, ch uint32, payload []byte, recycle bool) error {
	c.mu.Lock()
	if c.dead || c.closing {
		err := c.err
		if err == nil {
			err = c.closeErr
		}
		c.mu.Unlock()
		if recycle {
			c.m.putBuf(payload)
		}
		return fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.peer, err)
	}
	c.queue = append(c.queue, outFrame{payload: payload, recycle: recycle})
	f := &c.queue[len(c.queue)-1]
	putHeader(f.hdr[:], header{typ, ch, uint32(len(payload))})
	c.mu.Unlock()
	c.signal()
	return nil
}

// enqueueSmall queues a frame whose payload fits in outFrame.small.
func (c *conn) enqueueSmall(typ byte, ch uint32, payload []byte) error {
	c.mu.Lock()
	if c.dead || c.closing {
		err := c.err
		if err == nil {
			err = c.closeErr
		}
		c.mu.Unlock()
		return fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.peer, err)
	}
	c.queue = append(c.queue, outFrame{smallN: int8(len(payload))})
	f := &c.queue[len(c.queue)-1]
	copy(f.small[:], payload)
	putHeader(f.hdr[:], header{typ, ch, uint32(len(payload))})
	c.mu.Unlock()
	c.signal()
	return nil
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) writeLoop() {
	defer c.m.wg.Done()
	var batch []outFrame
	var bufs net.Buffers
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.dead {
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.done:
			}
			c.mu.Lock()
		}
		if c.dead {
			rest := c.queue
			c.queue = nil
			c.mu.Unlock()
			c.recycle(rest)
			return
		}
		batch, c.queue = c.queue, batch[:0]
		closing, closeErr := c.closing, c.closeErr
		c.mu.Unlock()

		bufs = bufs[:0]
		for i := range batch {
			f := &batch[i]
			bufs = append(bufs, f.hdr[:])
			if f.smallN > 0 {
				bufs = append(bufs, f.small[:f.smallN])
			} else if len(f.payload) > 0 {
				bufs = append(bufs, f.payload)
			}
		}
		err := writeBuffers(c.nc, bufs)
		clear(bufs)
		c.recycle(batch)
		clear(batch)
		batch = batch[:0]
		if err != nil {
			c.fail(fmt.Errorf("write: %w", err))
			return
		}
		if closing {
			c.fail(closeErr)
			return
		}
	}
}

func (c *conn) recycle(fs []outFrame) {
	for i := range fs {
		if fs[i].recycle {
			c.m.putBuf(fs[i].payload)
		}
	}
}

// closeWithError sends an ERROR frame carrying err and then closes the
// connection; it is how a protocol violation by the peer ends.
func (c *conn) closeWithError(err error) {
	c.mu.Lock()
	if c.dead || c.closing {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, outFrame{payload: textPayload(err.Error())})
	f := &c.queue[len(c.queue)-1]
	putHeader(f.hdr[:], header{frameError, 0, uint32(len(f.payload))})
	c.closing = true
	c.closeErr = err
	c.mu.Unlock()
	// A peer that does not read must not keep the conn alive.
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.signal()
	c.m.log.Warn("closing data connection", "peer", c.peer, "err", err)
}

// fail ends the connection and every channel on it with err.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead = true
	c.err = err
	outs, ins := c.outs, c.ins
	c.outs, c.ins = nil, nil
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
	cerr := fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.peer, err)
	for _, oc := range outs {
		oc.kill(cerr)
	}
	for _, ic := range ins {
		ic.fail(cerr)
	}
	if (len(outs) > 0 || len(ins) > 0) && !errors.Is(err, ErrManagerClosed) {
		c.m.log.Warn("data connection failed", "peer", c.peer, "channels", len(outs)+len(ins), "err", err)
	}
	c.m.forgetConn(c)
}

func (c *conn) readLoop() {
	defer c.m.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hb [headerSize]byte
	var ctrl [maxControlPayload]byte
	for {
		h, err := readHeader(br, &hb, c.recvMax)
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrProtocol) {
				c.failChannels(err)
				c.closeWithError(err)
				return
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		if h.typ == frameBuffer {
			buf := c.m.getBuf(int(h.length))
			if _, err := io.ReadFull(br, buf); err != nil {
				c.m.putBuf(buf)
				c.fail(fmt.Errorf("read BUFFER payload: %w", err))
				return
			}
			if err := c.handleData(h.channel, item{data: buf}); err != nil {
				c.failChannels(err)
				c.closeWithError(err)
				return
			}
			continue
		}
		p := ctrl[:h.length]
		if _, err := io.ReadFull(br, p); err != nil {
			c.fail(fmt.Errorf("read %s payload: %w", frameName(h.typ), err))
			return
		}
		if err := c.handleControl(h, p); err != nil {
			c.failChannels(err)
			c.closeWithError(err)
			return
		}
	}
}

// failChannels fails the channels of the conn right away, before the
// ERROR frame is flushed, so their tasks see the cause.
func (c *conn) failChannels(err error) {
	c.mu.Lock()
	outs, ins := c.outs, c.ins
	c.outs, c.ins = make(map[uint32]*outputChannel), make(map[uint32]*inputChannel)
	c.mu.Unlock()
	cerr := fmt.Errorf("data connection %s: %w", c.peer, err)
	for _, oc := range outs {
		oc.kill(cerr)
	}
	for _, ic := range ins {
		ic.fail(cerr)
	}
}

func (c *conn) handleData(ch uint32, it item) error {
	if !c.inbound {
		c.m.putBuf(it.data)
		return fmt.Errorf("%w: data frame from the consumer side", ErrProtocol)
	}
	c.mu.Lock()
	ic := c.ins[ch]
	if ic != nil && it.data == nil && it.event.Type == EndOfPartition {
		delete(c.ins, ch) // the producer is done with this channel
	}
	c.mu.Unlock()
	if ic == nil {
		// A channel the consumer closed; frames in flight are dropped.
		c.m.putBuf(it.data)
		return nil
	}
	return ic.deliver(it)
}

func (c *conn) handleControl(h header, p []byte) error {
	if err := validatePayload(h.typ, p); err != nil {
		return err
	}
	switch h.typ {
	case frameError:
		err := fmt.Errorf("the peer closed the connection: %s", p)
		c.fail(err)
		return nil
	case frameClose:
		code, msg, _ := parseClose(p)
		c.mu.Lock()
		oc, ic := c.outs[h.channel], c.ins[h.channel]
		delete(c.outs, h.channel)
		delete(c.ins, h.channel)
		c.mu.Unlock()
		if c.inbound && ic != nil {
			if code == closeWithdraw && ic.g.detach(ic) {
				return nil
			}
			ic.fail(fmt.Errorf("%w: %s", ErrProducerAborted, msg))
		} else if !c.inbound && oc != nil {
			oc.kill(fmt.Errorf("%w: %s", ErrChannelClosed, msg))
		}
		return nil
	}
	if c.inbound {
		switch h.typ {
		case frameOpen:
			o, _ := parseOpen(p)
			return c.handleOpen(h.channel, o)
		case frameEvent:
			ev, _ := parseEvent(p)
			return c.handleData(h.channel, item{event: ev})
		}
	} else {
		switch h.typ {
		case frameCredit:
			n, _ := parseCredit(p)
			c.mu.Lock()
			oc := c.outs[h.channel]
			c.mu.Unlock()
			if oc != nil {
				oc.grant(int(n))
			}
			return nil
		case frameReject:
			code, msg, _ := parseReject(p)
			c.mu.Lock()
			oc := c.outs[h.channel]
			delete(c.outs, h.channel)
			c.mu.Unlock()
			if oc != nil {
				oc.rejected(code, msg)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: unexpected %s frame on the %s side", ErrProtocol, frameName(h.typ), c.side())
}

func (c *conn) side() string {
	if c.inbound {
		return "consumer"
	}
	return "producer"
}

// handleOpen attaches a channel to the consumer's gate, or rejects it.
func (c *conn) handleOpen(ch uint32, o open) error {
	c.mu.Lock()
	_, dup := c.ins[ch]
	c.mu.Unlock()
	if dup {
		return fmt.Errorf("%w: OPEN for channel %d, which is already open", ErrProtocol, ch)
	}
	g := c.m.lookupInput(o.resultID, int(o.consumer))
	if g == nil {
		c.enqueue(frameReject, ch, rejectPayload(rejectNotRegistered,
			fmt.Sprintf("no input for result %q consumer subtask %d on %s", o.resultID, o.consumer, c.m.addr)), false)
		return nil
	}
	ic, err := g.attach(int(o.producer), nil, c, ch)
	if err != nil {
		c.enqueue(frameReject, ch, rejectPayload(rejectInvalid, err.Error()), false)
		return nil
	}
	c.mu.Lock()
	if c.dead || c.closing {
		c.mu.Unlock()
		ic.fail(fmt.Errorf("%w: %s", ErrConnectionLost, c.peer))
		return nil
	}
	c.ins[ch] = ic
	c.mu.Unlock()
	var b [4]byte
	c.enqueueSmall(frameCredit, ch, putU32(b[:], uint32(c.m.cfg.Credits)))
	return nil
}

// openChannel registers a producer channel and sends OPEN for it. The
// answer arrives through oc.grant or oc.rejected.
func (c *conn) openChannel(oc *outputChannel, o open) error {
	c.mu.Lock()
	if c.dead || c.closing {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrConnectionLost, c.peer)
	}
	c.nextID++
	oc.c, oc.id = c, c.nextID
	c.outs[oc.id] = oc
	c.mu.Unlock()
	return c.enqueue(frameOpen, oc.id, o.payload(), false)
}

// closeChannel forgets a channel and, when code is not 0, sends the peer a
// CLOSE with code and msg.
func (c *conn) closeChannel(id uint32, code byte, msg string) {
	c.mu.Lock()
	delete(c.outs, id)
	delete(c.ins, id)
	c.mu.Unlock()
	if code != 0 {
		c.enqueue(frameClose, id, closePayload(code, msg), false)
	}
}

func (c *conn) returnCredit(id uint32, n int) {
	var b [4]byte
	c.enqueueSmall(frameCredit, id, putU32(b[:], uint32(n)))
}

func putU32(b []byte, v uint32) []byte {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return b[:4]
}
