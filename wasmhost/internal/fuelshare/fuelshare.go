package fuelshare

import (
	"math"
	"time"
)

// Share is one tenant's CPU share.
type Share struct {
	// Weight is the tenant's share relative to the other running tenants';
	// below 1 means 1.
	Weight int
	// FuelPerSecond caps the fuel the tenant's guests spend per second on
	// this host, all together; 0 means no cap.
	FuelPerSecond int64
}

func (s Share) weight() float64 { return float64(max(s.Weight, 1)) }

// Config is a scheduler's slack and its defence against a tenant whose
// guest spins.
type Config struct {
	// Lag is how far (in fuel over the weight) a tenant may run ahead of
	// the slowest running tenant before it waits.
	Lag int64
	// Burst is the most fuel a rate-capped tenant spends at once (at
	// least a tenth of a second of its rate).
	Burst int64
	// LongCall, when not 0, makes a long call cost its tenant more: the
	// fuel a call spends after it has spent LongCall counts LongCharge
	// times in the tenant's virtual time, so a guest that does not return
	// gets 1/LongCharge of the fuel of tenants whose calls are short, while
	// they run; a tenant running alone is never held.
	LongCall   int64
	LongCharge float64
}

// Scheduler holds the tenants' virtual times and rate buckets. The zero
// value is not usable; start from New. It is not safe for concurrent use:
// its caller serializes the events.
type Scheduler struct {
	lag     float64
	burst   int64
	long    int64
	charge  float64
	tenants map[string]*tenant
}

type tenant struct {
	share   Share
	running int     // guests of the tenant in guest code, waiting or not
	vt      float64 // fuel spent / weight (long calls charged more)
	spent   int64   // fuel spent, in all

	// The rate bucket: tokens of fuel at last; held while the tenant waits
	// for it to refill, which takes it out of the others' comparison.
	tokens float64
	last   time.Time
	held   bool
}

// New returns a scheduler configured by c.
func New(c Config) *Scheduler {
	return &Scheduler{lag: float64(max(c.Lag, 1)), burst: max(c.Burst, 1), long: max(c.LongCall, 0),
		charge: max(c.LongCharge, 1), tenants: map[string]*tenant{}}
}

func (s *Scheduler) get(name string) *tenant {
	t := s.tenants[name]
	if t == nil {
		t = &tenant{}
		s.tenants[name] = t
	}
	return t
}

func (s *Scheduler) capacity(t *tenant) float64 {
	return float64(max(s.burst, t.share.FuelPerSecond/10))
}

// Start records that a guest of tenant starts running guest code (a call
// begins, or returns from a host call that waited) with the tenant's share.
// A tenant that was not running starts from the slowest running tenant's
// virtual time, if that is ahead of its own.
func (s *Scheduler) Start(tenant string, share Share, now time.Time) {
	t := s.get(tenant)
	if share.FuelPerSecond > 0 && t.share.FuelPerSecond == 0 {
		t.tokens, t.last = float64(max(s.burst, share.FuelPerSecond/10)), now
	}
	t.share = share
	if t.running == 0 {
		if m, ok := s.slowest(tenant); ok && m > t.vt {
			t.vt = m
		}
	}
	t.running++
}

// Stop records that a guest of tenant stopped running guest code (its
// call returned, or it waits for the host).
func (s *Scheduler) Stop(tenant string) {
	if t := s.tenants[tenant]; t != nil && t.running > 0 {
		t.running--
	}
}

// Spend records fuel spent by a guest of tenant in a call that had spent
// call fuel before it.
func (s *Scheduler) Spend(tenant string, fuel, call int64) {
	if fuel <= 0 {
		return
	}
	t := s.get(tenant)
	t.spent += fuel
	charge := 1.0
	if s.long > 0 && call >= s.long {
		charge = s.charge
	}
	t.vt += charge * float64(fuel) / t.share.weight()
	if t.share.FuelPerSecond > 0 {
		t.tokens -= float64(fuel)
	}
}

// VirtualTime returns tenant's virtual time, as Decision.Until counts it.
func (s *Scheduler) VirtualTime(tenant string) float64 {
	if t := s.tenants[tenant]; t != nil {
		return t.vt
	}
	return 0
}

// Spent returns the fuel tenant's guests spent so far.
func (s *Scheduler) Spent(tenant string) int64 {
	if t := s.tenants[tenant]; t != nil {
		return t.spent
	}
	return 0
}

// Tenants returns the fuel each tenant seen so far spent.
func (s *Scheduler) Tenants() map[string]int64 {
	out := make(map[string]int64, len(s.tenants))
	for n, t := range s.tenants {
		out[n] = t.spent
	}
	return out
}

// Decision is Ready's answer.
type Decision struct {
	// Go says the guest may go on.
	Go bool
	// RetryAt, when Go is false and it is set, is when the answer may
	// change without any other event (the rate bucket refilled); zero
	// means only another tenant's Spend or Stop can change it.
	RetryAt time.Time
	// Until, when Go is false and RetryAt is zero, is the virtual time
	// the slowest other running tenant must reach for the answer to
	// change (or it must stop running): a Spend that leaves the spender
	// below it cannot change the answer.
	Until float64
	// Left says the tenant has just left the others' comparison (to wait
	// for its rate bucket), which may let tenants that waited for it go.
	Left bool
}

// Ready decides whether a guest of tenant may go on at now.
func (s *Scheduler) Ready(tenant string, now time.Time) Decision {
	t := s.get(tenant)
	if r := t.share.FuelPerSecond; r > 0 {
		if el := now.Sub(t.last); el > 0 {
			t.tokens = math.Min(s.capacity(t), t.tokens+float64(r)*el.Seconds())
			t.last = now
		}
		if t.tokens < 0 {
			left := !t.held
			t.held = true
			wait := time.Duration(-t.tokens / float64(r) * float64(time.Second))
			return Decision{RetryAt: now.Add(max(wait, time.Microsecond)), Left: left}
		}
		if t.held {
			// Back from waiting for the bucket: no credit for the wait.
			t.held = false
			if m, ok := s.slowest(tenant); ok && m > t.vt {
				t.vt = m
			}
		}
	}
	if m, ok := s.slowest(tenant); ok && t.vt-m > s.lag {
		return Decision{Until: t.vt - s.lag}
	}
	return Decision{Go: true}
}

// slowest is the least virtual time of the running tenants other than
// except that are not waiting for their rate bucket.
func (s *Scheduler) slowest(except string) (float64, bool) {
	m, found := 0.0, false
	for n, t := range s.tenants {
		if n == except || t.running == 0 || t.held {
			continue
		}
		if !found || t.vt < m {
			m, found = t.vt, true
		}
	}
	return m, found
}
