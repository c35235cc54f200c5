//go:build !wasip1

package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// fakeHost is the host side of the ABI in memory, for testing the SDK
// natively.
type fakeHost struct {
	plan       []byte
	failMsg    string
	emitted    []Record
	emits      int
	putBatches int
	counters   map[string]int64
	state      map[string][]byte
	ops        map[string][]byte
	timers     []string
	clock      int64
}

func newFakeHost() *fakeHost {
	return &fakeHost{counters: map[string]int64{}, state: map[string][]byte{}, ops: map[string][]byte{}}
}

func (h *fakeHost) emit(b []byte) {
	h.emits++
	recs, err := abi.DecodeBatch(nil, b)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		r.Key = append([]byte(nil), r.Key...)
		r.Value = append([]byte(nil), r.Value...)
		r.Headers = slices.Clone(r.Headers)
		for i, hd := range r.Headers {
			r.Headers[i] = abi.Header{Key: slices.Clone(hd.Key), Value: slices.Clone(hd.Value)}
		}
		h.emitted = append(h.emitted, r)
	}
}
func (h *fakeHost) setPlan(b []byte)                    { h.plan = append([]byte(nil), b...) }
func (h *fakeHost) fail(msg string)                     { h.failMsg = msg }
func (h *fakeHost) log(level int32, msg string)         {}
func (h *fakeHost) counterAdd(name string, delta int64) { h.counters[name] += delta }
func (h *fakeHost) now() int64                          { return h.clock }
func sk(vertex int32, name string, key []byte) string {
	return fmt.Sprintf("%d/%s/%s", vertex, name, key)
}
func getInto(m map[string][]byte, k string, buf []byte) int32 {
	v, ok := m[k]
	if !ok {
		return abi.Absent
	}
	copy(buf, v)
	return int32(len(v))
}
func (h *fakeHost) stateGet(vertex int32, name string, key, buf []byte) int32 {
	return getInto(h.state, sk(vertex, name, key), buf)
}
func (h *fakeHost) statePut(vertex int32, name string, key, val []byte) {
	h.state[sk(vertex, name, key)] = append([]byte(nil), val...)
}
func (h *fakeHost) statePutBatch(vertex int32, name string, batch []byte) {
	h.putBatches++
	recs, err := abi.DecodeBatch(nil, batch)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		if !r.HasKey {
			panic("state_put_batch: a record without a key")
		}
		h.statePut(vertex, name, r.Key, r.Value)
	}
}
func (h *fakeHost) stateDelete(vertex int32, name string, key []byte) {
	delete(h.state, sk(vertex, name, key))
}

// stateScan hands out every entry at once (the tests' buffers are big).
func (h *fakeHost) stateScan(vertex int32, name string, buf []byte) int32 {
	prefix := fmt.Sprintf("%d/%s/", vertex, name)
	var recs []Record
	var keys []string
	for k := range h.state {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 || h.state["scanned"] != nil {
		delete(h.state, "scanned")
		return 0
	}
	sort.Strings(keys)
	for _, k := range keys {
		recs = append(recs, Record{Key: []byte(k[len(prefix):]), HasKey: true, Value: h.state[k]})
	}
	b := abi.AppendBatch(nil, recs)
	if len(b) > len(buf) {
		return -int32(len(b))
	}
	h.state["scanned"] = []byte{1}
	return int32(copy(buf, b))
}
func (h *fakeHost) opStateGet(vertex int32, name string, buf []byte) int32 {
	return getInto(h.ops, sk(vertex, name, nil), buf)
}
func (h *fakeHost) opStatePut(vertex int32, name string, val []byte) {
	h.ops[sk(vertex, name, nil)] = append([]byte(nil), val...)
}
func (h *fakeHost) opStateDelete(vertex int32, name string) { delete(h.ops, sk(vertex, name, nil)) }
func (h *fakeHost) timerRegister(vertex int32, key []byte, t int64) {
	h.timers = append(h.timers, fmt.Sprintf("%d/%s@%d", vertex, key, t))
}
func (h *fakeHost) timerDelete(vertex int32, key []byte, t int64) {}

// withJob installs plan as the registered job and a fresh fake host.
func withJob(t *testing.T, plan func(env *Env)) *fakeHost {
	t.Helper()
	h := newFakeHost()
	registered, testHost, current, counters = plan, h, nil, nil
	t.Cleanup(func() { registered, testHost, current, counters = nil, nil, nil, nil })
	return h
}

func argsBatch(args ...string) []byte {
	recs := make([]Record, len(args))
	for i, a := range args {
		recs[i].Value = []byte(a)
	}
	return abi.AppendBatch(nil, recs)
}

func planOf(t *testing.T, h *fakeHost, args ...string) *jobgraph.Graph {
	t.Helper()
	if st := doPlan(argsBatch(args...)); st != abi.StatusOK {
		t.Fatalf("plan: status %d: %s", st, h.failMsg)
	}
	var g jobgraph.Graph
	if err := json.Unmarshal(h.plan, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func wordcountPlan(env *Env) {
	env.TextSource("lines", env.Args()...).
		FlatMap("split", func(r Record, out *Collector) {
			for _, w := range strings.Fields(string(r.Value)) {
				out.EmitValue([]byte(w))
			}
		}).
		KeyBy("word", func(r Record) []byte { return r.Value }).
		Reduce("count", func(acc []byte, r Record) []byte { return PutInt64(acc, AsInt64(acc)+1) }, EmitFinal()).
		SetParallelism(3).
		Map("format", func(r Record) Record {
			return Record{Value: []byte(fmt.Sprintf("%s=%d", r.Key, AsInt64(r.Value)))}
		}).
		SetParallelism(3).
		Collect("out")
}

func TestPlanBuildsTheGraph(t *testing.T) {
	h := withJob(t, wordcountPlan)
	g := planOf(t, h, "a.txt", "b,c.txt")
	if err := jobgraph.Validate(g, 3, 0); err != nil {
		t.Fatal(err)
	}
	if g.Name != "lines" || g.Vertices[0].Config["paths"] != `["a.txt","b,c.txt"]` {
		t.Errorf("graph %+v", g)
	}
	parts := []jobgraph.Partitioner{}
	for _, e := range g.Edges {
		parts = append(parts, e.Partitioner)
	}
	want := []jobgraph.Partitioner{jobgraph.Forward, jobgraph.Forward, jobgraph.Hash, jobgraph.Forward, jobgraph.Rebalance}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Errorf("partitioners %v, want %v", parts, want)
	}
	if g.Vertices[3].Config["emit"] != "final" || g.Vertices[3].Parallelism != 3 {
		t.Errorf("reduce vertex %+v", g.Vertices[3])
	}
	// Planning twice gives the same graph: tasks rely on it.
	first := string(h.plan)
	planOf(t, h, "a.txt", "b,c.txt")
	if string(h.plan) != first {
		t.Error("the plan is not deterministic")
	}
}

// TestKeyByChainsToItsInput: a KeyBy runs at its input's parallelism, so
// the records of one key reach the keyed operator through one channel, in
// order — not through a rebalance fanning a p=1 source out to p=3 KeyBys.
func TestKeyByChainsToItsInput(t *testing.T) {
	h := withJob(t, func(env *Env) {
		env.Source("seq", func(*Context, int, *Collector) bool { return true }).SetParallelism(1).
			KeyBy("key", func(r Record) []byte { return r.Key }).
			Reduce("check", func(acc []byte, _ Record) []byte { return acc }).
			Collect("out")
	})
	g := planOf(t, h)
	if err := jobgraph.Validate(g, 3, 0); err != nil {
		t.Fatal(err)
	}
	if g.Vertices[1].Parallelism != 1 || g.Edges[0].Partitioner != jobgraph.Forward || g.Edges[1].Partitioner != jobgraph.Hash {
		t.Fatalf("key_by vertex %+v, edges %+v: want parallelism 1, forward from the source, hash after", g.Vertices[1], g.Edges)
	}
}

func TestPlanMisuse(t *testing.T) {
	for name, tc := range map[string]struct {
		plan func(env *Env)
		want string
	}{
		"reduce without key_by": {func(env *Env) {
			s := env.Source("s", func(*Context, int, *Collector) bool { return true })
			(&KeyedStream{s: s}).Reduce("r", func(a []byte, r Record) []byte { return a }).Collect("o")
		}, "must follow KeyBy"},
		"after a sink": {func(env *Env) {
			env.TextSource("in").Collect("o").Map("m", func(r Record) Record { return r })
		}, "a sink has no output"},
		"nil function":    {func(env *Env) { env.TextSource("in").Map("m", nil).Collect("o") }, `map "m": nil function`},
		"no name":         {func(env *Env) { env.TextSource("").Collect("o") }, "has no name"},
		"bad parallelism": {func(env *Env) { env.TextSource("in").SetParallelism(0) }, "SetParallelism(0)"},
		"fail":            {func(env *Env) { env.Fail(errors.New("no input: pass --input")) }, "no input: pass --input"},
		"timer on map":    {func(env *Env) { env.TextSource("in").OnTimer(nil) }, "only Process operators have timers"},
		"empty":           {func(env *Env) {}, "declares no operators"},
	} {
		t.Run(name, func(t *testing.T) { planFails(t, tc.plan, tc.want) })
	}
	h := withJob(t, nil)
	if st := doPlan(argsBatch()); st != abi.StatusError || !strings.Contains(h.failMsg, "no job declared") {
		t.Errorf("no job: %d %q", st, h.failMsg)
	}
}

func open(t *testing.T, h *fakeHost, chain []int, args ...string) {
	t.Helper()
	info, _ := json.Marshal(abi.TaskInfo{Task: "t", Chain: chain, Parallelism: 1, MaxParallelism: 128, Args: args})
	if st := doOpen(info); st != abi.StatusOK {
		t.Fatalf("open: %d: %s", st, h.failMsg)
	}
}

func process(t *testing.T, h *fakeHost, recs ...Record) {
	t.Helper()
	if st := doProcess(abi.AppendBatch(nil, recs)); st != abi.StatusOK {
		t.Fatalf("process: %d: %s", st, h.failMsg)
	}
}

func TestChainsRunInOneCallAndEmitOnce(t *testing.T) {
	h := withJob(t, wordcountPlan)
	open(t, h, []int{2, 3})
	process(t, h, Record{Value: []byte("a b a")}, Record{Value: []byte("c")})
	if h.emits != 1 {
		t.Errorf("%d emits for one batch, want 1", h.emits)
	}
	var got []string
	for _, r := range h.emitted {
		got = append(got, string(r.Key)+":"+string(r.Value))
	}
	if strings.Join(got, " ") != "a:a b:b a:a c:c" {
		t.Errorf("emitted %q", got)
	}
}

func TestReduceFinalAndFormat(t *testing.T) {
	h := withJob(t, wordcountPlan)
	open(t, h, []int{4, 5})
	kv := func(w string) Record { return Record{Key: []byte(w), HasKey: true, Value: []byte(w)} }
	process(t, h, kv("x"), kv("y"), kv("x"))
	process(t, h, kv("x"))
	if len(h.emitted) != 0 {
		t.Fatalf("a final reduce emitted early: %v", h.emitted)
	}
	if st := doEndInput(); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	var got []string
	for _, r := range h.emitted {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, " ") != "x=3 y=1" {
		t.Errorf("final %q", got)
	}
}

// sumPlan is a reduce that emits every update ("key=sum"), with a barrier
// hook that records what keyed state held when it ran.
func sumPlan(seen *[]string, h **fakeHost) func(env *Env) {
	return func(env *Env) {
		env.TextSource("in", "x").
			KeyBy("key", func(r Record) []byte { return r.Key }).
			Reduce("sum", func(acc []byte, r Record) []byte {
				// Return part of r sometimes: the SDK must copy it.
				if acc == nil {
					return r.Value[:8]
				}
				return PutInt64(acc, AsInt64(acc)+AsInt64(r.Value))
			}).
			OnBarrier(func(ctx *Context, id int64) {
				*seen = append(*seen, fmt.Sprintf("barrier %d: a=%d b=%d", id,
					AsInt64((*h).state[sk(3, "", []byte("a"))]), AsInt64((*h).state[sk(3, "", []byte("b"))])))
			}).
			Map("format", func(r Record) Record {
				return Record{Value: []byte(fmt.Sprintf("%s=%d", r.Key, AsInt64(r.Value)))}
			}).
			Collect("out")
	}
}

func kvInt(k string, n int64) Record {
	return Record{Key: []byte(k), HasKey: true, Value: append(Int64(n), "tail"...)}
}

func TestReduceCacheEmitsEveryUpdateAndFlushesAtBarriers(t *testing.T) {
	var seen []string
	var h *fakeHost
	h = withJob(t, sumPlan(&seen, &h))
	open(t, h, []int{3, 4})
	process(t, h, kvInt("a", 1), kvInt("b", 10), kvInt("a", 2))
	if len(h.state) != 0 {
		t.Errorf("keyed state written per record: %v", h.state)
	}
	if st := doBarrier(1); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	if h.putBatches != 1 {
		t.Errorf("%d state_put_batch calls at the barrier, want 1", h.putBatches)
	}
	process(t, h, kvInt("a", 4))
	if st := doBarrier(2); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	if h.putBatches != 2 {
		t.Errorf("%d state_put_batch calls after two barriers, want 2", h.putBatches)
	}
	var got []string
	for _, r := range h.emitted {
		got = append(got, string(r.Value))
	}
	if want := "a=1 b=10 a=3 a=7"; strings.Join(got, " ") != want {
		t.Errorf("emitted %q, want %q", got, want)
	}
	if want := "barrier 1: a=3 b=10|barrier 2: a=7 b=10"; strings.Join(seen, "|") != want {
		t.Errorf("barrier hooks saw %q, want %q", seen, want)
	}
}

func TestReduceCacheRestoreAndEviction(t *testing.T) {
	defer func(e, b int) { reduceCacheEntries, putBatchBytes = e, b }(reduceCacheEntries, putBatchBytes)
	reduceCacheEntries, putBatchBytes = 3, 20
	var seen []string
	var h *fakeHost
	h = withJob(t, sumPlan(&seen, &h))
	// State from a restored checkpoint: the cache falls through to it.
	h.state[sk(3, "", []byte("a"))] = Int64(100)
	open(t, h, []int{3, 4})
	var recs []Record
	for i := range 10 {
		recs = append(recs, kvInt(fmt.Sprint("k", i%5), 1), kvInt("a", 1))
	}
	process(t, h, recs...)
	if h.putBatches < 3 {
		t.Errorf("%d state_put_batch calls, want evictions in small batches", h.putBatches)
	}
	if st := doBarrier(1); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	want := map[string]int64{"a": 110, "k0": 2, "k1": 2, "k2": 2, "k3": 2, "k4": 2}
	for k, n := range want {
		if got := AsInt64(h.state[sk(3, "", []byte(k))]); got != n {
			t.Errorf("state of %s = %d after a barrier, want %d", k, got, n)
		}
	}
	if last := h.emitted[len(h.emitted)-1]; string(last.Value) != "a=110" {
		t.Errorf("last update %q, want a=110", last.Value)
	}
}

func TestReduceFinalAfterEvictionAndRestore(t *testing.T) {
	defer func(e int) { reduceCacheEntries = e }(reduceCacheEntries)
	reduceCacheEntries = 2
	h := withJob(t, wordcountPlan)
	h.state[sk(4, "", []byte("old"))] = Int64(5) // restored, never seen again
	h.state[sk(4, "", []byte("x"))] = Int64(10)  // restored, counted on
	open(t, h, []int{4, 5})
	kv := func(w string) Record { return Record{Key: []byte(w), HasKey: true, Value: []byte(w)} }
	process(t, h, kv("x"), kv("y"), kv("z"), kv("x"), kv("w"), kv("y"))
	if st := doEndInput(); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	var got []string
	for _, r := range h.emitted {
		got = append(got, string(r.Value))
	}
	sort.Strings(got)
	if want := "old=5 w=1 x=12 y=2 z=1"; strings.Join(got, " ") != want {
		t.Errorf("final %q, want %q", got, want)
	}
	// A checkpoint after the end of input (Flink's final checkpoint) has
	// the final counts.
	if st := doBarrier(9); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	if n := AsInt64(h.state[sk(4, "", []byte("x"))]); n != 12 {
		t.Errorf("keyed state of x is %d after a barrier after the end of input, want 12", n)
	}
}

func TestPanicBecomesFailWithStack(t *testing.T) {
	h := withJob(t, func(env *Env) {
		env.TextSource("in").Map("boom", func(r Record) Record { panic("kaboom") }).Collect("o")
	})
	open(t, h, []int{2})
	if st := doProcess(argsBatch("x")); st != abi.StatusError {
		t.Fatalf("status %d", st)
	}
	if !strings.Contains(h.failMsg, "panic: kaboom") || !strings.Contains(h.failMsg, "guest_test.go") {
		t.Errorf("fail message lacks the panic and its stack:\n%s", h.failMsg)
	}
}

func TestProcessStateTimersCounters(t *testing.T) {
	h := withJob(t, func(env *Env) {
		env.TextSource("in").KeyBy("k", func(r Record) []byte { return r.Value }).
			Process("p", func(ctx *KeyedContext, r Record, out *Collector) {
				n, _ := ctx.GetInt64("n")
				ctx.PutInt64("n", n+1)
				ctx.RegisterTimer(ctx.Now() + 5)
				ctx.Count("seen", 1)
				Count("seen", 1)
				Count("declared", 0)
				out.EmitValue([]byte(fmt.Sprint(n + 1)))
			}).
			OnTimer(func(ctx *KeyedContext, ts int64, out *Collector) {
				ctx.Delete("n")
				out.EmitValue([]byte(fmt.Sprintf("timer %s %d", ctx.Key(), ts)))
			}).
			Collect("o")
	})
	open(t, h, []int{3})
	h.clock = 100
	k := Record{Key: []byte("k"), HasKey: true, Value: []byte("v")}
	process(t, h, k, k)
	if d, ok := h.counters["declared"]; !ok || d != 0 {
		t.Errorf("Count(name, 0) does not declare the counter: %v", h.counters)
	}
	if h.counters["seen"] != 4 || len(h.timers) != 2 || h.timers[0] != "3/k@105" {
		t.Errorf("counters %v timers %v", h.counters, h.timers)
	}
	timer := Record{Key: []byte("k"), HasKey: true, Time: 105, HasTime: true, Value: []byte{3, 0, 0, 0}}
	if st := doTimers(abi.AppendBatch(nil, []Record{timer})); st != abi.StatusOK {
		t.Fatal(h.failMsg)
	}
	var got []string
	for _, r := range h.emitted {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, ",") != "1,2,timer k 105" {
		t.Errorf("emitted %q", got)
	}
	if _, ok := h.state[sk(3, "n", []byte("k"))]; ok {
		t.Error("Delete left the state")
	}
}

func TestSourceWithOperatorState(t *testing.T) {
	h := withJob(t, func(env *Env) {
		pos := 0
		env.Source("nums", func(ctx *Context, max int, out *Collector) bool {
			for i := 0; i < max && pos < 5; i++ {
				out.EmitValue([]byte(fmt.Sprint(pos)))
				pos++
			}
			return pos >= 5
		}).OnOpen(func(ctx *Context) {
			if b, ok := ctx.OperatorState("pos"); ok {
				fmt.Sscan(string(b), &pos)
			}
		}).OnBarrier(func(ctx *Context, id int64) {
			ctx.SetOperatorState("pos", []byte(fmt.Sprint(pos)))
		}).Collect("o")
	})
	open(t, h, []int{1})
	if st := doSourcePoll(2); st != abi.StatusOK {
		t.Fatal(st, h.failMsg)
	}
	doBarrier(1)
	// A new task (after a failure) resumes at the checkpointed position.
	current = nil
	open(t, h, []int{1})
	for st := int32(abi.StatusOK); st == abi.StatusOK; {
		st = doSourcePoll(2)
		if st == abi.StatusError {
			t.Fatal(h.failMsg)
		}
	}
	var got []string
	for _, r := range h.emitted {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, ",") != "0,1,2,3,4" {
		t.Errorf("emitted %q", got)
	}
}

func TestEachRecordRejectsMalformedBatches(t *testing.T) {
	good := abi.AppendBatch(nil, []Record{{Key: []byte("k"), HasKey: true, Time: 3, HasTime: true, Value: []byte("v")}})
	for i := 0; i < len(good); i++ {
		if err := eachRecord(good[:i], &emitter{buf: make([]byte, 4)}); !errors.Is(err, abi.ErrMalformedBatch) {
			t.Errorf("%d bytes: err = %v", i, err)
		}
	}
	e := newEmitter()
	if err := eachRecord(good, e); err != nil {
		t.Fatal(err)
	}
	// The emitter's in-place encoding is the abi encoding.
	putCount(e.buf, int(e.n))
	if string(e.buf) != string(good) {
		t.Errorf("emitter encoded %x, want %x", e.buf, good)
	}
}

func putCount(b []byte, n int) {
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

// FuzzEachRecord checks the SDK's inline decoder against internal/abi's.
func FuzzEachRecord(f *testing.F) {
	f.Add(abi.AppendBatch(nil, []Record{{Value: []byte("a")}, {Key: []byte("k"), HasKey: true, HasTime: true, Time: 7}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := abi.DecodeBatch(nil, b)
		e := newEmitter()
		gerr := eachRecord(b, e)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("abi.DecodeBatch: %v, eachRecord: %v", werr, gerr)
		}
		if werr == nil {
			putCount(e.buf, int(e.n))
			if string(e.buf) != string(abi.AppendBatch(nil, want)) {
				t.Fatal("re-encoding differs")
			}
		}
	})
}

// planFails fails t unless planning plan fails with a message containing
// want.
func planFails(t *testing.T, plan func(env *Env), want string) {
	t.Helper()
	h := withJob(t, plan)
	if st := doPlan(argsBatch()); st != abi.StatusError {
		t.Fatalf("status %d, want error", st)
	}
	if !strings.Contains(h.failMsg, want) {
		t.Errorf("fail message %q lacks %q", h.failMsg, want)
	}
}
