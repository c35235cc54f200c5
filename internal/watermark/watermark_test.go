package watermark

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

func TestGenerator(t *testing.T) {
	tests := []struct {
		name  string
		w     jobgraph.Watermarks
		times []int64
		want  int64
	}{
		{"none yet", jobgraph.Watermarks{Kind: jobgraph.WatermarkBounded, MaxOutOfOrderness: time.Second}, nil, Min},
		{"bounded", jobgraph.Watermarks{Kind: jobgraph.WatermarkBounded, MaxOutOfOrderness: 5 * time.Second}, []int64{10_000, 12_000, 11_000}, 12_000 - 5_000 - 1},
		{"monotonous", jobgraph.Watermarks{Kind: jobgraph.WatermarkMonotonous}, []int64{1, 2, 3}, 2},
		{"out of order does not go back", jobgraph.Watermarks{Kind: jobgraph.WatermarkMonotonous}, []int64{100, 50}, 99},
		{"near Min saturates", jobgraph.Watermarks{Kind: jobgraph.WatermarkBounded, MaxOutOfOrderness: time.Second}, []int64{Min + 10}, Min},
		{"zero time", jobgraph.Watermarks{Kind: jobgraph.WatermarkMonotonous}, []int64{0}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGenerator(tt.w)
			for _, ts := range tt.times {
				g.Observe(ts)
			}
			if got := g.Current(); got != tt.want {
				t.Fatalf("Current = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSplits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := jobgraph.Watermarks{Kind: jobgraph.WatermarkBounded, MaxOutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Second}
	type step struct {
		do   func(s *Splits) Update
		want Update
	}
	steps := []step{
		// No split, within the idle timeout: nothing.
		{func(s *Splits) Update { return s.Poll(at(100)) }, Update{}},
		{func(s *Splits) Update { s.Add("a", at(100)); s.Add("b", at(100)); return s.Poll(at(150)) }, Update{}},
		// a at 100, b silent (Min): b holds the merge back.
		{func(s *Splits) Update { s.Observe("a", 100, at(200)); return s.Poll(at(200)) }, Update{}},
		{func(s *Splits) Update { s.Observe("b", 50, at(300)); return s.Poll(at(300)) }, Update{Advanced: true, Watermark: 39}},
		// The minimum of the two.
		{func(s *Splits) Update { s.Observe("b", 500, at(400)); return s.Poll(at(400)) }, Update{Advanced: true, Watermark: 89}},
		// a goes quiet: after the idle timeout it holds nothing back.
		{func(s *Splits) Update { s.Observe("b", 900, at(1100)); return s.Poll(at(1100)) }, Update{}},
		{func(s *Splits) Update { return s.Poll(at(1200)) }, Update{Advanced: true, Watermark: 889}},
		// Both quiet: the subtask is idle.
		{func(s *Splits) Update { return s.Poll(at(2100)) }, Update{StatusChanged: true, Idle: true}},
		{func(s *Splits) Update { return s.Poll(at(2200)) }, Update{}},
		// a wakes up behind the emitted watermark: active again, no regress.
		{func(s *Splits) Update { s.Observe("a", 200, at(2300)); return s.Poll(at(2300)) }, Update{StatusChanged: true, Idle: false}},
		{func(s *Splits) Update { s.Observe("a", 1000, at(2400)); return s.Poll(at(2400)) }, Update{Advanced: true, Watermark: 989}},
		// A finished split holds nothing back.
		{func(s *Splits) Update { s.Observe("b", 5000, at(2500)); s.Remove("a"); return s.Poll(at(2500)) }, Update{Advanced: true, Watermark: 4989}},
		{func(s *Splits) Update { s.Remove("b"); return s.Poll(at(2600)) }, Update{}},
		{func(s *Splits) Update { return s.Poll(at(3500)) }, Update{StatusChanged: true, Idle: true}},
	}
	s := NewSplits(w, t0)
	for i, st := range steps {
		if got := st.do(s); got != st.want {
			t.Fatalf("step %d: %+v, want %+v", i, got, st.want)
		}
	}
}

func TestSplitsNeverIdleWithoutTimeout(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := NewSplits(jobgraph.Watermarks{Kind: jobgraph.WatermarkMonotonous}, t0)
	s.Observe("a", 10, t0)
	s.Add("b", t0)
	if u := s.Poll(t0.Add(time.Hour)); u.Any() {
		t.Fatalf("a silent split stalls the watermark without an idle timeout, got %+v", u)
	}
	if u := s.Poll(t0.Add(48 * time.Hour)); u.Idle {
		t.Fatal("idle without a timeout")
	}
}

func TestValve(t *testing.T) {
	type step struct {
		do   func(v *Valve) Update
		want Update
	}
	wm := func(ch int, ts int64) func(v *Valve) Update {
		return func(v *Valve) Update { return v.Watermark(ch, ts) }
	}
	status := func(ch int, idle bool) func(v *Valve) Update {
		return func(v *Valve) Update { return v.Status(ch, idle) }
	}
	end := func(ch int) func(v *Valve) Update { return func(v *Valve) Update { return v.End(ch) } }
	adv := func(ts int64) Update { return Update{Advanced: true, Watermark: ts} }
	tests := []struct {
		name  string
		n     int
		steps []step
	}{
		{"min over channels", 3, []step{
			{wm(0, 10), Update{}},
			{wm(1, 20), Update{}},
			{wm(2, 5), adv(5)},
			{wm(2, 30), adv(10)},
			{wm(0, 25), adv(20)},
			{wm(1, 15), Update{}}, // a channel never goes back
			{wm(1, 40), adv(25)},
		}},
		{"an idle channel is excluded", 2, []step{
			{wm(0, 10), Update{}},
			{status(1, true), adv(10)},
			{wm(0, 50), adv(50)},
			// Back, behind: it counts again once it caught up.
			{status(1, false), Update{}},
			{wm(0, 60), adv(60)},
			{wm(1, 55), Update{}},
			{wm(1, 70), Update{}},
			{wm(0, 80), adv(70)},
		}},
		{"all idle: highest, then idle; active again", 2, []step{
			{wm(0, 10), Update{}},
			{wm(1, 20), adv(10)},
			{status(0, true), adv(20)},
			{status(1, true), Update{StatusChanged: true, Idle: true}},
			{status(1, true), Update{}},
			{wm(0, 30), Update{StatusChanged: true, Idle: false, Advanced: true, Watermark: 30}},
		}},
		{"ended channels count as Max", 2, []step{
			{wm(0, 10), Update{}},
			{end(1), adv(10)},
			{wm(1, 99), Update{}}, // nothing after the end
			{end(0), adv(Max)},
		}},
		{"end while idle", 2, []step{
			{status(0, true), Update{}},
			{status(1, true), Update{StatusChanged: true, Idle: true}},
			{end(1), Update{}}, // still idle: the open channel is
			{end(0), Update{StatusChanged: true, Idle: false, Advanced: true, Watermark: Max}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewValve(tt.n)
			for i, st := range tt.steps {
				if got := st.do(v); got != st.want {
					t.Fatalf("step %d: %+v, want %+v", i, got, st.want)
				}
			}
		})
	}
}

func TestSplitsSetWatermark(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := NewSplits(jobgraph.Watermarks{Kind: jobgraph.WatermarkGuest, IdleTimeout: time.Second}, t0)
	s.SetWatermark("", 100, t0)
	if u := s.Poll(t0); u != (Update{Advanced: true, Watermark: 100}) {
		t.Fatalf("got %+v", u)
	}
	s.SetWatermark("", 50, t0) // never back
	s.SetWatermark("", Max, t0.Add(time.Millisecond))
	if u := s.Poll(t0.Add(time.Millisecond)); u != (Update{Advanced: true, Watermark: Max}) {
		t.Fatalf("got %+v", u)
	}
	if u := s.Poll(t0.Add(2 * time.Second)); u != (Update{StatusChanged: true, Idle: true}) {
		t.Fatalf("got %+v, want idle after the timeout", u)
	}
}

// With IdleWhenEmpty a subtask without splits is idle at once, without an
// idle timeout, and active again as soon as it has one.
func TestSplitsIdleWhenEmpty(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewSplits(jobgraph.Watermarks{Kind: jobgraph.WatermarkMonotonous}, t0)
	if u := s.Poll(t0); u.Any() {
		t.Fatalf("before IdleWhenEmpty: %+v, want nothing", u)
	}
	s.IdleWhenEmpty()
	if u := s.Poll(t0); !u.StatusChanged || !u.Idle || u.Advanced {
		t.Fatalf("no split: %+v, want idle", u)
	}
	s.Add("p0", t0)
	if u := s.Poll(t0); !u.StatusChanged || u.Idle {
		t.Fatalf("a split added: %+v, want active", u)
	}
	s.Observe("p0", 50, t0)
	if u := s.Poll(t0); !u.Advanced || u.Watermark != 49 {
		t.Fatalf("a record: %+v, want watermark 49", u)
	}
}
