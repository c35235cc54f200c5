//go:build !wasip1

package guest

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// TestUnionGraph: a union is one vertex with an edge from each stream,
// each edge keeping its stream's partitioner.
func TestUnionGraph(t *testing.T) {
	h := withJob(t, func(env *Env) {
		a := env.TextSource("a")
		b := env.TextSource("b").SetParallelism(2)
		c := env.TextSource("c").Broadcast()
		a.Union("all", b, c).Collect("out")
	})
	g := planOf(t, h)
	if err := jobgraph.Validate(g, 2, 0); err != nil {
		t.Fatal(err)
	}
	u := g.Vertices[3]
	if u.Name != "all" || u.Kind != jobgraph.KindMap {
		t.Fatalf("union vertex %+v", u)
	}
	in := map[int]jobgraph.Partitioner{}
	for _, ed := range g.Edges {
		if ed.Target == u.ID {
			in[ed.Source] = ed.Partitioner
		}
	}
	want := map[int]jobgraph.Partitioner{1: jobgraph.Forward, 2: jobgraph.Rebalance, 3: jobgraph.Broadcast}
	if len(in) != len(want) {
		t.Fatalf("union inputs %v, want %v", in, want)
	}
	for src, p := range want {
		if in[src] != p {
			t.Errorf("edge from %d: %q, want %q", src, in[src], p)
		}
	}
}

func TestUnionMisuse(t *testing.T) {
	for name, tc := range map[string]struct {
		plan func(env *Env)
		want string
	}{
		"no other": {func(env *Env) { env.TextSource("a").Union("u").Collect("o") }, "no other stream"},
		"twice": {func(env *Env) {
			a := env.TextSource("a")
			a.Union("u", a).Collect("o")
		}, "passed twice"},
		"sink": {func(env *Env) {
			a := env.TextSource("a")
			a.Union("u", env.TextSource("b").Collect("o")).Collect("o2")
		}, "a sink has no output"},
		"nil": {func(env *Env) { env.TextSource("a").Union("u", nil).Collect("o") }, "stream 1 is nil"},
	} {
		t.Run(name, func(t *testing.T) { planFails(t, tc.plan, tc.want) })
	}
}

// A union of two forward edges of equal parallelism is still not chained
// to either input: a vertex with several inputs heads its own chain (its
// task reads one gate per input), and what follows it chains to it.
func TestUnionIsNotChainedToItsInputs(t *testing.T) {
	h := withJob(t, func(env *Env) {
		a := env.TextSource("a").Map("ma", func(r Record) Record { return r })
		b := env.TextSource("b")
		a.Union("u", b).Map("after", func(r Record) Record { return r }).Collect("out")
	})
	g := planOf(t, h)
	var got []string
	for _, c := range jobgraph.Chains(g, 2) {
		var ns []string
		for _, id := range c.Vertices {
			ns = append(ns, g.Vertices[id-1].Name)
		}
		got = append(got, strings.Join(ns, "+"))
	}
	if want := "a+ma b u+after+out"; strings.Join(got, " ") != want {
		t.Errorf("chains %q, want %s", got, want)
	}
}
