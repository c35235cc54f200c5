//go:build !wasip1

package guest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
)

// The typed window join decodes both sides for the user's function: each
// side's KeyBy keys (and tags) its elements, and the join pairs a window's
// elements of one key. The sides run as their own tasks, one after the
// other, as on a cluster.
func TestTypedWindowJoin(t *testing.T) {
	label := typed.Pair(typed.String(), typed.String()) // sensor, label
	h := host(t, func(env *guest.Env) {
		a := typed.Source(env, "a", readingCodec(), none[reading])
		b := typed.Source(env, "b", label, none[typed.Tuple2[string, string]])
		j := typed.Join(a, b, typed.String(), func(r reading) string { return r.Sensor },
			func(l typed.Tuple2[string, string]) string { return l.A })
		typed.WindowJoin(j, guest.Tumbling(10*time.Millisecond).InProcessingTime(), "j", typed.String(),
			func(r reading, l typed.Tuple2[string, string], out *typed.Emitter[string]) {
				out.Emit(fmt.Sprintf("%s %v %s", r.Sensor, r.Temp, l.B))
			}).Collect("out")
	})
	g, err := h.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.Vertices); n != 6 {
		t.Fatalf("%d vertices, want 6 (a, b, j.left, j.right, j, out)", n)
	}
	side := func(op int, recs []guest.Record) []guest.Record {
		must(t, h.Open(op))
		must(t, h.Process(recs...))
		out := h.Take()
		must(t, h.CloseTask())
		return out
	}
	var right []guest.Record
	for _, l := range []typed.Tuple2[string, string]{{A: "a", B: "hot"}, {A: "c", B: "cold"}, {A: "a", B: "warm"}} {
		right = append(right, guest.Record{Value: label.Append(nil, l)})
	}
	ls := side(3, readings(reading{"a", 1}, reading{"b", -2}, reading{"a", 3}))
	rs := side(4, right)
	must(t, h.Open(5))
	h.SetClock(100)
	must(t, h.Process(append(ls, rs...)...))
	h.SetClock(200)
	must(t, h.FireTimers())
	got := values(h.Take())
	slices.Sort(got)
	if want := []string{"a 1 hot", "a 1 warm", "a 3 hot", "a 3 warm"}; !slices.Equal(got, want) {
		t.Errorf("joined %q, want %q", got, want)
	}
}
