package watermark

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Bounds of a watermark, in milliseconds since the Unix epoch.
const (
	// Min is the watermark before any: nothing is known of event time.
	Min int64 = math.MinInt64
	// Max is the watermark of a stream that ends (or is drained by
	// stop --drain): every event-time timer fires.
	Max int64 = math.MaxInt64
)

// Generator is the watermark of one split (or of one source subtask that
// has no splits): it observes the times of the split's records.
type Generator struct {
	bound  int64 // ms subtracted from the newest time, beside Flink's 1 ms
	newest int64
}

// NewGenerator returns the generator of strategy w. WatermarkMonotonous is
// WatermarkBounded with a bound of 0, as in Flink.
func NewGenerator(w jobgraph.Watermarks) Generator {
	return Generator{bound: w.MaxOutOfOrderness.Milliseconds(), newest: Min}
}

// Observe notes a record time.
func (g *Generator) Observe(ts int64) {
	if ts > g.newest {
		g.newest = ts
	}
}

// Current is the watermark: the newest time seen minus the bound minus 1,
// or Min before any record.
func (g *Generator) Current() int64 {
	if g.newest == Min {
		return Min
	}
	// Saturate: times near Min would wrap.
	if g.newest < Min+g.bound+1 {
		return Min
	}
	return g.newest - g.bound - 1
}

// Update is what a source subtask or a task has to send downstream after
// an input: its watermark status changed, its watermark advanced, or both.
// Send an active status before the watermark, an idle status after it.
type Update struct {
	// Advanced: Watermark is new and higher than any sent before.
	Advanced  bool
	Watermark int64
	// StatusChanged: Idle is the new status.
	StatusChanged bool
	Idle          bool
}

// Any reports whether u has something to send.
func (u Update) Any() bool { return u.Advanced || u.StatusChanged }

// Splits merges the watermarks of one source subtask's splits: the
// subtask's watermark is the minimum over its active splits, and only ever
// increases. A split that produced no record for the idle timeout is idle
// and holds nothing back until its next record; when every split is idle
// (or there is none and the subtask produced nothing for the idle timeout)
// the subtask is idle. Without an idle timeout nothing is ever idle.
//
// A Splits is used by one goroutine.
type Splits struct {
	w       jobgraph.Watermarks
	splits  map[string]*split
	last    time.Time // the newest record of any split, or the start
	emitted int64
	idle    bool
	// emptyIdle: with no split the subtask is idle at once (IdleWhenEmpty).
	emptyIdle bool
}

type split struct {
	gen    Generator
	direct int64     // a watermark set by SetWatermark (a guest generator)
	last   time.Time // when its newest record came
	idle   bool
}

func (sp *split) current() int64 { return max(sp.gen.Current(), sp.direct) }

// NewSplits returns the merge of strategy w, started at now.
func NewSplits(w jobgraph.Watermarks, now time.Time) *Splits {
	return &Splits{w: w, splits: map[string]*split{}, last: now, emitted: Min}
}

// Add starts split id at now (a no-op when it exists).
func (s *Splits) Add(id string, now time.Time) {
	if s.splits[id] == nil {
		s.splits[id] = &split{gen: NewGenerator(s.w), direct: Min, last: now}
	}
}

// IdleWhenEmpty makes the subtask idle at once whenever it has no split,
// whatever the idle timeout: for a source whose splits are assigned
// (Kafka partitions), a subtask that was assigned none has nothing that
// could hold the watermark back, and must not hold back its consumers.
func (s *Splits) IdleWhenEmpty() { s.emptyIdle = true }

// Remove ends split id: it holds the watermark back no more.
func (s *Splits) Remove(id string) { delete(s.splits, id) }

// Observe notes a record of split id (added if new) with time ts at now.
func (s *Splits) Observe(id string, ts int64, now time.Time) {
	sp := s.splits[id]
	if sp == nil {
		s.Add(id, now)
		sp = s.splits[id]
	}
	sp.gen.Observe(ts)
	sp.last, sp.idle = now, false
	s.last = now
}

// SetWatermark sets split id's watermark (added if new) to wm at now, when
// that is higher: for a generator that is not the host's, such as a guest
// source's. It counts as activity for idleness.
func (s *Splits) SetWatermark(id string, wm int64, now time.Time) {
	sp := s.splits[id]
	if sp == nil {
		s.Add(id, now)
		sp = s.splits[id]
	}
	sp.direct = max(sp.direct, wm)
	sp.last, sp.idle = now, false
	s.last = now
}

// Current returns the subtask's watermark as last emitted, and whether it
// is idle.
func (s *Splits) Current() (int64, bool) { return s.emitted, s.idle }

// Poll is the periodic emission (every Watermarks.Interval of processing
// time): it marks splits idle whose idle timeout passed at now and returns
// what changed since the last Poll.
func (s *Splits) Poll(now time.Time) Update {
	timeout := s.w.IdleTimeout
	wm, active := Max, 0
	for _, sp := range s.splits {
		if timeout > 0 && !sp.idle && now.Sub(sp.last) >= timeout {
			sp.idle = true
		}
		if sp.idle {
			continue
		}
		active++
		wm = min(wm, sp.current())
	}
	idle := false
	switch {
	case active > 0:
	case len(s.splits) > 0:
		idle = true // every split is idle
	default:
		// No split: idle once the subtask produced nothing for the timeout.
		idle = s.emptyIdle || (timeout > 0 && now.Sub(s.last) >= timeout)
		wm = Min
	}
	var u Update
	if idle != s.idle {
		s.idle = idle
		u.StatusChanged, u.Idle = true, idle
	}
	if !idle && wm > s.emitted && wm != Min {
		s.emitted = wm
		u.Advanced, u.Watermark = true, wm
	}
	return u
}

// Valve merges the watermarks of a task's input channels: the task's
// watermark is the minimum over the active channels that caught up with
// it; it only ever increases. A channel that turns idle stops holding it
// back; when one turns active again with a watermark below the task's, it
// counts again only once it caught up (Flink's "aligned" channels). When
// every channel is idle the task is idle, and its watermark advances to
// the highest channel watermark first. A channel that ended holds nothing
// back (nor keeps the task active); when all ended the watermark is Max.
//
// A Valve is used by one goroutine.
type Valve struct {
	chans   []channel
	current int64
	idle    bool
}

type channel struct {
	wm    int64
	idle  bool
	ended bool
}

// NewValve returns the valve of n input channels, numbered from 0, all
// active with no watermark.
func NewValve(n int) *Valve {
	v := &Valve{chans: make([]channel, n), current: Min}
	for i := range v.chans {
		v.chans[i].wm = Min
	}
	return v
}

// Current returns the task's watermark and whether it is idle.
func (v *Valve) Current() (int64, bool) { return v.current, v.idle }

// Watermark notes watermark ts on channel ch. A watermark on an idle
// channel makes it active (upstream should have said so first).
func (v *Valve) Watermark(ch int, ts int64) Update {
	c := &v.chans[ch]
	if c.ended {
		return Update{}
	}
	var u Update
	if c.idle {
		c.idle = false
		u = v.activated()
	}
	if ts > c.wm {
		c.wm = ts
	}
	return v.advance(u)
}

// Status notes a WatermarkStatus on channel ch.
func (v *Valve) Status(ch int, idle bool) Update {
	c := &v.chans[ch]
	if c.ended || c.idle == idle {
		return Update{}
	}
	c.idle = idle
	if !idle {
		return v.advance(v.activated())
	}
	return v.advance(Update{})
}

// End notes that channel ch ended (END_OF_PARTITION): it holds nothing
// back from then on.
func (v *Valve) End(ch int) Update {
	c := &v.chans[ch]
	if c.ended {
		return Update{}
	}
	c.ended, c.idle, c.wm = true, false, Max
	return v.advance(Update{})
}

// activated returns the status change of a task that was idle and has an
// active channel again.
func (v *Valve) activated() Update {
	if !v.idle {
		return Update{}
	}
	v.idle = false
	return Update{StatusChanged: true, Idle: false}
}

func (v *Valve) advance(u Update) Update {
	wm, active, open, highest := Max, 0, 0, Min
	anyActive := false
	for _, c := range v.chans {
		if c.ended {
			continue
		}
		open++
		highest = max(highest, c.wm)
		if c.idle {
			continue
		}
		anyActive = true
		if c.wm < v.current {
			continue // not caught up since it turned active
		}
		active++
		wm = min(wm, c.wm)
	}
	switch {
	case open == 0:
		// Every channel ended: event time is over.
		if v.idle {
			u = mergeStatus(u, v.activated())
		}
		if v.current != Max {
			v.current = Max
			u.Advanced, u.Watermark = true, Max
		}
		return u
	case !anyActive:
		// Every channel idle: nothing holds the watermark back below the
		// highest one (Flink does the same), then the task is idle.
		if highest > v.current {
			v.current = highest
			u.Advanced, u.Watermark = true, highest
		}
		if !v.idle {
			v.idle = true
			u.StatusChanged, u.Idle = true, true
		}
		return u
	}
	if active > 0 && wm > v.current {
		v.current = wm
		u.Advanced, u.Watermark = true, wm
	}
	return u
}

func mergeStatus(u, s Update) Update {
	if s.StatusChanged {
		u.StatusChanged, u.Idle = true, s.Idle
	}
	return u
}
