package exchange

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
)

// ResultWriter is the output of one producer subtask: it partitions records
// into per-channel buffers and sends them with credit.
//
// Its methods are not safe for concurrent use, except Close, which may be
// called at any time to release a blocked Write.
type ResultWriter struct {
	m        *Manager
	spec     control.OutputSpec
	subtask  int // the producer subtask
	closedCh chan struct{}
	once     sync.Once
	all      []*outputChannel // every channel; immutable once open

	mu        sync.Mutex
	chans     []*outputChannel // forward: the one channel; else by consumer subtask
	rr        int
	maxP      int
	err       error // sticky
	finished  bool
	released  bool
	lastStale time.Time

	// Measured for the task's metrics (Stats).
	bytesOut atomic.Int64 // buffer bytes handed to the transport
	waitNs   atomic.Int64 // time blocked waiting for credit, in waits that ended
	waiting  atomic.Int64 // when the wait going on started (UnixNano); 0: none
}

type openResult struct {
	code byte // 0: accepted
	msg  string
	err  error // the connection failed
}

// outputChannel is the producer end of one channel.
type outputChannel struct {
	w        *ResultWriter
	consumer int
	local    *inputChannel // in-process consumer; else c and id
	c        *conn
	id       uint32

	cmu      sync.Mutex
	credits  int
	accepted bool
	deadErr  error
	dead     chan struct{}
	cwake    chan struct{} // cap 1: credits arrived
	openRes  chan openResult

	// guarded by w.mu
	buf   []byte // abi batch being filled: 4-byte count, then records
	count uint32
	since time.Time // when the first record of buf was written
}

func newOutputChannel(w *ResultWriter, consumer int) *outputChannel {
	return &outputChannel{
		w: w, consumer: consumer,
		dead:    make(chan struct{}),
		cwake:   make(chan struct{}, 1),
		openRes: make(chan openResult, 1),
	}
}

func (o *outputChannel) grant(n int) {
	o.cmu.Lock()
	o.credits += n
	first := !o.accepted
	o.accepted = true
	o.cmu.Unlock()
	if first {
		select {
		case o.openRes <- openResult{}:
		default:
		}
	}
	select {
	case o.cwake <- struct{}{}:
	default:
	}
}

func (o *outputChannel) rejected(code byte, msg string) {
	select {
	case o.openRes <- openResult{code: code, msg: msg}:
	default:
	}
}

// kill fails the channel: writers blocked on it return err.
func (o *outputChannel) kill(err error) {
	o.cmu.Lock()
	if o.deadErr == nil {
		o.deadErr = err
		close(o.dead)
	}
	o.cmu.Unlock()
	select {
	case o.openRes <- openResult{err: err}:
	default:
	}
}

// acquire takes a credit, waiting for one; the time it waits is the
// writer's back-pressure.
func (o *outputChannel) acquire(ctx context.Context, closed <-chan struct{}) error {
	var waiting time.Time
	defer func() {
		if !waiting.IsZero() {
			o.w.waiting.Store(0)
			o.w.waitNs.Add(int64(time.Since(waiting)))
		}
	}()
	for {
		o.cmu.Lock()
		if o.deadErr != nil {
			err := o.deadErr
			o.cmu.Unlock()
			return err
		}
		if o.credits > 0 {
			o.credits--
			o.cmu.Unlock()
			return nil
		}
		o.cmu.Unlock()
		if waiting.IsZero() {
			waiting = time.Now()
			o.w.waiting.Store(waiting.UnixNano())
		}
		select {
		case <-o.cwake:
		case <-o.dead:
		case <-closed:
			return ErrWriterClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (o *outputChannel) tryAcquire() bool {
	o.cmu.Lock()
	defer o.cmu.Unlock()
	if o.deadErr != nil || o.credits == 0 {
		return false
	}
	o.credits--
	return true
}

// send hands an element that holds a credit to the transport.
func (o *outputChannel) send(it item) error {
	if o.local != nil {
		return o.local.deliver(it)
	}
	if it.data != nil {
		return o.c.enqueue(frameBuffer, o.id, it.data, true)
	}
	return o.c.enqueueSmall(frameEvent, o.id, eventPayload(it.event))
}

// OpenOutput connects the writer of producer subtask subtask to every
// consumer subtask spec names: only the one of the same index for a forward
// output; a rebalance output starts its round robin there. A target equal
// to this Manager's address is served in memory. maxParallelism is the
// number of key groups of a hash output; 0 means
// jobgraph.DefaultMaxParallelism. It waits for consumers
// that are not reachable or have not opened their input yet, up to
// Config.RegistrationTimeout.
//
// # Errors
//
// An invalid spec; ErrConsumerNotFound after the registration timeout;
// ErrHandshake when a target refuses the connection; a channel rejected by
// its consumer (for instance a duplicate producer); ctx.Err().
func (m *Manager) OpenOutput(ctx context.Context, spec control.OutputSpec, subtask, maxParallelism int) (*ResultWriter, error) {
	n := len(spec.Targets)
	maxP := maxParallelism
	if maxP == 0 {
		maxP = jobgraph.DefaultMaxParallelism
	}
	switch {
	case spec.ResultID == "" || len(spec.ResultID) > maxResultIDLen:
		return nil, fmt.Errorf("open output: result id must have 1 to %d bytes", maxResultIDLen)
	case n == 0 || n > 1<<20:
		return nil, fmt.Errorf("open output %s: %d targets", spec.ResultID, n)
	case subtask < 0 || subtask > 1<<24:
		return nil, fmt.Errorf("open output %s: producer subtask %d out of range", spec.ResultID, subtask)
	}
	consumers := make([]int, 0, n)
	switch spec.Partitioner {
	case jobgraph.Forward:
		if subtask >= n {
			return nil, fmt.Errorf("open output %s: forward output of producer subtask %d needs a target for consumer subtask %d, has %d targets", spec.ResultID, subtask, subtask, n)
		}
		consumers = append(consumers, subtask)
	case jobgraph.Hash:
		if maxP < n || maxP > 1<<15 {
			return nil, fmt.Errorf("open output %s: max parallelism %d must be in [%d targets, 32768]", spec.ResultID, maxP, n)
		}
		fallthrough
	case jobgraph.Rebalance, jobgraph.Broadcast:
		for i := range n {
			consumers = append(consumers, i)
		}
	default:
		return nil, fmt.Errorf("open output %s: unknown partitioner %q", spec.ResultID, spec.Partitioner)
	}
	spec.Targets = append([]string(nil), spec.Targets...)
	w := &ResultWriter{m: m, spec: spec, subtask: subtask, maxP: maxP, closedCh: make(chan struct{}), rr: subtask % n}

	octx, cancel := context.WithTimeout(ctx, m.cfg.RegistrationTimeout)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	for _, cons := range consumers {
		oc, err := m.connectChannel(octx, w, cons)
		if err != nil {
			w.releaseChannels(fmt.Sprintf("producer subtask %d failed to open its output", subtask))
			switch {
			case m.ctx.Err() != nil:
				err = ErrManagerClosed
			case ctx.Err() != nil:
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return nil, fmt.Errorf("open output %s subtask %d: %w", spec.ResultID, subtask, err)
		}
		oc.buf = m.getBuf(4)
		w.chans = append(w.chans, oc)
	}
	w.all = w.chans
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		w.releaseChannels("")
		return nil, ErrManagerClosed
	}
	m.writers[w] = struct{}{}
	m.mu.Unlock()
	return w, nil
}

func (m *Manager) connectChannel(ctx context.Context, w *ResultWriter, consumer int) (*outputChannel, error) {
	spec := w.spec
	addr := spec.Targets[consumer]
	what := fmt.Sprintf("consumer subtask %d at %s", consumer, addr)
	if addr == m.addr {
		return m.connectLocal(ctx, w, consumer, what)
	}
	o := open{producer: uint32(w.subtask), consumer: uint32(consumer), resultID: spec.ResultID}
	backoff := 2 * time.Millisecond
	last := "no answer"
	for {
		c, err := m.peerConn(ctx, addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %s is not reachable within %v: %v", ErrConsumerNotFound, what, m.cfg.RegistrationTimeout, err)
			}
			return nil, err
		}
		oc := newOutputChannel(w, consumer)
		if err := c.openChannel(oc, o); err != nil {
			last = err.Error()
		} else {
			select {
			case r := <-oc.openRes:
				switch {
				case r.err != nil:
					last = r.err.Error()
				case r.code == 0:
					return oc, nil
				case r.code == rejectNotRegistered:
					last = r.msg
				default:
					return nil, fmt.Errorf("%s rejected the channel: %s", what, r.msg)
				}
			case <-ctx.Done():
				c.closeChannel(oc.id, closeWithdraw, "producer gave up opening the channel")
			}
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s did not open input %s within %v (last answer: %s)", ErrConsumerNotFound, what, spec.ResultID, m.cfg.RegistrationTimeout, last)
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (m *Manager) connectLocal(ctx context.Context, w *ResultWriter, consumer int, what string) (*outputChannel, error) {
	key := inputKey{w.spec.ResultID, consumer}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrManagerClosed
		}
		g, changed := m.inputs[key], m.regChange
		m.mu.Unlock()
		if g != nil {
			oc := newOutputChannel(w, consumer)
			ic, err := g.attach(w.subtask, oc, nil, 0)
			if err != nil {
				return nil, fmt.Errorf("%s rejected the channel: %v", what, err)
			}
			oc.local = ic
			oc.credits = m.cfg.Credits
			oc.accepted = true
			return oc, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s did not open input %s within %v", ErrConsumerNotFound, what, w.spec.ResultID, m.cfg.RegistrationTimeout)
		}
	}
}

// Spec returns the spec the writer was opened with.
func (w *ResultWriter) Spec() control.OutputSpec { return w.spec }

func (w *ResultWriter) usable() error {
	switch {
	case w.err != nil:
		return w.err
	case w.released:
		return ErrWriterClosed
	case w.finished:
		return fmt.Errorf("%w: output %s already finished", ErrWriterClosed, w.spec.ResultID)
	}
	return nil
}

// Write partitions recs over the channels and copies them into the
// channels' buffers, sending each buffer when it is full. It blocks while a
// full buffer's channel has no credit (back-pressure), until ctx ends or the
// writer is closed. recs are not retained.
//
// # Errors
//
// ErrNoKey for a record without a key on a hash output; ErrRecordTooLarge;
// ctx.Err(); ErrWriterClosed; a channel failure (ErrChannelClosed,
// ErrConnectionLost...). After an error other than ErrNoKey or
// ErrRecordTooLarge the writer is unusable: Close it.
func (w *ResultWriter) Write(ctx context.Context, recs []abi.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	limit := w.m.cfg.MaxBufferSize
	for i := range recs {
		r := &recs[i]
		size := abi.RecordSize(r)
		if size+4 > limit {
			return fmt.Errorf("output %s: %w: %d bytes, limit %d", w.spec.ResultID, ErrRecordTooLarge, size, limit-4)
		}
		var err error
		switch w.spec.Partitioner {
		case jobgraph.Forward:
			err = w.append(ctx, w.chans[0], r, size)
		case jobgraph.Hash:
			if !r.HasKey {
				return fmt.Errorf("output %s: %w", w.spec.ResultID, ErrNoKey)
			}
			kg := keygroup.Of(r.Key, w.maxP)
			err = w.append(ctx, w.chans[keygroup.Subtask(kg, len(w.chans), w.maxP)], r, size)
		case jobgraph.Rebalance:
			err = w.append(ctx, w.chans[w.rr], r, size)
			w.rr++
			if w.rr == len(w.chans) {
				w.rr = 0
			}
		case jobgraph.Broadcast:
			for _, oc := range w.chans {
				if err = w.append(ctx, oc, r, size); err != nil {
					break
				}
			}
		}
		if err != nil {
			return w.setErr(err)
		}
	}
	w.flushStale(time.Now())
	return nil
}

func (w *ResultWriter) setErr(err error) error {
	if !errors.Is(err, ErrWriterClosed) {
		err = fmt.Errorf("output %s: %w", w.spec.ResultID, err)
	}
	w.err = err
	return err
}

func (w *ResultWriter) append(ctx context.Context, oc *outputChannel, r *abi.Record, size int) error {
	if oc.count > 0 && len(oc.buf)+size > w.m.cfg.BufferSize {
		if err := w.flush(ctx, oc); err != nil {
			return err
		}
	}
	if oc.count == 0 {
		oc.since = time.Now()
		w.m.armFlush()
	}
	oc.buf = abi.AppendRecord(oc.buf, r)
	oc.count++
	return nil
}

// flush sends oc's buffer, waiting for a credit.
func (w *ResultWriter) flush(ctx context.Context, oc *outputChannel) error {
	if oc.count == 0 {
		return nil
	}
	if err := oc.acquire(ctx, w.closedCh); err != nil {
		return err
	}
	return w.sendBuf(oc)
}

func (w *ResultWriter) sendBuf(oc *outputChannel) error {
	binary.LittleEndian.PutUint32(oc.buf, oc.count)
	data := oc.buf
	oc.buf, oc.count = w.m.getBuf(4), 0
	w.bytesOut.Add(int64(len(data)))
	return oc.send(item{data: data})
}

// WriterStats is what a ResultWriter measured so far.
type WriterStats struct {
	// BytesOut counts the buffer bytes sent (records and their framing).
	BytesOut int64
	// BackPressured is the time Write, Flush, EmitEvent and Finish waited
	// for credit.
	BackPressured time.Duration
	// BufferUsage is the share of the writer's credits in use now, 0 to 1:
	// buffers sent and not yet consumed, over Credits per channel (Flink's
	// outPoolUsage).
	BufferUsage float64
}

// Stats returns what the writer measured. It may be called from any
// goroutine, at any time.
func (w *ResultWriter) Stats() WriterStats {
	st := WriterStats{BytesOut: w.bytesOut.Load(), BackPressured: time.Duration(w.waitNs.Load())}
	if since := w.waiting.Load(); since != 0 {
		st.BackPressured += max(time.Since(time.Unix(0, since)), 0)
	}
	if len(w.all) == 0 {
		return st
	}
	free := 0
	for _, oc := range w.all {
		oc.cmu.Lock()
		free += min(max(oc.credits, 0), w.m.cfg.Credits)
		oc.cmu.Unlock()
	}
	st.BufferUsage = 1 - float64(free)/float64(len(w.all)*w.m.cfg.Credits)
	return st
}

// flushStale sends buffers that waited FlushTimeout, where a credit is at
// hand; it never blocks. Called with w.mu held, at most every
// FlushTimeout/2 from Write.
func (w *ResultWriter) flushStale(now time.Time) {
	if now.Sub(w.lastStale) < w.m.cfg.FlushTimeout/2 {
		return
	}
	w.lastStale = now
	w.flushDue(now)
}

// flushDue sends buffers that waited FlushTimeout, where a credit is at
// hand, and returns when the next partly filled buffer is due (zero when
// none holds records). A due buffer without credit is looked at again
// after Config.flushRecheck. Called with w.mu held; never blocks.
func (w *ResultWriter) flushDue(now time.Time) time.Time {
	if w.err != nil || w.released {
		return time.Time{}
	}
	ft := w.m.cfg.FlushTimeout
	var next time.Time
	for _, oc := range w.chans {
		if oc.count == 0 {
			continue
		}
		due := oc.since.Add(ft)
		if !due.After(now) {
			if oc.tryAcquire() {
				if err := w.sendBuf(oc); err != nil {
					w.setErr(err)
					return time.Time{}
				}
				continue
			}
			due = now.Add(w.m.cfg.flushRecheck())
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// Flush sends every partly filled buffer, waiting for credit.
func (w *ResultWriter) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.flushAll(ctx)
}

func (w *ResultWriter) flushAll(ctx context.Context) error {
	for _, oc := range w.chans {
		if err := w.flush(ctx, oc); err != nil {
			return w.setErr(err)
		}
	}
	return nil
}

// EmitEvent flushes every channel and then sends ev on all of them, so each
// consumer receives it after all records written before. Use Finish for
// END_OF_PARTITION.
func (w *ResultWriter) EmitEvent(ctx context.Context, ev Event) error {
	if ev.Type == EndOfPartition {
		return fmt.Errorf("output %s: emit END_OF_PARTITION with Finish", w.spec.ResultID)
	}
	if !ev.Type.valid() {
		return fmt.Errorf("output %s: unknown event type %d", w.spec.ResultID, ev.Type)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.emit(ctx, ev)
}

// EmitBarrier sends CHECKPOINT_BARRIER(id) on all channels, after the
// records written before it.
func (w *ResultWriter) EmitBarrier(ctx context.Context, id int64) error {
	return w.EmitEvent(ctx, Event{Type: CheckpointBarrier, CheckpointID: id})
}

func (w *ResultWriter) emit(ctx context.Context, ev Event) error {
	if err := w.flushAll(ctx); err != nil {
		return err
	}
	for _, oc := range w.chans {
		if err := oc.acquire(ctx, w.closedCh); err != nil {
			return w.setErr(err)
		}
		if err := oc.send(item{event: ev}); err != nil {
			return w.setErr(err)
		}
	}
	return nil
}

// Finish flushes every channel and sends END_OF_PARTITION on all of them.
// The writer accepts nothing more; Close it afterwards.
func (w *ResultWriter) Finish(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.emit(ctx, Event{Type: EndOfPartition}); err != nil {
		return err
	}
	w.finished = true
	return nil
}

// Close releases the writer. A writer closed before Finish completed aborts
// its channels: their consumers fail with ErrProducerAborted. Close
// unblocks a Write waiting for credit and is idempotent.
func (w *ResultWriter) Close() error {
	w.once.Do(func() { close(w.closedCh) })
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return nil
	}
	msg := ""
	if !w.finished {
		msg = fmt.Sprintf("producer subtask %d of %s closed before finishing", w.subtask, w.spec.ResultID)
	}
	w.releaseChannels(msg)
	w.m.mu.Lock()
	delete(w.m.writers, w)
	w.m.mu.Unlock()
	return nil
}

// releaseChannels forgets every channel; a non-empty abort tells their
// consumers that the producer went away.
func (w *ResultWriter) releaseChannels(abort string) {
	w.released = true
	for _, oc := range w.chans {
		w.m.putBuf(oc.buf)
		oc.buf = nil
		if oc.local != nil {
			if abort != "" {
				oc.local.fail(fmt.Errorf("%w: %s", ErrProducerAborted, abort))
			}
		} else {
			code := byte(0)
			if abort != "" {
				code = closeAbort
			}
			oc.c.closeChannel(oc.id, code, abort)
		}
	}
	w.chans = nil
}

// failAll fails every channel with err (the Manager is closing).
func (w *ResultWriter) failAll(err error) {
	for _, oc := range w.all {
		oc.kill(err)
	}
}
