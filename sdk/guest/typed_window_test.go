//go:build !wasip1

package guest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
)

// maxTemp is a merging aggregate: the highest temperature and how many
// readings.
type maxTemp struct{}

func (maxTemp) CreateAccumulator() typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: -1e9}
}
func (maxTemp) Add(r reading, acc typed.Tuple2[float64, int64]) typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: max(acc.A, r.Temp), B: acc.B + 1}
}
func (maxTemp) GetResult(acc typed.Tuple2[float64, int64]) string {
	return fmt.Sprintf("max %v of %d", acc.A, acc.B)
}
func (maxTemp) Merge(a, b typed.Tuple2[float64, int64]) typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: max(a.A, b.A), B: a.B + b.B}
}

// The typed windows in processing time (the test host's clock):
// WindowReduce, WindowAggregate (merging, over sessions) and WindowProcess
// emit one Windowed result per key and window when its timer fires, with
// the window's bounds, and the Windowed codec reads back what they wrote.
func TestTypedWindows(t *testing.T) {
	wc := typed.WindowedCodec(typed.String(), typed.String())
	for _, tc := range []struct {
		name  string
		plan  func(ks *typed.KeyedStream[string, reading]) *typed.Stream[string]
		want  []string
		chain []int // the window operator and the maps after it
	}{
		{"reduce tumbling", func(ks *typed.KeyedStream[string, reading]) *typed.Stream[string] {
			w := typed.WindowReduce(typed.Window(ks, guest.Tumbling(10*time.Millisecond).InProcessingTime()), "w",
				func(a, b reading) reading { return reading{a.Sensor, a.Temp + b.Temp} })
			return typed.Map(w.Stream, "f", typed.String(), func(v typed.Windowed[string, reading]) string {
				return fmt.Sprintf("%s [%d,%d) %v", v.Key, v.Window.Start, v.Window.End, v.Value.Temp)
			})
		}, []string{"a [100,110) 4", "b [100,110) -2", "a [110,120) 5"}, []int{3, 4, 5}},
		{"aggregate session", func(ks *typed.KeyedStream[string, reading]) *typed.Stream[string] {
			w := typed.WindowAggregate(typed.Window(ks, guest.Session(4*time.Millisecond).InProcessingTime()), "w",
				typed.AggregateFunction[reading, typed.Tuple2[float64, int64], string](maxTemp{}),
				typed.Pair(typed.Float64(), typed.Int64()), typed.String())
			return typed.Map(w.Stream, "f", typed.String(), func(v typed.Windowed[string, string]) string {
				b := wc.Append(nil, v) // the codec round trip
				d, err := wc.Decode(b)
				if err != nil || d != v {
					panic(fmt.Sprintf("windowed codec: %+v %v, want %+v", d, err, v))
				}
				return fmt.Sprintf("%s [%d,%d) %s", v.Key, v.Window.Start, v.Window.End, v.Value)
			})
		}, []string{"b [100,104) max -2 of 1", "a [100,107) max 3 of 2", "a [112,116) max 5 of 1"}, []int{3, 4, 5}},
		{"process sliding", func(ks *typed.KeyedStream[string, reading]) *typed.Stream[string] {
			return typed.WindowProcess(typed.Window(ks, guest.Sliding(10*time.Millisecond, 5*time.Millisecond).InProcessingTime()), "w", typed.String(),
				func(ctx *typed.KeyedContext[string], w guest.Window, rs []reading, out *typed.Emitter[string]) {
					var ts []string
					for _, r := range rs {
						ts = append(ts, fmt.Sprint(r.Temp))
					}
					out.Emit(fmt.Sprintf("%s [%d,%d) %s", ctx.Key(), w.Start, w.End, strings.Join(ts, ",")))
				}).Stream
		}, []string{"a [95,105) 1,3", "b [95,105) -2", "a [100,110) 1,3", "b [100,110) -2", "a [105,115) 5", "a [110,120) 5"}, []int{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := host(t, func(env *guest.Env) {
				src := typed.Source(env, "in", readingCodec(), none[reading])
				ks := typed.KeyBy(src, "sensor", typed.String(), func(r reading) string { return r.Sensor })
				typed.Map(tc.plan(ks), "id", typed.String(), func(s string) string { return s }).Collect("out")
			})
			if _, err := h.Plan(); err != nil {
				t.Fatal(err)
			}
			must(t, h.Open(tc.chain...))
			h.SetClock(100)
			must(t, h.Process(keyed(readings(reading{"a", 1}, reading{"b", -2}))...))
			h.SetClock(103)
			must(t, h.Process(keyed(readings(reading{"a", 3}))...))
			h.SetClock(112)
			must(t, h.FireTimers())
			must(t, h.Process(keyed(readings(reading{"a", 5}))...))
			h.SetClock(200)
			must(t, h.FireTimers())
			if got := values(h.Take()); !slices.Equal(got, tc.want) {
				t.Errorf("output\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// An empty value is a value: a session whose reduction so far is empty
// goes on from it, not from the next element as if it had none.
func TestWindowReduceKeepsEmptyValues(t *testing.T) {
	h := host(t, func(env *guest.Env) {
		env.Source("in", func(*guest.Context, int, *guest.Collector) bool { return true }).
			KeyBy("k", func(r guest.Record) []byte { return r.Key }).
			Window(guest.Session(10*time.Millisecond).InProcessingTime()).
			Reduce("w", func(acc, v []byte) []byte { return append(append(acc, '|'), v...) }).
			Collect("out")
	})
	if _, err := h.Plan(); err != nil {
		t.Fatal(err)
	}
	must(t, h.Open(3))
	for i, v := range []string{"", "", "b"} {
		h.SetClock(int64(100 + i))
		must(t, h.Process(guest.Record{Key: []byte("a"), HasKey: true, Value: []byte(v)}))
	}
	h.SetClock(200)
	must(t, h.FireTimers())
	if got := values(h.Take()); !slices.Equal(got, []string{"||b"}) {
		t.Errorf("output %q, want [\"||b\"]", got)
	}
}
