//go:build !wasip1

package guest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// The examples declare jobs as a module does and then play the cluster's
// part in memory: exampleHost calls the module's exports (docs/ABI.md) the
// way the JobManager and TaskManagers do and answers its host calls. In a
// real module the Job call sits in an init function of package main and the
// cluster does the rest.

// Example is the classic first job, a word count: lines in, words out, the
// words keyed by themselves and counted, one "word<TAB>count" per word.
func Example() {
	h := newExampleHost()
	defer h.close()

	Job(func(env *Env) {
		env.SetName("wordcount")
		env.TextSource("lines", env.Args()...).
			FlatMap("tokenize", func(r Record, out *Collector) {
				notLetter := func(c rune) bool { return !unicode.IsLetter(c) }
				for _, w := range strings.FieldsFunc(string(r.Value), notLetter) {
					out.EmitValue([]byte(strings.ToLower(w)))
				}
			}).
			KeyBy("word", func(r Record) []byte { return r.Value }).
			Reduce("count", func(acc []byte, _ Record) []byte {
				return PutInt64(acc, AsInt64(acc)+1)
			}, EmitFinal()).
			Map("format", func(r Record) Record {
				return Record{Value: fmt.Appendf(nil, "%s\t%d", r.Key, AsInt64(r.Value))}
			}).
			Collect("out")
	})

	// The host's text connector (vertex 1) reads the lines; the first task
	// runs tokenize and word (vertices 2 and 3) on them.
	words := h.run([]int{2, 3}, lines("To be, or not to be:", "that is the question."))
	// Records are routed by key to the counting task (vertices 4 and 5),
	// which emits each word's count once its input ends.
	for _, r := range h.run([]int{4, 5}, words) {
		fmt.Println(string(r.Value))
	}
	// Output:
	// to	2
	// be	2
	// or	1
	// not	1
	// that	1
	// is	1
	// the	1
	// question	1
}

// ExampleJob declares a job that checks its arguments, and shows the job
// graph the JobManager gets when it plans the job at submission (what
// `sluice plan` prints).
func ExampleJob() {
	h := newExampleHost()
	defer h.close()

	Job(func(env *Env) {
		if len(env.Args()) == 0 {
			env.Fail(errors.New("no input: pass the files to read after --"))
			return
		}
		env.SetName("shout")
		env.TextSource("lines", env.Args()...).
			Filter("non-empty", func(r Record) bool { return len(r.Value) > 0 }).
			Map("upper", func(r Record) Record { return Record{Value: bytes.ToUpper(r.Value)} }).
			SetParallelism(4).
			WriteFiles("out", "results/shout")
	})

	g, err := h.plan("logs/*.txt")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("job", g.Name)
	for _, v := range g.Vertices {
		fmt.Printf("vertex %d %s: %s p=%d %s %v\n", v.ID, v.Name, v.Kind, v.Parallelism, v.Connector, v.Config)
	}
	for _, e := range g.Edges {
		fmt.Printf("edge %d -> %d %s\n", e.Source, e.Target, e.Partitioner)
	}
	// Without arguments the plan fails with the job's own message.
	_, err = h.plan()
	fmt.Println(err)
	// Output:
	// job shout
	// vertex 1 lines: source p=0 text map[paths:["logs/*.txt"]]
	// vertex 2 non-empty: filter p=0  map[]
	// vertex 3 upper: map p=4  map[]
	// vertex 4 out: sink p=0 file map[path:results/shout]
	// edge 1 -> 2 forward
	// edge 2 -> 3 rebalance
	// edge 3 -> 4 rebalance
	// plan: no input: pass the files to read after --
}

// ExampleKeyedStream_Process keeps per-key state and timers on the host: a
// user's clicks form a session that ends after 30 seconds without one.
func ExampleKeyedStream_Process() {
	h := newExampleHost()
	defer h.close()

	const idle = 30_000 // milliseconds
	Job(func(env *Env) {
		env.TextSource("clicks", "clicks.log").
			KeyBy("user", func(r Record) []byte {
				user, _, _ := bytes.Cut(r.Value, []byte(" "))
				return user
			}).
			Process("sessions", func(ctx *KeyedContext, r Record, out *Collector) {
				n, _ := ctx.GetInt64("clicks")
				ctx.PutInt64("clicks", n+1)
				// A click moves the session's end.
				if end, ok := ctx.GetInt64("end"); ok {
					ctx.DeleteTimer(end)
				}
				ctx.PutInt64("end", ctx.Now()+idle)
				ctx.RegisterTimer(ctx.Now() + idle)
			}).
			OnTimer(func(ctx *KeyedContext, timeMs int64, out *Collector) {
				n, _ := ctx.GetInt64("clicks")
				out.EmitValue(fmt.Appendf(nil, "%s: %d clicks, ended at %d", ctx.Key(), n, timeMs))
				ctx.Delete("clicks")
				ctx.Delete("end")
			}).
			Collect("sessions")
	})

	clicks := h.run([]int{2}, lines("ann /home", "bob /home", "ann /cart"))
	h.open([]int{3})
	h.clock = 0 // processing time, as the host grants it
	h.process(clicks[0], clicks[1])
	h.clock = 10_000
	h.process(clicks[2])
	for _, now := range []int64{35_000, 60_000} {
		h.clock = now
		h.fireTimers()
		for _, r := range h.take() {
			fmt.Printf("at %d: %s\n", now, r.Value)
		}
	}
	// Output:
	// at 35000: bob: 1 clicks, ended at 30000
	// at 60000: ann: 2 clicks, ended at 40000
}

// ExampleEnv_Source is a source written in Go that keeps its position in
// operator state, so a task restarted from a checkpoint resumes where the
// checkpoint was taken.
func ExampleEnv_Source() {
	h := newExampleHost()
	defer h.close()

	Job(func(env *Env) {
		next := 0 // the next number to emit; each task has its own
		env.Source("numbers", func(ctx *Context, max int, out *Collector) (done bool) {
			for ; max > 0 && next < 5; max-- {
				out.EmitValue(strconv.AppendInt(nil, int64(next), 10))
				next++
			}
			return next == 5
		}).
			OnOpen(func(ctx *Context) {
				if b, ok := ctx.OperatorState("next"); ok {
					next = int(AsInt64(b))
				}
			}).
			OnBarrier(func(ctx *Context, checkpointID int64) {
				ctx.SetOperatorState("next", Int64(int64(next)))
			}).
			Collect("out")
	})

	h.open([]int{1})
	h.poll(2)
	h.barrier(1)
	h.poll(2)
	fmt.Println("first attempt:", values(h.take()))
	// The task fails here; its replacement starts from checkpoint 1.
	h.open([]int{1})
	for !h.poll(2) {
	}
	fmt.Println("after the restart:", values(h.take()))
	// Output:
	// first attempt: [0 1 2 3]
	// after the restart: [2 3 4]
}

// exampleHost is the cluster's side of the ABI for the examples: fakeHost,
// with timers kept in the form the timers export takes them back.
type exampleHost struct {
	*fakeHost
	timers []Record
}

func newExampleHost() *exampleHost {
	h := &exampleHost{fakeHost: newFakeHost()}
	registered, testHost, current, counters = nil, h, nil, nil
	return h
}

// close forgets the job and the host.
func (h *exampleHost) close() { registered, testHost, current, counters = nil, nil, nil, nil }

func (h *exampleHost) timerRegister(vertex int32, key []byte, t int64) {
	h.timerDelete(vertex, key, t)
	h.timers = append(h.timers, Record{Key: bytes.Clone(key), HasKey: true, Time: t, HasTime: true,
		Value: binary.LittleEndian.AppendUint32(nil, uint32(vertex))})
}

func (h *exampleHost) timerDelete(vertex int32, key []byte, t int64) {
	h.timers = slices.DeleteFunc(h.timers, func(r Record) bool {
		return r.Time == t && bytes.Equal(r.Key, key) && int32(binary.LittleEndian.Uint32(r.Value)) == vertex
	})
}

// plan calls the plan export with args and returns the job graph.
func (h *exampleHost) plan(args ...string) (*jobgraph.Graph, error) {
	if st := doPlan(argsBatch(args...)); st != abi.StatusOK {
		return nil, errors.New(h.failMsg)
	}
	var g jobgraph.Graph
	if err := json.Unmarshal(h.fakeHost.plan, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// open starts a task running chain (vertex ids, head first) in a new
// instance of the module.
func (h *exampleHost) open(chain []int) {
	current, counters = nil, nil
	info, _ := json.Marshal(abi.TaskInfo{Task: "example", Chain: chain, Parallelism: 1, MaxParallelism: 128})
	h.check("open", doOpen(info))
}

func (h *exampleHost) process(recs ...Record) {
	h.check("process", doProcess(abi.AppendBatch(nil, recs)))
}

// poll asks the task's source for up to max records and reports whether it
// has ended.
func (h *exampleHost) poll(max int) (done bool) {
	st := doSourcePoll(int32(max))
	if st != abi.StatusDone {
		h.check("source poll", st)
	}
	return st == abi.StatusDone
}

func (h *exampleHost) barrier(checkpointID int64) { h.check("barrier", doBarrier(checkpointID)) }

// fireTimers fires the timers due at the host's clock, earliest first.
func (h *exampleHost) fireTimers() {
	slices.SortStableFunc(h.timers, func(a, b Record) int { return int(a.Time - b.Time) })
	var due []Record
	for len(h.timers) > 0 && h.timers[0].Time <= h.clock {
		due, h.timers = append(due, h.timers[0]), h.timers[1:]
	}
	if len(due) > 0 {
		h.check("timers", doTimers(abi.AppendBatch(nil, due)))
	}
}

// take returns the records emitted since the last take.
func (h *exampleHost) take() []Record {
	out := h.emitted
	h.emitted = nil
	return out
}

// run runs one bounded task: chain gets in as one batch, then the end of
// its input; run returns what the chain emitted.
func (h *exampleHost) run(chain []int, in []Record) []Record {
	h.open(chain)
	h.process(in...)
	h.check("end of input", doEndInput())
	h.check("close", doClose())
	return h.take()
}

func (h *exampleHost) check(call string, st int32) {
	if st != abi.StatusOK {
		panic(fmt.Sprintf("%s: status %d: %s", call, st, h.failMsg))
	}
}

// lines returns one record per line, as the text connector reads them.
func lines(ls ...string) []Record {
	recs := make([]Record, len(ls))
	for i, l := range ls {
		recs[i].Value = []byte(l)
	}
	return recs
}

func values(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}
