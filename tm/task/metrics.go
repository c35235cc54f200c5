package task

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

// Metrics counts what one task does, for the TaskManager's reports to the
// JobMaster and its Prometheus endpoint. The task adds to it once per batch
// (plain atomics, never per record); Sample may be called from any
// goroutine at any time.
//
// Time is split as Flink splits it: idle is waiting for input (an input
// gate, the next split, a guest source with nothing to emit),
// back-pressured is waiting for output credit (exchange.WriterStats), busy
// is the rest.
type Metrics struct {
	start time.Time

	recordsIn, recordsOut atomic.Int64
	bytesIn, bytesOut     atomic.Int64 // bytesOut: collected values; the writers count their own
	idleNs                atomic.Int64 // in waits that ended
	idleFrom              atomic.Int64 // when the wait going on started (UnixNano); 0: none
	alignNs               atomic.Int64 // the last completed barrier alignment
	watermark             atomic.Int64 // the task's event time; math.MinInt64 before any

	mu      sync.Mutex
	writers []*exchange.ResultWriter
	inst    *wasmhost.Instance
}

// NewMetrics returns the metrics of a task that starts now.
func NewMetrics() *Metrics {
	m := &Metrics{start: time.Now()}
	m.watermark.Store(math.MinInt64)
	return m
}

// Sample is a task's cumulative figures at one moment.
type Sample struct {
	// At is when the sample was taken; Elapsed the time since the task
	// started.
	At      time.Time
	Elapsed time.Duration
	// Idle and BackPressured are the time spent waiting for input and for
	// output credit; the rest of Elapsed was busy.
	Idle, BackPressured time.Duration
	// RecordsIn are the records handed to the chain's head (the lines a
	// text source read); RecordsOut the records the chain's tail emitted.
	RecordsIn, RecordsOut int64
	// BytesIn are the input buffers' bytes (a text source's line bytes);
	// BytesOut the output buffers' bytes (a collect sink's value bytes).
	BytesIn, BytesOut int64
	// OutputBufferUsage is the share of output credit in use now, the
	// highest over the task's outputs.
	OutputBufferUsage float64
	// MemoryPages and Fuel are the guest's, zero without a guest.
	MemoryPages, Fuel int64
	// LastAlignment is how long the last checkpoint's barriers took to
	// align over all input channels.
	LastAlignment time.Duration
	// Watermark is the task's event time (ms since the Unix epoch), as
	// Flink's currentInputWatermark: math.MinInt64 before any.
	Watermark int64
}

// Busy is the part of Elapsed that was neither idle nor back-pressured.
func (s Sample) Busy() time.Duration {
	return max(s.Elapsed-s.Idle-s.BackPressured, 0)
}

// Sample returns the figures so far.
func (m *Metrics) Sample() Sample {
	now := time.Now()
	s := Sample{
		At: now, Elapsed: now.Sub(m.start), Idle: time.Duration(m.idleNs.Load()),
		RecordsIn: m.recordsIn.Load(), RecordsOut: m.recordsOut.Load(),
		BytesIn: m.bytesIn.Load(), BytesOut: m.bytesOut.Load(),
		LastAlignment: time.Duration(m.alignNs.Load()),
		Watermark:     m.watermark.Load(),
	}
	if from := m.idleFrom.Load(); from != 0 {
		s.Idle += max(now.Sub(time.Unix(0, from)), 0)
	}
	m.mu.Lock()
	writers, inst := m.writers, m.inst
	m.mu.Unlock()
	for _, w := range writers {
		st := w.Stats()
		s.BytesOut += st.BytesOut
		s.BackPressured += st.BackPressured
		s.OutputBufferUsage = max(s.OutputBufferUsage, st.BufferUsage)
	}
	if inst != nil {
		s.MemoryPages, s.Fuel = inst.MemoryPages(), inst.Fuel()
	}
	return s
}

// attach lets Sample read the task's writers and guest.
func (m *Metrics) attach(writers []*exchange.ResultWriter, inst *wasmhost.Instance) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.writers, m.inst = writers, inst
	m.mu.Unlock()
}

// idleSince adds the time since t (from waitStart) to the idle time.
func (m *Metrics) idleSince(t time.Time) {
	if m != nil {
		m.idleFrom.Store(0)
		m.idleNs.Add(int64(time.Since(t)))
	}
}

// The task's updates; each is a no-op on a nil Metrics (metrics off).

func (m *Metrics) addIn(records, bytes int) {
	if m != nil {
		m.recordsIn.Add(int64(records))
		if bytes > 0 {
			m.bytesIn.Add(int64(bytes))
		}
	}
}

func (m *Metrics) addOut(records, bytes int) {
	if m != nil {
		m.recordsOut.Add(int64(records))
		if bytes > 0 {
			m.bytesOut.Add(int64(bytes))
		}
	}
}

func (m *Metrics) aligned(d time.Duration) {
	if m != nil {
		m.alignNs.Store(int64(d))
	}
}

func (m *Metrics) setWatermark(wm int64) {
	if m != nil {
		m.watermark.Store(wm)
	}
}

// waitStart returns the time a wait for input starts, for idleSince; zero
// (no clock read) when metrics are off.
func (m *Metrics) waitStart() time.Time {
	if m == nil {
		return time.Time{}
	}
	now := time.Now()
	m.idleFrom.Store(now.UnixNano())
	return now
}
