//go:build !wasip1

package guest_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/guest"
	"github.com/sluicehq/sluice/sdk/guest/typed"
)

// These are the tests of sdk/guest/typed that run operators: they need the
// SDK's host test double, which only this package's tests reach
// (export_typed_test.go).

func host(t testing.TB, plan func(env *guest.Env)) *guest.TestHost {
	t.Helper()
	h := guest.NewTestHost(plan)
	t.Cleanup(h.Close)
	return h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lines(ls ...string) []guest.Record {
	recs := make([]guest.Record, len(ls))
	for i, l := range ls {
		recs[i].Value = []byte(l)
	}
	return recs
}

func values(recs []guest.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

var isLetter = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	return t
}()

func tokenize(line string, out *typed.Emitter[string]) {
	i := 0
	for {
		for i < len(line) && !isLetter[line[i]] {
			i++
		}
		if i == len(line) {
			return
		}
		start, upper := i, false
		for i < len(line) && isLetter[line[i]] {
			upper = upper || line[i] < 'a'
			i++
		}
		w := line[start:i]
		if upper {
			w = strings.ToLower(w)
		}
		out.Emit(w)
	}
}

// typedWordCount is examples/wordcount's plan.
func typedWordCount(env *guest.Env) {
	lines := typed.TextLines(env, "lines", env.Args()...)
	words := typed.FlatMap(lines, "tokenize", typed.String(), tokenize)
	counts := typed.Fold(typed.KeyByValue(words, "word"), "count", typed.Int64(), func(n int64, _ string) int64 { return n + 1 }, guest.EmitFinal())
	typed.Format(counts, "format", func(line []byte, c typed.KV[string, int64]) []byte {
		return strconv.AppendInt(append(append(line, c.Key...), '\t'), c.Value, 10)
	}).Collect("out")
}

// The same with KeyBy, Fold and a Map that builds its strings.
func typedWordCountMap(env *guest.Env) {
	lines := typed.TextLines(env, "lines", env.Args()...)
	words := typed.FlatMap(lines, "tokenize", typed.String(), tokenize)
	byWord := typed.KeyBy(words, "word", typed.String(), func(w string) string { return w })
	counts := typed.Fold(byWord, "count", typed.Int64(), func(n int64, _ string) int64 { return n + 1 }, guest.EmitFinal())
	typed.Map(counts, "format", typed.String(), func(c typed.KV[string, int64]) string {
		return c.Key + "\t" + strconv.FormatInt(c.Value, 10)
	}).Collect("out")
}

func TestTypedWordCount(t *testing.T) {
	for _, plan := range []func(*guest.Env){typedWordCount, typedWordCountMap} {
		testTypedWordCount(t, plan)
	}
}

func testTypedWordCount(t *testing.T, plan func(*guest.Env)) {
	h := host(t, plan)
	g, err := h.Plan("in.txt")
	must(t, err)
	var names []string
	for _, v := range g.Vertices {
		names = append(names, fmt.Sprintf("%s:%s", v.Name, v.Kind))
	}
	if got, want := strings.Join(names, " "), "lines:source tokenize:flat_map word:key_by count:reduce format:map out:sink"; got != want {
		t.Errorf("vertices %s, want %s", got, want)
	}
	must(t, h.Open(2, 3))
	must(t, h.Process(lines("To be, or not to be", "", "THAT is the question")...))
	var keyed []guest.Record
	for _, r := range h.Take() {
		if string(r.Key) != string(r.Value) || !r.HasKey {
			t.Errorf("keyed word %q/%q", r.Key, r.Value)
		}
		keyed = append(keyed, r)
	}
	if got := strings.Join(values(keyed), " "); got != "to be or not to be that is the question" {
		t.Errorf("words %q", got)
	}
	must(t, h.Open(4, 5))
	must(t, h.Process(keyed...))
	must(t, h.Barrier(1)) // the counts go to keyed state, as the byte-level Reduce's
	must(t, h.EndInput())
	got := values(h.Take())
	slices.Sort(got)
	want := []string{"be\t2", "is\t1", "not\t1", "or\t1", "question\t1", "that\t1", "the\t1", "to\t2"}
	if !slices.Equal(got, want) {
		t.Errorf("counts %q, want %q", got, want)
	}
	if v := h.KeyedState()["4//to"]; string(v) != string(guest.Int64(2)) {
		t.Errorf("keyed state of \"to\" = %v, want guest.Int64(2)", v)
	}
}

// bytesWordCount is examples/wordcount-bytes's plan, for the benchmark.
func bytesWordCount(env *guest.Env) {
	var lower []byte
	env.TextSource("lines", env.Args()...).
		FlatMap("tokenize", func(r guest.Record, out *guest.Collector) {
			b := r.Value
			i := 0
			for {
				for i < len(b) && !isLetter[b[i]] {
					i++
				}
				if i == len(b) {
					return
				}
				start, upper := i, false
				for i < len(b) && isLetter[b[i]] {
					upper = upper || b[i] < 'a'
					i++
				}
				w := b[start:i]
				if upper {
					lower = append(lower[:0], w...)
					for j, c := range lower {
						if c < 'a' {
							lower[j] = c + 'a' - 'A'
						}
					}
					w = lower
				}
				out.EmitValue(w)
			}
		}).
		KeyBy("word", func(r guest.Record) []byte { return r.Value }).
		Reduce("count", func(acc []byte, _ guest.Record) []byte {
			return guest.PutInt64(acc, guest.AsInt64(acc)+1)
		}, guest.EmitFinal()).
		Map("format", func(r guest.Record) guest.Record {
			lower = append(append(lower[:0], r.Key...), '\t')
			lower = strconv.AppendInt(lower, guest.AsInt64(r.Value), 10)
			return guest.Record{Value: lower}
		}).
		Collect("out")
}

// BenchmarkWordCountChains runs the typed and the byte-level word count's
// two chains natively over the same lines (the host only counts what they
// emit), to show what the typed layer adds per word. bench's
// GuestChainsTypedVsBytes measures the same in Wasm, where calls cost more.
func BenchmarkWordCountChains(b *testing.B) {
	var in, keyed []guest.Record
	words := strings.Fields("the quick Brown fox jumps over the lazy dog and The cat")
	for i := range 4096 {
		in = append(in, guest.Record{Value: []byte(strings.Join(words[i%5:], " , "))})
		for _, w := range words[i%5:] {
			w = strings.ToLower(w) + strconv.Itoa(i%1000)
			keyed = append(keyed, guest.Record{Key: []byte(w), HasKey: true, Value: []byte(w)})
		}
	}
	for _, job := range []struct {
		name string
		plan func(env *guest.Env)
	}{{"bytes", bytesWordCount}, {"typed", typedWordCount}, {"typed-map", typedWordCountMap}} {
		h := host(b, job.plan)
		h.Discard()
		b.Run(job.name+"/tokenize", func(b *testing.B) {
			must(b, h.Open(2, 3))
			b.ReportAllocs()
			for b.Loop() {
				must(b, h.Process(in...))
			}
		})
		b.Run(job.name+"/count", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				must(b, h.Open(4, 5))
				must(b, h.Process(keyed...))
				must(b, h.EndInput())
			}
		})
	}
}

type reading struct {
	Sensor string
	Temp   float64
}

func readingCodec() typed.Codec[reading] {
	return typed.Struct(
		typed.FieldOf("sensor", typed.String(), func(r *reading) *string { return &r.Sensor }),
		typed.FieldOf("temp", typed.Float64(), func(r *reading) *float64 { return &r.Temp }),
	)
}

// mean is an AggregateFunction: the accumulator is a sum and a count, the
// result their ratio.
type mean struct{}

func (mean) CreateAccumulator() typed.Tuple2[float64, int64] { return typed.Tuple2[float64, int64]{} }
func (mean) Add(r reading, acc typed.Tuple2[float64, int64]) typed.Tuple2[float64, int64] {
	return typed.Tuple2[float64, int64]{A: acc.A + r.Temp, B: acc.B + 1}
}
func (mean) GetResult(acc typed.Tuple2[float64, int64]) float64 { return acc.A / float64(acc.B) }

func readings(rs ...reading) []guest.Record {
	c := readingCodec()
	out := make([]guest.Record, len(rs))
	for i, r := range rs {
		out[i].Value = c.Append(nil, r)
	}
	return out
}

// keyed sets each record's key as a KeyBy by sensor would.
func keyed(recs []guest.Record) []guest.Record {
	c := readingCodec()
	for i := range recs {
		r, err := c.Decode(recs[i].Value)
		if err != nil {
			panic(err)
		}
		recs[i].Key, recs[i].HasKey = []byte(r.Sensor), true
	}
	return recs
}

// TestTypedReduceFoldAggregate: Flink's reduce (the first element starts),
// a fold from the zero value, and an aggregate whose emitted result is not
// its accumulator, all through keyed state across a barrier and a restore.
func TestTypedReduceFoldAggregate(t *testing.T) {
	plan := func(env *guest.Env) {
		src := typed.Source(env, "in", readingCodec(), none[reading])
		bySensor := typed.KeyBy(src, "sensor", typed.String(), func(r reading) string { return r.Sensor })
		typed.Reduce(bySensor, "max", func(a, b reading) reading {
			if b.Temp > a.Temp {
				return b
			}
			return a
		}).Sink("max-out", func(ctx *guest.Context, kv typed.KV[string, reading]) {
			guest.Count("max:"+kv.Key+":"+strconv.FormatFloat(kv.Value.Temp, 'f', -1, 64), 1)
		})
		typed.Fold(bySensor, "n", typed.Varint(), func(n int64, _ reading) int64 { return n + 1 }).
			Sink("n-out", func(ctx *guest.Context, kv typed.KV[string, int64]) {
				guest.Count("n:"+kv.Key, kv.Value)
			})
		typed.Aggregate(bySensor, "mean", typed.AggregateFunction[reading, typed.Tuple2[float64, int64], float64](mean{}),
			typed.Pair(typed.Float64(), typed.Int64()), typed.Float64(), guest.EmitFinal()).
			Sink("mean-out", func(ctx *guest.Context, kv typed.KV[string, float64]) {
				guest.Count("mean:"+kv.Key+":"+strconv.FormatFloat(kv.Value, 'f', -1, 64), 1)
			})
	}
	h := host(t, plan)
	if _, err := h.Plan(); err != nil {
		t.Fatal(err)
	}
	// Vertices: in 1, sensor 2, max 3, max-out 4, n 5, n-out 6, mean 7, mean-out 8.
	for _, chain := range [][]int{{3, 4}, {5, 6}, {7, 8}} {
		must(t, h.Open(chain...))
		must(t, h.Process(keyed(readings(reading{"a", 1}, reading{"a", -3}, reading{"b", 2}))...))
		must(t, h.Barrier(1))
		// A restart from the checkpoint: the new task reads keyed state back.
		must(t, h.Open(chain...))
		must(t, h.Process(keyed(readings(reading{"a", 5}))...))
		must(t, h.EndInput())
	}
	got := h.Counters()
	for name, want := range map[string]int64{
		"max:a:1": 2, "max:b:2": 1, "max:a:5": 1, // every update emits
		"n:a": 1 + 2 + 3, "n:b": 1,
		"mean:a:1": 1, "mean:b:2": 1, // (1-3+5)/3; final only
	} {
		if got[name] != want {
			t.Errorf("counter %s = %d, want %d (all: %v)", name, got[name], want, got)
		}
	}
}

// TestTypedProcessStateAndTimers: a keyed Process with ValueState, ListState
// and MapState, a timer that reads them, and typed output.
func TestTypedProcessStateAndTimers(t *testing.T) {
	last := typed.NewValueState("last", readingCodec())
	all := typed.NewListState("all", typed.Float64())
	bySign := typed.NewMapState("sign", typed.Bool(), typed.Int64())
	plan := func(env *guest.Env) {
		src := typed.Source(env, "in", readingCodec(), none[reading])
		bySensor := typed.KeyBy(src, "sensor", typed.String(), func(r reading) string { return r.Sensor })
		typed.Process(bySensor, "alarm", typed.String(), func(ctx *typed.KeyedContext[string], r reading, out *typed.Emitter[string]) {
			if _, seen, err := last.Value(ctx); err != nil {
				panic(err)
			} else if !seen {
				ctx.RegisterTimer(ctx.Now() + 10)
			}
			last.Update(ctx, r)
			all.Add(ctx, r.Temp)
			n, _, err := bySign.Get(ctx, r.Temp >= 0)
			must(t, err)
			must(t, bySign.Put(ctx, r.Temp >= 0, n+1))
			out.Emit(ctx.Key() + " seen")
		}).OnTimer(func(ctx *typed.KeyedContext[string], timeMs int64, out *typed.Emitter[string]) {
			r, _, err := last.Value(ctx)
			must(t, err)
			temps, err := all.Get(ctx)
			must(t, err)
			pos, _, err := bySign.Get(ctx, true)
			must(t, err)
			out.Emit(fmt.Sprintf("%s@%d last=%v all=%v positive=%d", ctx.Key(), timeMs, r.Temp, temps, pos))
		}).Collect("out")
	}
	h := host(t, plan)
	if _, err := h.Plan(); err != nil {
		t.Fatal(err)
	}
	must(t, h.Open(3))
	h.SetClock(100)
	must(t, h.Process(keyed(readings(reading{"a", 1}, reading{"b", -2}, reading{"a", 3}))...))
	h.SetClock(110)
	must(t, h.FireTimers())
	got := values(h.Take())
	want := []string{"a seen", "b seen", "a seen", "a@110 last=3 all=[1 3] positive=2", "b@110 last=-2 all=[-2] positive=0"}
	if !slices.Equal(got, want) {
		t.Errorf("output\n%q\nwant\n%q", got, want)
	}
}

// TestTypedGenerateResumes: the generator source keeps its position in
// operator state and resumes from it; Filter and Map keep the types.
func TestTypedGenerateResumes(t *testing.T) {
	plan := func(env *guest.Env) {
		n := typed.Generate(env, "numbers", typed.Int64(), 10, func(i int64) int64 { return i * i })
		even := n.Filter("even", func(v int64) bool { return v%2 == 0 })
		typed.Map(even, "show", typed.String(), func(v int64) string { return strconv.FormatInt(v, 10) }).Collect("out")
	}
	h := host(t, plan)
	g, err := h.Plan()
	must(t, err)
	if g.Vertices[0].Parallelism != 1 {
		t.Errorf("the generator runs at parallelism %d, want 1", g.Vertices[0].Parallelism)
	}
	must(t, h.Open(1, 2, 3))
	if done, err := h.Poll(4); done || err != nil {
		t.Fatalf("poll: %v %v", done, err)
	}
	must(t, h.Barrier(1))
	if got := strings.Join(values(h.Take()), " "); got != "0 4" {
		t.Errorf("first four squares, even: %q", got)
	}
	// A restart from checkpoint 1 resumes at 4.
	must(t, h.Open(1, 2, 3))
	for {
		done, err := h.Poll(3)
		must(t, err)
		if done {
			break
		}
	}
	if got := strings.Join(values(h.Take()), " "); got != "16 36 64" {
		t.Errorf("after the restart: %q", got)
	}
}

// TestTypedKVStreams: a Map can make a stream of KV (its key is the
// record's key); keying one again fails the plan and says what to do.
func TestTypedKVStreams(t *testing.T) {
	h := host(t, func(env *guest.Env) {
		lines := typed.TextLines(env, "lines", "in.txt")
		kvs := typed.Map(lines, "split", typed.KeyValue(typed.String(), typed.Int()), func(l string) typed.KV[string, int] {
			return typed.KV[string, int]{Key: l[:1], Value: len(l)}
		})
		kvs.Filter("long", func(kv typed.KV[string, int]) bool { return kv.Value > 2 }).Collect("out")
	})
	_, err := h.Plan()
	must(t, err)
	must(t, h.Open(2, 3))
	must(t, h.Process(lines("ab", "xyz", "hello")...))
	got := h.Take()
	if len(got) != 2 || string(got[0].Key) != "x" || !got[0].HasKey || string(got[1].Key) != "h" {
		t.Fatalf("records %+v", got)
	}
	if n, _ := typed.Int().Decode(got[1].Value); n != 5 {
		t.Errorf("value %v", got[1].Value)
	}

	h2 := host(t, func(env *guest.Env) {
		lines := typed.TextLines(env, "lines", "in.txt")
		byLen := typed.Fold(typed.KeyByValue(lines, "line"), "n", typed.Int64(), func(n int64, _ string) int64 { return n + 1 })
		typed.KeyBy(byLen, "again", typed.Int64(), func(kv typed.KV[string, int64]) int64 { return kv.Value })
	})
	if _, err := h2.Plan(); err == nil || !strings.Contains(err.Error(), `KeyBy "again" reads a stream of KV`) || !strings.Contains(err.Error(), "Map it to a Tuple2") {
		t.Errorf("KeyBy of a KV stream: %v", err)
	}
}

// TestTypedDecodeFailureFailsTheTask: records that are not the stream's
// codec's fail the task with a message naming the operator.
func TestTypedDecodeFailureFailsTheTask(t *testing.T) {
	h := host(t, func(env *guest.Env) {
		src := typed.Source(env, "in", typed.Int64(), none[int64])
		typed.Map(src, "double", typed.Int64(), func(v int64) int64 { return 2 * v }).Collect("out")
	})
	_, err := h.Plan()
	must(t, err)
	must(t, h.Open(2))
	err = h.Process(guest.Record{Value: []byte("abc")})
	if err == nil || !strings.Contains(err.Error(), `"double": decode an input record: malformed encoding: int64: 3 bytes, want 8`) {
		t.Fatalf("process of a bad record: %v", err)
	}
	must(t, h.Open(2))
	must(t, h.Process(guest.Record{Value: guest.Int64(21)}))
	if got := h.Take(); len(got) != 1 || guest.AsInt64(got[0].Value) != 42 {
		t.Fatalf("double 21: %+v", got)
	}
}

// none is a source the tests feed by hand: its task is never polled.
func none[T any](*guest.Context, int, *typed.Emitter[T]) bool { return true }

// TestTypedCountAndSum: Count and Sum keep a key's total in Int64's
// encoding in keyed state, across a barrier and a restore, and emit after
// every update or, with EmitFinal, once per key at the end of input. Sum
// reads elements of Int64 inline and of another int64 codec (Varint)
// through it.
func TestTypedCountAndSum(t *testing.T) {
	plan := func(env *guest.Env) {
		words := typed.Source(env, "words", typed.String(), none[string])
		byWord := typed.KeyByValue(words, "word")
		typed.Count(byWord, "every", guest.EmitFinal()).
			Sink("every-out", func(ctx *guest.Context, kv typed.KV[string, int64]) { guest.Count("final:"+kv.Key, kv.Value) })
		typed.Count(byWord, "updates").
			Sink("updates-out", func(ctx *guest.Context, kv typed.KV[string, int64]) {
				guest.Count("update:"+kv.Key+":"+strconv.FormatInt(kv.Value, 10), 1)
			})
		for _, c := range []typed.Codec[int64]{typed.Int64(), typed.Varint()} {
			name := fmt.Sprintf("%T", c)
			ns := typed.Source(env, "n-"+name, c, none[int64])
			byParity := typed.KeyBy(ns, "parity-"+name, typed.String(), func(n int64) string { return map[bool]string{true: "even", false: "odd"}[n%2 == 0] })
			typed.Sum(byParity, "sum-"+name, guest.EmitFinal()).
				Sink("sum-out-"+name, func(ctx *guest.Context, kv typed.KV[string, int64]) { guest.Count(name+":"+kv.Key, kv.Value) })
		}
	}
	h := host(t, plan)
	if _, err := h.Plan(); err != nil {
		t.Fatal(err)
	}
	word := func(ws ...string) []guest.Record {
		recs := lines(ws...)
		for i := range recs {
			recs[i].Key, recs[i].HasKey = recs[i].Value, true
		}
		return recs
	}
	// Vertices: words 1, word 2, every 3, every-out 4, updates 5,
	// updates-out 6, then per codec: source, parity, sum, sum-out (7–10,
	// 11–14).
	for _, chain := range [][]int{{3, 4}, {5, 6}} {
		must(t, h.Open(chain...))
		must(t, h.Process(word("to", "be", "to")...))
		must(t, h.Barrier(1))
		must(t, h.Open(chain...)) // a restart from the checkpoint
		must(t, h.Process(word("to")...))
		must(t, h.EndInput())
	}
	// As of barrier 1: the SDK writes its cached counts to keyed state at
	// barriers.
	if v := h.KeyedState()["3//to"]; string(v) != string(guest.Int64(2)) {
		t.Errorf("keyed state of \"to\" = %v, want guest.Int64(2)", v)
	}
	nums := func(c typed.Codec[int64], ns ...int64) []guest.Record {
		recs := make([]guest.Record, len(ns))
		for i, n := range ns {
			recs[i].Value = c.Append(nil, n)
			recs[i].Key = []byte(map[bool]string{true: "even", false: "odd"}[n%2 == 0])
			recs[i].HasKey = true
		}
		return recs
	}
	for i, c := range []typed.Codec[int64]{typed.Int64(), typed.Varint()} {
		chain := []int{9 + 4*i, 10 + 4*i}
		must(t, h.Open(chain...))
		must(t, h.Process(nums(c, 1, 2, -7, 10)...))
		must(t, h.Barrier(1))
		must(t, h.Open(chain...))
		must(t, h.Process(nums(c, 4, 3)...))
		must(t, h.EndInput())
	}
	got := h.Counters()
	want := map[string]int64{
		"final:to": 3, "final:be": 1,
		"update:to:1": 1, "update:to:2": 1, "update:to:3": 1, "update:be:1": 1,
	}
	for _, c := range []typed.Codec[int64]{typed.Int64(), typed.Varint()} {
		name := fmt.Sprintf("%T", c)
		want[name+":even"], want[name+":odd"] = 2+10+4, 1-7+3
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("counter %s = %d, want %d (all: %v)", name, got[name], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counters %v, want %v", got, want)
	}
}

// TestTypedEmitPaths: an Emitter passes strings and byte slices on as
// their bytes, keeps the input's timestamp when it has one (the path that
// encodes), encodes other types and KV, and copies what EmitText is given.
func TestTypedEmitPaths(t *testing.T) {
	h := host(t, func(env *guest.Env) {
		lines := typed.TextLines(env, "lines", "in.txt")
		var buf []byte
		typed.FlatMap(lines, "strings", typed.String(), func(l string, out *typed.Emitter[string]) {
			out.Emit(l)
			buf = append(buf[:0], strings.ToUpper(l)...)
			typed.EmitText(out, buf)
			buf[0] = '!' // after EmitText returned: the SDK has copied it
		}).Collect("s")
		typed.FlatMap(lines, "bytes", typed.Bytes(), func(l string, out *typed.Emitter[[]byte]) {
			out.Emit([]byte(l + "!"))
		}).Collect("b")
		typed.FlatMap(lines, "ints", typed.Int64(), func(l string, out *typed.Emitter[int64]) {
			out.Emit(int64(len(l)))
		}).Collect("i")
		typed.FlatMap(lines, "kvs", typed.KeyValue(typed.String(), typed.Int64()), func(l string, out *typed.Emitter[typed.KV[string, int64]]) {
			out.Emit(typed.KV[string, int64]{Key: l, Value: int64(len(l))})
		}).Collect("kv")
	})
	if _, err := h.Plan(); err != nil {
		t.Fatal(err)
	}
	in := []guest.Record{{Value: []byte("ab")}, {Value: []byte("xyz"), Time: 42, HasTime: true}}
	type rec struct {
		key     string
		hasKey  bool
		value   string
		time    int64
		hasTime bool
	}
	run := func(chain ...int) []rec {
		must(t, h.Open(chain...))
		must(t, h.Process(in...))
		var out []rec
		for _, r := range h.Take() {
			out = append(out, rec{string(r.Key), r.HasKey, string(r.Value), r.Time, r.HasTime})
		}
		return out
	}
	i64 := func(n int64) string { return string(guest.Int64(n)) }
	// Vertices: lines 1, then each FlatMap (2, 4, 6, 8) and its collect
	// sink, a host connector.
	for _, c := range []struct {
		name  string
		chain []int
		want  []rec
	}{
		{"strings", []int{2}, []rec{{value: "ab"}, {value: "AB"}, {value: "xyz", time: 42, hasTime: true}, {value: "XYZ", time: 42, hasTime: true}}},
		{"bytes", []int{4}, []rec{{value: "ab!"}, {value: "xyz!", time: 42, hasTime: true}}},
		{"ints", []int{6}, []rec{{value: i64(2)}, {value: i64(3), time: 42, hasTime: true}}},
		{"kvs", []int{8}, []rec{{key: "ab", hasKey: true, value: i64(2)}, {key: "xyz", hasKey: true, value: i64(3), time: 42, hasTime: true}}},
	} {
		if got := run(c.chain...); !slices.Equal(got, c.want) {
			t.Errorf("%s: records %+v, want %+v", c.name, got, c.want)
		}
	}
}
