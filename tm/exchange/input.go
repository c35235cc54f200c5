package exchange

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
)

// Batch is one element read from an InputGate: records, or an event.
type Batch struct {
	// Producer is the producer subtask the element came from.
	Producer int
	// Records are the decoded records of one buffer; nil for an event.
	// They alias the buffer, which is recycled by the next call to Next or
	// by Close: copy what must outlive it.
	Records []abi.Record
	// Event is set (Event.Type != 0) when the element is an event.
	Event Event
	// Bytes is the size of the buffer the records came from.
	Bytes int
}

// IsEvent reports whether b is an event rather than records.
func (b Batch) IsEvent() bool { return b.Event.Type != 0 }

// InputGate is the input of one consumer subtask: it merges the channels of
// all producer subtasks of one result. Per channel, elements come out in
// the order they were written; across channels they interleave.
//
// Next and Close may be called from different goroutines (Close unblocks a
// Next); Next must not be called concurrently with itself.
type InputGate struct {
	m       *Manager
	spec    control.InputSpec
	subtask int // the consumer subtask
	key     inputKey

	nextMu sync.Mutex // serializes Next and the release of held by Close
	held   []byte     // buffer behind the last records returned
	heldCh *inputChannel
	recs   []abi.Record
	open   []*inputChannel // scratch of Next: the channels not blocked

	notify      chan struct{} // cap 1: an element arrived or the gate failed
	closedCh    chan struct{}
	creditBatch int

	mu     sync.Mutex
	chans  []*inputChannel
	byProd map[int]*inputChannel
	ended  int // channels whose END_OF_PARTITION was consumed
	rr     int
	err    error
	closed bool
}

// inputChannel is the consumer end of one channel. Its queue never holds
// more than the credits granted, so it never blocks its sender.
type inputChannel struct {
	g        *InputGate
	producer int
	// Exactly one transport: an in-process producer, or a conn.
	local *outputChannel
	c     *conn
	id    uint32

	// guarded by g.mu
	q         []item
	qHead     int
	avail     int  // credits the producer holds, as the consumer counts them
	gotEOP    bool // END_OF_PARTITION received (maybe not consumed yet)
	blocked   bool // held back by Block: Next skips it, its credits wait
	received  int  // elements delivered so far
	maxQueued int  // high-water mark of the queue, for tests

	pending int // consumed credits not yet returned; owned by Next
}

// item is a buffer (data != nil) or an event.
type item struct {
	data  []byte
	event Event
}

// OpenInput registers the input spec describes, of consumer subtask
// subtask, so producers can connect to it, and returns its gate. The gate
// accepts one channel from each of spec.Producers distinct producer
// subtasks and ends after END_OF_PARTITION from all of them. Open inputs before the producers' outputs: a
// producer retries until the input exists, up to Config.RegistrationTimeout.
//
// # Errors
//
// ErrInputExists when the same (result, consumer subtask) is already open,
// ErrManagerClosed, or an invalid spec.
func (m *Manager) OpenInput(ctx context.Context, spec control.InputSpec, subtask int) (*InputGate, error) {
	switch {
	case spec.ResultID == "" || len(spec.ResultID) > maxResultIDLen:
		return nil, fmt.Errorf("open input: result id must have 1 to %d bytes", maxResultIDLen)
	case spec.Producers < 0 || spec.Producers > 1<<20:
		return nil, fmt.Errorf("open input %s: producers %d out of range", spec.ResultID, spec.Producers)
	case subtask < 0 || subtask > 1<<24:
		return nil, fmt.Errorf("open input %s: consumer subtask %d out of range", spec.ResultID, subtask)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g := &InputGate{
		m: m, spec: spec, subtask: subtask,
		key:      inputKey{spec.ResultID, subtask},
		notify:   make(chan struct{}, 1),
		closedCh: make(chan struct{}),
		byProd:   make(map[int]*inputChannel),
		// Half the window: the producer keeps half its credits while the
		// other half is on its way back.
		creditBatch: max(1, m.cfg.Credits/2),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrManagerClosed
	}
	if m.inputs[g.key] != nil {
		return nil, fmt.Errorf("open input %s subtask %d: %w", spec.ResultID, subtask, ErrInputExists)
	}
	m.inputs[g.key] = g
	close(m.regChange)
	m.regChange = make(chan struct{})
	return g, nil
}

func (m *Manager) lookupInput(resultID string, consumer int) *InputGate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inputs[inputKey{resultID, consumer}]
}

// Spec returns the spec the gate was opened with.
func (g *InputGate) Spec() control.InputSpec { return g.spec }

// attach adds the channel of producer, carried by local or by (c, id).
func (g *InputGate) attach(producer int, local *outputChannel, c *conn, id uint32) (*inputChannel, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return nil, fmt.Errorf("input %s subtask %d is closed", g.spec.ResultID, g.subtask)
	case g.byProd[producer] != nil:
		return nil, fmt.Errorf("input %s subtask %d already has a channel from producer subtask %d", g.spec.ResultID, g.subtask, producer)
	case len(g.chans) >= g.spec.Producers:
		return nil, fmt.Errorf("input %s subtask %d expects %d producers and has them all; producer subtask %d is one too many", g.spec.ResultID, g.subtask, g.spec.Producers, producer)
	}
	ic := &inputChannel{g: g, producer: producer, local: local, c: c, id: id, avail: g.m.cfg.Credits}
	g.chans = append(g.chans, ic)
	g.byProd[producer] = ic
	return ic, nil
}

func (g *InputGate) signal() {
	select {
	case g.notify <- struct{}{}:
	default:
	}
}

// deliver queues an element that used one credit. It never blocks.
func (ic *inputChannel) deliver(it item) error {
	g := ic.g
	g.mu.Lock()
	if g.closed || g.err != nil {
		g.mu.Unlock()
		g.m.putBuf(it.data)
		return fmt.Errorf("input %s subtask %d: %w", g.spec.ResultID, g.subtask, ErrChannelClosed)
	}
	if ic.gotEOP {
		g.mu.Unlock()
		g.m.putBuf(it.data)
		return fmt.Errorf("%w: data after END_OF_PARTITION from producer %d", ErrProtocol, ic.producer)
	}
	if ic.avail <= 0 {
		g.mu.Unlock()
		g.m.putBuf(it.data)
		return fmt.Errorf("%w: producer %d sent without credit", ErrProtocol, ic.producer)
	}
	ic.avail--
	ic.received++
	if it.data == nil && it.event.Type == EndOfPartition {
		ic.gotEOP = true
	}
	ic.q = append(ic.q, it)
	if n := len(ic.q) - ic.qHead; n > ic.maxQueued {
		ic.maxQueued = n
	}
	g.mu.Unlock()
	g.signal()
	return nil
}

// detach removes a channel whose producer withdrew its OPEN, so that the
// producer's retry can attach again. It reports false when the channel
// already delivered something (then it cannot be undone).
func (g *InputGate) detach(ic *inputChannel) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ic.received > 0 {
		return false
	}
	if g.byProd[ic.producer] == ic {
		delete(g.byProd, ic.producer)
	}
	if i := slices.Index(g.chans, ic); i >= 0 {
		// A new array: Close may be iterating the old one.
		g.chans = append(g.chans[:i:i], g.chans[i+1:]...)
		g.rr = 0
	}
	return true
}

// fail ends the gate with err unless this channel already delivered all its
// data.
func (ic *inputChannel) fail(err error) {
	g := ic.g
	g.mu.Lock()
	if ic.gotEOP || g.closed || g.err != nil {
		g.mu.Unlock()
		return
	}
	g.err = fmt.Errorf("input %s subtask %d, producer %d: %w", g.spec.ResultID, g.subtask, ic.producer, err)
	g.mu.Unlock()
	g.signal()
}

func (g *InputGate) fail(err error) {
	g.mu.Lock()
	if g.err == nil && !g.closed {
		g.err = fmt.Errorf("input %s subtask %d: %w", g.spec.ResultID, g.subtask, err)
	}
	g.mu.Unlock()
	g.signal()
}

// consumed notes that one credit of ic can go back to its producer. Credits
// are returned in batches of creditBatch, and all of them before Next
// blocks, so a fast consumer announces them at once and a slow one saves
// round trips.
func (ic *inputChannel) consumed() {
	ic.pending++
	if ic.pending >= ic.g.creditBatch {
		ic.g.mu.Lock()
		blocked := ic.blocked
		ic.g.mu.Unlock()
		if !blocked {
			ic.returnCredits()
		}
	}
}

// returnCredits gives the producer of ic its pending credits. Only the
// goroutine calling Next touches pending.
func (ic *inputChannel) returnCredits() {
	n := ic.pending
	if n == 0 {
		return
	}
	ic.pending = 0
	g := ic.g
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	ic.avail += n
	g.mu.Unlock()
	if ic.local != nil {
		ic.local.grant(n)
	} else {
		ic.c.returnCredit(ic.id, n)
	}
}

func (g *InputGate) release() {
	if g.held != nil {
		g.m.putBuf(g.held)
		g.held = nil
		g.heldCh.consumed()
		g.heldCh = nil
	}
	clear(g.recs)
	g.recs = g.recs[:0]
}

// Next returns the next element of any channel, blocking until one arrives.
// END_OF_PARTITION of each producer is returned as an event; after the last
// one, Next returns io.EOF.
//
// # Errors
//
// io.EOF when every producer finished; ctx.Err() when ctx ends;
// ErrGateClosed; a channel or connection failure (ErrProducerAborted,
// ErrConnectionLost, ErrManagerClosed...); abi.ErrMalformedBatch for a
// corrupt buffer. Except for ctx errors, the gate is unusable after an
// error.
func (g *InputGate) Next(ctx context.Context) (Batch, error) {
	g.nextMu.Lock()
	defer g.nextMu.Unlock()
	g.release()
	for {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return Batch{}, ErrGateClosed
		}
		if g.err != nil {
			err := g.err
			g.mu.Unlock()
			return Batch{}, err
		}
		var ic *inputChannel
		n := len(g.chans)
		for i := 0; i < n; i++ {
			c := g.chans[(g.rr+i)%n]
			if !c.blocked && c.qHead < len(c.q) {
				ic = c
				g.rr = (g.rr + i + 1) % n
				break
			}
		}
		if ic == nil {
			if g.ended >= g.spec.Producers {
				g.mu.Unlock()
				return Batch{}, io.EOF
			}
			open := g.open[:0]
			for _, c := range g.chans {
				if !c.blocked {
					open = append(open, c)
				}
			}
			g.open = open
			g.mu.Unlock()
			for _, c := range open {
				c.returnCredits() // before waiting: the producers may be waiting for them
			}
			clear(open)
			select {
			case <-g.notify:
			case <-g.closedCh:
			case <-ctx.Done():
				return Batch{}, ctx.Err()
			}
			continue
		}
		it := ic.q[ic.qHead]
		ic.q[ic.qHead] = item{}
		ic.qHead++
		if ic.qHead == len(ic.q) {
			ic.q, ic.qHead = ic.q[:0], 0
		}
		eop := it.data == nil && it.event.Type == EndOfPartition
		if eop {
			g.ended++
		}
		g.mu.Unlock()

		if it.data == nil {
			if !eop {
				ic.consumed()
			}
			return Batch{Producer: ic.producer, Event: it.event}, nil
		}
		recs, err := decodeBatch(g.recs, it.data)
		g.recs = recs
		g.held, g.heldCh = it.data, ic
		if err != nil {
			err = fmt.Errorf("input %s subtask %d, buffer from producer %d: %w", g.spec.ResultID, g.subtask, ic.producer, err)
			g.fail(err)
			return Batch{}, err
		}
		return Batch{Producer: ic.producer, Records: recs, Bytes: len(it.data)}, nil
	}
}

// Block holds back the channel of producer, for checkpoint barrier
// alignment: until UnblockAll, Next returns none of its elements (they stay
// queued, in order) and the credits of what was consumed from it are not
// returned, so the producer stops once it has used up its credits
// (back-pressure) while the other channels flow on. Blocking a blocked
// channel does nothing.
//
// Block may be called from any goroutine. Call it before the next Next
// after the element that calls for it (a barrier) was returned, so no
// element of the channel after that one slips through.
//
// # Errors
//
// An error when no channel of producer is attached to the gate.
func (g *InputGate) Block(producer int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	ic := g.byProd[producer]
	if ic == nil {
		return fmt.Errorf("input %s subtask %d: block: no channel from producer subtask %d", g.spec.ResultID, g.subtask, producer)
	}
	ic.blocked = true
	return nil
}

// UnblockAll releases every channel Block held back: Next returns their
// queued elements again, and their held credits go back to the producers
// (before Next next waits, or with the next batch of credits). It may be
// called from any goroutine, also while another one waits in Next.
func (g *InputGate) UnblockAll() {
	g.mu.Lock()
	changed := false
	for _, ic := range g.chans {
		changed = changed || ic.blocked
		ic.blocked = false
	}
	g.mu.Unlock()
	if changed {
		g.signal()
	}
}

// Blocked returns the producer subtasks whose channels are blocked.
func (g *InputGate) Blocked() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []int
	for _, ic := range g.chans {
		if ic.blocked {
			out = append(out, ic.producer)
		}
	}
	return out
}

// Close unregisters the input and releases its buffers. Producers that have
// not finished get ErrChannelClosed. Records returned by Next become
// invalid. Close is idempotent.
func (g *InputGate) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	chans := g.chans
	var queued []item
	for _, ic := range chans {
		queued = append(queued, ic.q[ic.qHead:]...)
		ic.q, ic.qHead = nil, 0
	}
	g.mu.Unlock()
	close(g.closedCh)

	g.m.mu.Lock()
	if g.m.inputs[g.key] == g {
		delete(g.m.inputs, g.key)
	}
	g.m.mu.Unlock()

	for _, ic := range chans {
		// gotEOP is stable now: deliver refuses everything once closed.
		if ic.gotEOP {
			if ic.c != nil {
				ic.c.closeChannel(ic.id, 0, "")
			}
			continue
		}
		if ic.local != nil {
			ic.local.kill(fmt.Errorf("%w: input %s subtask %d", ErrChannelClosed, g.spec.ResultID, g.subtask))
		} else {
			ic.c.closeChannel(ic.id, closeAbort, fmt.Sprintf("consumer closed input %s subtask %d", g.spec.ResultID, g.subtask))
		}
	}
	for _, it := range queued {
		g.m.putBuf(it.data)
	}
	g.nextMu.Lock()
	if g.held != nil {
		g.m.putBuf(g.held)
		g.held, g.heldCh = nil, nil
	}
	clear(g.recs)
	g.nextMu.Unlock()
	return nil
}
