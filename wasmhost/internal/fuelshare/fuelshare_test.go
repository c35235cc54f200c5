package fuelshare_test

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/wasmhost/internal/fuelshare"
)

// step is one event of a script: start, stop or spend by a tenant, then,
// when want is set, the decision Ready gives the tenant at the time.
type step struct {
	op     string // "start", "stop", "spend", "ready", "advance"
	tenant string
	share  fuelshare.Share
	fuel   int64
	d      time.Duration // advance
	want   string        // ready: "go", "wait" (for others) or "retry" (for the clock)
}

func TestDecisions(t *testing.T) {
	w := func(n int) fuelshare.Share { return fuelshare.Share{Weight: n} }
	capped := fuelshare.Share{Weight: 1, FuelPerSecond: 1000}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a tenant alone always goes on", []step{
			{op: "start", tenant: "a", share: w(1)},
			{op: "spend", tenant: "a", fuel: 1 << 40},
			{op: "ready", tenant: "a", want: "go"},
		}},
		{"a tenant ahead of another running one waits for it", []step{
			{op: "start", tenant: "a", share: w(1)},
			{op: "start", tenant: "b", share: w(1)},
			{op: "spend", tenant: "a", fuel: 100},
			{op: "ready", tenant: "a", want: "go"}, // within the lag
			{op: "spend", tenant: "a", fuel: 1},
			{op: "ready", tenant: "a", want: "wait"},
			{op: "ready", tenant: "b", want: "go"},
			{op: "spend", tenant: "b", fuel: 1},
			{op: "ready", tenant: "a", want: "go"},
		}},
		{"work-conserving: one that stops running holds nobody back", []step{
			{op: "start", tenant: "a", share: w(1)},
			{op: "start", tenant: "b", share: w(1)},
			{op: "spend", tenant: "a", fuel: 1000},
			{op: "ready", tenant: "a", want: "wait"},
			{op: "stop", tenant: "b"},
			{op: "ready", tenant: "a", want: "go"},
		}},
		{"a higher weight runs further ahead in fuel", []step{
			{op: "start", tenant: "a", share: w(1)},
			{op: "start", tenant: "b", share: w(3)},
			{op: "spend", tenant: "b", fuel: 300},
			{op: "ready", tenant: "b", want: "go"},
			{op: "spend", tenant: "b", fuel: 3},
			{op: "ready", tenant: "b", want: "wait"},
		}},
		{"a tenant that was idle cannot bank its idle time", []step{
			{op: "start", tenant: "a", share: w(1)},
			{op: "spend", tenant: "a", fuel: 1_000_000},
			{op: "start", tenant: "b", share: w(1)}, // starts at a's virtual time
			{op: "spend", tenant: "a", fuel: 101},
			{op: "ready", tenant: "a", want: "wait"},
			{op: "ready", tenant: "b", want: "go"},
		}},
		{"two guests of one tenant share its virtual time", []step{
			{op: "start", tenant: "a", share: w(1)},
			{op: "start", tenant: "a", share: w(1)},
			{op: "start", tenant: "b", share: w(1)},
			{op: "spend", tenant: "a", fuel: 60},
			{op: "spend", tenant: "a", fuel: 60},
			{op: "ready", tenant: "a", want: "wait"},
			{op: "stop", tenant: "a"},
			{op: "ready", tenant: "b", want: "go"},
		}},
		{"a rate cap holds a tenant alone until its bucket refills", []step{
			{op: "start", tenant: "a", share: capped},
			{op: "spend", tenant: "a", fuel: 200}, // the burst
			{op: "ready", tenant: "a", want: "go"},
			{op: "spend", tenant: "a", fuel: 50},
			{op: "ready", tenant: "a", want: "retry"},
			{op: "advance", d: 49 * time.Millisecond},
			{op: "ready", tenant: "a", want: "retry"},
			{op: "advance", d: time.Millisecond},
			{op: "ready", tenant: "a", want: "go"},
		}},
		{"a tenant waiting for its bucket holds nobody back", []step{
			{op: "start", tenant: "a", share: capped},
			{op: "start", tenant: "b", share: w(1)},
			{op: "spend", tenant: "a", fuel: 250},
			{op: "ready", tenant: "a", want: "retry"},
			{op: "spend", tenant: "b", fuel: 10_000},
			{op: "ready", tenant: "b", want: "go"},
			// Back from the bucket, a starts at b's virtual time.
			{op: "advance", d: time.Second},
			{op: "ready", tenant: "a", want: "go"},
			{op: "spend", tenant: "b", fuel: 101},
			{op: "ready", tenant: "b", want: "wait"},
		}},
		{"stopping more often than starting is harmless", []step{
			{op: "stop", tenant: "a"},
			{op: "start", tenant: "a", share: w(1)},
			{op: "stop", tenant: "a"},
			{op: "stop", tenant: "a"},
			{op: "start", tenant: "b", share: w(1)},
			{op: "spend", tenant: "b", fuel: 1000},
			{op: "ready", tenant: "b", want: "go"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fuelshare.New(fuelshare.Config{Lag: 100, Burst: 200})
			now := time.Unix(1000, 0)
			for i, st := range tt.steps {
				switch st.op {
				case "start":
					s.Start(st.tenant, st.share, now)
				case "stop":
					s.Stop(st.tenant)
				case "spend":
					s.Spend(st.tenant, st.fuel, 0)
				case "advance":
					now = now.Add(st.d)
				case "ready":
					d := s.Ready(st.tenant, now)
					got := "go"
					switch {
					case !d.Go && d.RetryAt.IsZero():
						got = "wait"
					case !d.Go:
						got = "retry"
						if !d.RetryAt.After(now) {
							t.Errorf("step %d: retry at %v, not after now %v", i, d.RetryAt, now)
						}
					}
					if got != st.want {
						t.Fatalf("step %d: %s is %s, want %s", i, st.tenant, got, st.want)
					}
				}
			}
		})
	}
}

// TestWeightsSplitFuel runs busy tenants against each other, each taking a
// quantum whenever the scheduler lets it, in a fixed rotation: their fuel
// ends up in the ratio of their weights.
func TestWeightsSplitFuel(t *testing.T) {
	for _, weights := range [][]int{{1, 3}, {1, 1}, {2, 5, 1}} {
		s := fuelshare.New(fuelshare.Config{Lag: 4 << 14, Burst: 1})
		now := time.Unix(0, 0)
		names := []string{"a", "b", "c"}[:len(weights)]
		for i, n := range names {
			s.Start(n, fuelshare.Share{Weight: weights[i]}, now)
		}
		for range 100_000 {
			for _, n := range names {
				if s.Ready(n, now).Go {
					s.Spend(n, 1<<14, 0)
				}
			}
		}
		total := 0
		for _, w := range weights {
			total += w
		}
		var sum int64
		for _, n := range names {
			sum += s.Spent(n)
		}
		for i, n := range names {
			got := float64(s.Spent(n)) / float64(sum)
			want := float64(weights[i]) / float64(total)
			if math.Abs(got-want) > 0.01*want {
				t.Errorf("weights %v: %s got %.4f of the fuel, want %.4f", weights, n, got, want)
			}
		}
	}
}

func TestRateCapBoundsFuelPerSecond(t *testing.T) {
	s := fuelshare.New(fuelshare.Config{Lag: 1 << 16, Burst: 1 << 14})
	now := time.Unix(0, 0)
	s.Start("a", fuelshare.Share{Weight: 1, FuelPerSecond: 1_000_000}, now)
	end := now.Add(10 * time.Second)
	for now.Before(end) {
		d := s.Ready("a", now)
		if d.Go {
			s.Spend("a", 1<<14, 0)
			now = now.Add(time.Microsecond) // a guest far faster than its cap
			continue
		}
		now = d.RetryAt
	}
	// Ten seconds at the rate, plus the burst it started with.
	if got, want := s.Spent("a"), int64(10_000_000+100_000); got < want*9/10 || got > want*11/10+1<<14 {
		t.Errorf("spent %d in 10s at 1000000/s, want about %d", got, want)
	}
	if m := s.Tenants(); len(m) != 1 || m["a"] != s.Spent("a") {
		t.Errorf("Tenants() = %v", m)
	}
}

// A guest whose call does not return, beside a tenant whose calls are
// short (a spinning tenant beside a streaming one), gets 1/LongCharge of
// their fuel once its call is long; alone it is never held.
func TestLongCallsCostMore(t *testing.T) {
	const q = 1 << 14
	s := fuelshare.New(fuelshare.Config{Lag: 4 * q, Burst: 1, LongCall: 64 * q, LongCharge: 16})
	now := time.Unix(0, 0)
	w1 := fuelshare.Share{Weight: 1}
	s.Start("spin", w1, now)
	var call int64 // the spinning guest's one call so far
	spin := func() {
		if s.Ready("spin", now).Go {
			s.Spend("spin", q, call)
			call += q
		}
	}
	for range 1000 {
		spin() // alone: never held
	}
	if s.Spent("spin") != 1000*q {
		t.Fatalf("alone the spinning tenant spent %d, want %d", s.Spent("spin"), 1000*q)
	}
	// Now beside a tenant making calls of 4 trips each, in rotation.
	s.Start("short", w1, now)
	for range 100_000 {
		spin()
		if s.Ready("short", now).Go {
			s.Spend("short", q, 0)
		}
	}
	spun, short := s.Spent("spin")-1000*q, s.Spent("short")
	if r := float64(short) / float64(spun); r < 15 || r > 17 {
		t.Errorf("beside short calls the spinning tenant got 1/%.1f of their fuel, want 1/16 (LongCharge)", r)
	}
}

// Until is exactly the virtual time the slowest other tenant must reach
// for a waiting tenant to go on: below it the answer stays no.
func TestUntil(t *testing.T) {
	s := fuelshare.New(fuelshare.Config{Lag: 100, Burst: 1})
	now := time.Unix(0, 0)
	s.Start("a", fuelshare.Share{Weight: 1}, now)
	s.Start("b", fuelshare.Share{Weight: 2}, now)
	s.Spend("a", 1000, 0)
	d := s.Ready("a", now)
	if d.Go || d.Until != 900 {
		t.Fatalf("a 1000 ahead of b: %+v, want to wait until b reaches 900", d)
	}
	s.Spend("b", 1798, 0) // virtual time 899: weight 2
	if s.VirtualTime("b") >= d.Until || s.Ready("a", now).Go {
		t.Fatalf("b at %v, below a's Until %v: a should still wait", s.VirtualTime("b"), d.Until)
	}
	s.Spend("b", 2, 0)
	if s.VirtualTime("b") < d.Until || !s.Ready("a", now).Go {
		t.Fatalf("b at %v reached a's Until %v: a should go on", s.VirtualTime("b"), d.Until)
	}
}

// Left is set once, when a tenant starts waiting for its rate bucket, not
// at every Ready while it waits.
func TestLeftOnce(t *testing.T) {
	s := fuelshare.New(fuelshare.Config{Lag: 100, Burst: 1})
	now := time.Unix(0, 0)
	s.Start("a", fuelshare.Share{Weight: 1, FuelPerSecond: 1000}, now)
	s.Spend("a", 1000, 0)
	if d := s.Ready("a", now); d.Go || !d.Left {
		t.Fatalf("a over its bucket: %+v, want to retry, having just left", d)
	}
	if d := s.Ready("a", now.Add(time.Millisecond)); d.Go || d.Left || d.RetryAt.IsZero() {
		t.Fatalf("a still over its bucket: %+v, want to retry, not leaving again", d)
	}
}
