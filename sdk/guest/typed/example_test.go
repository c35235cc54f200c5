package typed_test

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
)

// The word count, as examples/wordcount declares it. (A plan runs inside a
// module: sdk/guest's tests run such plans natively.)
func Example() {
	guest.Job(func(env *guest.Env) {
		lines := typed.TextLines(env, "lines", env.Args()...)
		words := typed.FlatMap(lines, "tokenize", typed.String(), func(line string, out *typed.Emitter[string]) {
			for _, w := range strings.Fields(line) {
				out.Emit(strings.ToLower(w))
			}
		})
		counts := typed.Count(typed.KeyByValue(words, "word"), "count", guest.EmitFinal())
		typed.Map(counts, "format", typed.String(), func(c typed.KV[string, int64]) string {
			return c.Key + "\t" + strconv.FormatInt(c.Value, 10)
		}).Collect("out")
	})
}

// Count is Flink's .keyBy(...).sum(1) over (word, 1): no function of yours
// per element. The same with Fold, for a count of something else:
//
//	typed.Fold(byWord, "count", typed.Int64(), func(n int64, _ string) int64 { return n + 1 })
func ExampleCount() {
	guest.Job(func(env *guest.Env) {
		lines := typed.TextLines(env, "lines", env.Args()...)
		words := typed.FlatMap(lines, "tokenize", typed.String(), func(line string, out *typed.Emitter[string]) {
			for _, w := range strings.Fields(line) {
				out.Emit(w)
			}
		})
		counts := typed.Count(typed.KeyByValue(words, "word"), "count", guest.EmitFinal())
		typed.Format(counts, "format", func(line []byte, c typed.KV[string, int64]) []byte {
			return strconv.AppendInt(append(append(line, c.Key...), '\t'), c.Value, 10)
		}).Collect("out") // "word<TAB>count" lines
	})
}

func ExampleSum() {
	guest.Job(func(env *guest.Env) {
		numbers := typed.Generate(env, "numbers", typed.Int64(), 100, func(i int64) int64 { return i + 1 })
		byParity := typed.KeyBy(numbers, "parity", typed.String(), func(n int64) string {
			if n%2 == 0 {
				return "even"
			}
			return "odd"
		})
		sums := typed.Sum(byParity, "sum", guest.EmitFinal())
		typed.Format(sums, "format", func(line []byte, s typed.KV[string, int64]) []byte {
			return strconv.AppendInt(append(append(line, s.Key...), ' '), s.Value, 10)
		}).Collect("out") // "even 2550" and "odd 2500"
	})
}

type Reading struct {
	Sensor string
	Temp   float64
}

var readingCodec = typed.Struct(
	typed.FieldOf("sensor", typed.String(), func(r *Reading) *string { return &r.Sensor }),
	typed.FieldOf("temp", typed.Float64(), func(r *Reading) *float64 { return &r.Temp }),
)

// readingsSource is a source of a few readings, for the examples.
func readingsSource(env *guest.Env) *typed.Stream[Reading] {
	fixed := []Reading{{"s1", 20.5}, {"s2", 31}, {"s1", 22.5}}
	return typed.Generate(env, "readings", readingCodec, int64(len(fixed)), func(i int64) Reading { return fixed[i] })
}

func ExampleMap() {
	guest.Job(func(env *guest.Env) {
		lines := typed.TextLines(env, "lines", env.Args()...)
		readings := typed.Map(lines, "parse", readingCodec, func(l string) Reading {
			sensor, temp, _ := strings.Cut(l, ",")
			t, _ := strconv.ParseFloat(temp, 64)
			return Reading{Sensor: strings.Clone(sensor), Temp: t}
		})
		readings.Filter("hot", func(r Reading) bool { return r.Temp > 30 }).
			Sink("alert", func(ctx *guest.Context, r Reading) { guest.Count("hot:"+r.Sensor, 1) })
	})
}

func ExampleKeyBy() {
	guest.Job(func(env *guest.Env) {
		readings := readingsSource(env)
		bySensor := typed.KeyBy(readings, "sensor", typed.String(), func(r Reading) string { return r.Sensor })
		hottest := typed.Reduce(bySensor, "hottest", func(a, b Reading) Reading {
			if b.Temp > a.Temp {
				return b
			}
			return a
		})
		typed.Format(hottest, "show", func(line []byte, kv typed.KV[string, Reading]) []byte {
			return strconv.AppendFloat(append(append(line, kv.Key...), ' '), kv.Value.Temp, 'f', 1, 64)
		}).Collect("out")
	})
}

// meanTemp is the mean temperature of a sensor: a sum and a count as the
// accumulator, their ratio as the result.
type meanTemp struct{}

func (meanTemp) CreateAccumulator() typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{}
}
func (meanTemp) Add(r Reading, acc typed.Tuple2[float64, int64]) typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: acc.A + r.Temp, B: acc.B + 1}
}
func (meanTemp) GetResult(acc typed.Tuple2[float64, int64]) float64 { return acc.A / float64(acc.B) }

func ExampleAggregate() {
	guest.Job(func(env *guest.Env) {
		readings := readingsSource(env)
		bySensor := typed.KeyBy(readings, "sensor", typed.String(), func(r Reading) string { return r.Sensor })
		means := typed.Aggregate(bySensor, "mean", typed.AggregateFunction[Reading, typed.Tuple2[float64, int64], float64](meanTemp{}),
			typed.Pair(typed.Float64(), typed.Int64()), typed.Float64(), guest.EmitFinal())
		typed.Map(means, "show", typed.JSON[typed.KV[string, float64]](), func(kv typed.KV[string, float64]) typed.KV[string, float64] {
			return kv
		}).Collect("out") // {"Key":"s1","Value":21.5} lines
	})
}

func ExampleProcess() {
	last := typed.NewValueState("last", readingCodec)
	guest.Job(func(env *guest.Env) {
		readings := readingsSource(env)
		bySensor := typed.KeyBy(readings, "sensor", typed.String(), func(r Reading) string { return r.Sensor })
		typed.Process(bySensor, "silence", typed.String(), func(ctx *typed.KeyedContext[string], r Reading, out *typed.Emitter[string]) {
			if _, seen, _ := last.Value(ctx); !seen {
				ctx.RegisterTimer(ctx.Now() + 60_000)
			}
			last.Update(ctx, r)
		}).OnTimer(func(ctx *typed.KeyedContext[string], timeMs int64, out *typed.Emitter[string]) {
			r, _, _ := last.Value(ctx)
			out.Emit(fmt.Sprintf("%s: last %.1f", ctx.Key(), r.Temp))
			last.Clear(ctx)
		}).Collect("out")
	})
}

func ExampleGenerate() {
	guest.Job(func(env *guest.Env) {
		squares := typed.Generate(env, "squares", typed.Int64(), 1000, func(i int64) int64 { return i * i })
		typed.Map(squares, "show", typed.String(), func(n int64) string { return strconv.FormatInt(n, 10) }).
			WriteFiles("out", "squares/")
	})
}

func ExampleStruct() {
	b := readingCodec.Append(nil, Reading{Sensor: "s1", Temp: 21.5})
	r, err := readingCodec.Decode(b)
	fmt.Println(len(b), r, err)
	_, err = readingCodec.Decode(b[:5])
	fmt.Println(err)
	// Output:
	// 11 {s1 21.5} <nil>
	// struct typed_test.Reading: malformed encoding: field temp: 2 bytes left, want 8
}

func ExamplePair() {
	c := typed.Pair(typed.String(), typed.Int64())
	b := c.Append(nil, typed.Tuple2[string, int64]{A: "the", B: 3})
	t, _ := c.Decode(b)
	fmt.Printf("%q %v\n", b, t)
	// Output:
	// "\x03the\x03\x00\x00\x00\x00\x00\x00\x00" {the 3}
}

// keyState is one key's state in memory, for the state examples: in a job,
// the operator's context is this.
type keyState map[string][]byte

func (s keyState) Get(name string) ([]byte, bool) { v, ok := s[name]; return v, ok }
func (s keyState) Put(name string, v []byte)      { s[name] = append([]byte(nil), v...) }
func (s keyState) Delete(name string)             { delete(s, name) }

func ExampleMapState() {
	ctx := keyState{}
	perDay := typed.NewMapState("per-day", typed.String(), typed.Int64())
	for _, day := range []string{"mon", "tue", "mon"} {
		n, _, _ := perDay.Get(ctx, day)
		perDay.Put(ctx, day, n+1)
	}
	perDay.All(ctx, func(day string, n int64) bool {
		fmt.Println(day, n)
		return true
	})
	// Output:
	// mon 2
	// tue 1
}

func ExampleListState() {
	ctx := keyState{}
	temps := typed.NewListState("temps", typed.Float64())
	temps.Add(ctx, 20.5)
	temps.Add(ctx, 21)
	l, err := temps.Get(ctx)
	fmt.Println(l, err)
	// Output:
	// [20.5 21] <nil>
}

// reading is a sensor's name and temperature.
type reading = typed.Tuple2[string, float64]

// average is an AggregateFunction (with Merge, a MergingAggregateFunction,
// so it also serves session windows): a sum and a count, and their mean.
type average struct{}

func (average) CreateAccumulator() typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{}
}
func (average) Add(r reading, acc typed.Tuple2[float64, int64]) typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: acc.A + r.B, B: acc.B + 1}
}
func (average) GetResult(acc typed.Tuple2[float64, int64]) float64 { return acc.A / float64(acc.B) }
func (average) Merge(a, b typed.Tuple2[float64, int64]) typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: a.A + b.A, B: a.B + b.B}
}

// A per-sensor average over tumbling minutes of event time, with ten
// seconds of allowed lateness; the readings later than that go to files of
// their own.
func ExampleWindowAggregate() {
	guest.Job(func(env *guest.Env) {
		readings := typed.Source(env, "readings", typed.Pair(typed.String(), typed.Float64()),
			func(ctx *guest.Context, max int, out *typed.Emitter[reading]) bool {
				// for each reading: out.EmitAt(reading{A: sensor, B: temp}, timeMs)
				return true
			}).WithWatermarks(guest.BoundedOutOfOrderness(2 * time.Second))
		bySensor := typed.KeyBy(readings, "sensor", typed.String(), func(r reading) string { return r.A })
		minutes := typed.Window(bySensor, guest.Tumbling(time.Minute).WithAllowedLateness(10*time.Second))
		avg := typed.WindowAggregate(minutes, "average", typed.AggregateFunction[reading, typed.Tuple2[float64, int64], float64](average{}),
			typed.Pair(typed.Float64(), typed.Int64()), typed.Float64())
		typed.Format(avg.Stream, "format", func(line []byte, w typed.Windowed[string, float64]) []byte {
			return fmt.Appendf(line, "%s %d %.1f", w.Key, w.Window.End, w.Value)
		}).WriteFiles("out", "averages")
		typed.Format(avg.Late("late"), "format-late", func(line []byte, r reading) []byte {
			return fmt.Appendf(line, "late %s %.1f", r.A, r.B)
		}).WriteFiles("late-out", "late-readings")
	})
}
