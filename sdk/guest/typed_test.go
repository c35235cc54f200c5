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
	line = strings.ToLower(line)
	i := 0
	for {
		for i < len(line) && !isLetter[line[i]] {
			i++
		}
		if i == len(line) {
			return
		}
		start := i
		for i < len(line) && isLetter[line[i]] {
			i++
		}
		out.Emit(line[start:i])
	}
}

// typedWordCount is examples/wordcount's plan.
func typedWordCount(env *guest.Env) {
	lines := typed.TextLines(env, "lines", env.Args()...)
	words := typed.FlatMap(lines, "tokenize", typed.String(), tokenize)
	byWord := typed.KeyBy(words, "word", typed.String(), func(w string) string { return w })
	counts := typed.Fold(byWord, "count", typed.Int64(), func(n int64, _ string) int64 { return n + 1 }, guest.EmitFinal())
	typed.Map(counts, "format", typed.String(), func(c typed.KV[string, int64]) string {
		return c.Key + "\t" + strconv.FormatInt(c.Value, 10)
	}).Collect("out")
}

func TestTypedWordCount(t *testing.T) {
	h := host(t, typedWordCount)
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
	}{{"bytes", bytesWordCount}, {"typed", typedWordCount}} {
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
