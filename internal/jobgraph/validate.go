package jobgraph

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalidGraph is wrapped by every error Validate returns.
var ErrInvalidGraph = errors.New("invalid job graph")

// MaxParallelismOf returns the number of key groups of g: g.MaxParallelism,
// or DefaultMaxParallelism when that is 0.
func MaxParallelismOf(g *Graph) int {
	if g.MaxParallelism > 0 {
		return g.MaxParallelism
	}
	return DefaultMaxParallelism
}

// ParallelismOf returns v's parallelism, or defaultParallelism when v sets none.
func ParallelismOf(v *Vertex, defaultParallelism int) int {
	if v.Parallelism > 0 {
		return v.Parallelism
	}
	return defaultParallelism
}

// KnownKind reports whether k is an operator kind of ABI v1.
func KnownKind(k Kind) bool {
	switch k {
	case KindSource, KindMap, KindFlatMap, KindFilter, KindKeyBy, KindReduce, KindProcess, KindSink:
		return true
	}
	return false
}

// KnownPartitioner reports whether p is a partitioner of ABI v1.
func KnownPartitioner(p Partitioner) bool {
	switch p {
	case Forward, Hash, Rebalance, Broadcast:
		return true
	}
	return false
}

// ConnectorKind returns the kind of vertex a host connector can be, and false
// for an unknown connector.
func ConnectorKind(connector string) (Kind, bool) {
	switch connector {
	case ConnectorText, ConnectorNexmark, ConnectorJetStreamSource, ConnectorKafkaSource:
		return KindSource, true
	case ConnectorCollect, ConnectorFile, ConnectorBlackhole, ConnectorJetStreamSink, ConnectorKafkaSink:
		return KindSink, true
	}
	return "", false
}

// Keyed reports whether operators of kind k read the record key and keyed
// state, and so must be fed by hash edges only.
func Keyed(k Kind) bool { return k == KindReduce || k == KindProcess }

// Bounds on the size of a job graph.
const (
	MaxVertices = 1024
	MaxEdges    = 4096
	// MaxNameBytes bounds the job's name, each operator's name and each
	// config key: they are shown in tables, task names and logs.
	MaxNameBytes = 256
	// MaxVertexID bounds vertex ids: the host keeps the top bit of a
	// 32-bit id for its own use (event-time timers).
	MaxVertexID = 1<<31 - 1
)

// BadName says what is wrong with a name a guest chose for the job, an
// operator or a config key, or returns "". A name is valid UTF-8 of at most
// MaxNameBytes bytes whose every character is printable (strconv.IsPrint:
// letters, marks, numbers, punctuation, symbols and the ASCII space), so a
// name cannot carry a terminal escape sequence, a line break or a
// direction override.
func BadName(s string) string {
	if len(s) > MaxNameBytes {
		return fmt.Sprintf("is %d bytes long, above the limit of %d", len(s), MaxNameBytes)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Sprintf("is not valid UTF-8 (byte %d)", i)
			}
		}
		if !strconv.IsPrint(r) {
			return fmt.Sprintf("contains %U at byte %d, which is not printable: use letters, digits, punctuation and spaces", r, i)
		}
	}
	return ""
}

// Validate checks that g is a job graph the cluster can run:
//
//   - at most MaxVertices vertices and MaxEdges edges;
//   - the job's and operators' names and config keys pass BadName;
//   - at least one vertex, vertex ids unique, kinds, partitioners and host
//     connectors known, connectors on vertices of the matching kind;
//   - max parallelism in [1, maxParallelismLimit] (0 means the default), each
//     vertex's parallelism ≥ 0 (0 means defaultParallelism) and, once
//     defaulted, in [1, max parallelism];
//   - edges join existing vertices, no self-loops, no duplicates, no cycles;
//   - sources have no inputs, sinks no outputs; every other vertex has at
//     least one input and one output (records must end in a sink);
//   - forward edges join vertices of equal parallelism;
//   - keyed operators (reduce, process) are fed by hash edges only;
//   - watermark strategies (Vertex.Watermarks) only on sources, well
//     formed, and "guest" only on guest sources.
//
// maxParallelismLimit ≤ 0 means no limit beyond the graph's own.
//
// # Errors
//
// The error wraps ErrInvalidGraph and lists every problem found, each naming
// the vertex ("vertex 3 \"sum\"") or edge ("edge 1->3") it is about.
func Validate(g *Graph, defaultParallelism, maxParallelismLimit int) error {
	if g == nil {
		return fmt.Errorf("%w: no graph", ErrInvalidGraph)
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	if defaultParallelism < 1 {
		bad("default parallelism %d: must be at least 1", defaultParallelism)
		defaultParallelism = 1
	}
	maxP := MaxParallelismOf(g)
	switch {
	case g.MaxParallelism < 0:
		bad("max parallelism %d: must be at least 1 (or 0 for the default %d)", g.MaxParallelism, DefaultMaxParallelism)
	case maxParallelismLimit > 0 && maxP > maxParallelismLimit:
		bad("max parallelism %d: above the cluster's limit %d", maxP, maxParallelismLimit)
	}
	if why := BadName(g.Name); why != "" {
		bad("job name %s %s", shortQuote(g.Name), why)
	}
	if len(g.Vertices) == 0 {
		bad("no operators: declare at least a source and a sink")
	}
	// A hostile plan could declare millions of operators; every later step
	// is linear or worse in them. Refuse before building anything.
	if len(g.Vertices) > MaxVertices || len(g.Edges) > MaxEdges {
		return fmt.Errorf("%w: %d operators and %d edges: at most %d and %d", ErrInvalidGraph, len(g.Vertices), len(g.Edges), MaxVertices, MaxEdges)
	}

	byID := make(map[int]*Vertex, len(g.Vertices))
	for i := range g.Vertices {
		v := &g.Vertices[i]
		if _, dup := byID[v.ID]; dup {
			bad("%s: duplicate vertex id", vname(v))
			continue
		}
		byID[v.ID] = v
		if v.ID < 0 || v.ID > MaxVertexID {
			bad("%s: id %d out of range: use 0 to %d", vname(v), v.ID, MaxVertexID)
		}
		if why := BadName(v.Name); why != "" {
			bad("%s: the name %s", vname(v), why)
		}
		for _, k := range sortedConfigKeys(v.Config) {
			if why := BadName(k); why != "" {
				bad("%s: config key %s %s", vname(v), shortQuote(k), why)
			}
		}
		if s, ok := v.Config[ConfigPoisonRecords]; ok {
			if _, err := ParsePoisonPolicy(s); err != nil {
				bad("%s: config %s=%s: want %s", vname(v), ConfigPoisonRecords, shortQuote(s), PoisonPolicies)
			} else if v.Connector != "" {
				bad("%s: config %s is for guest operators; a connector does not run guest code", vname(v), ConfigPoisonRecords)
			}
		}
		if !KnownKind(v.Kind) {
			bad("%s: unknown kind %s", vname(v), shortQuote(string(v.Kind)))
		}
		switch p := v.Parallelism; {
		case p < 0:
			bad("%s: parallelism %d is negative", vname(v), p)
		case ParallelismOf(v, defaultParallelism) > maxP:
			bad("%s: parallelism %d is above the max parallelism %d", vname(v), ParallelismOf(v, defaultParallelism), maxP)
		}
		switch w, err := v.Watermarks(); {
		case v.Kind != KindSource && v.hasWatermarkKey():
			bad("%s: a watermark strategy is set on a %s: only sources generate watermarks; set it on the source", vname(v), v.Kind)
		case err != nil:
			bad("%s: %v", vname(v), err)
		case w.Kind == WatermarkGuest && v.Connector != "":
			bad("%s: the %q watermark strategy needs a guest source, but this is the host connector %q: use %q or %q", vname(v), WatermarkGuest, v.Connector, WatermarkBounded, WatermarkMonotonous)
		}
		if v.Connector != "" {
			k, ok := ConnectorKind(v.Connector)
			switch {
			case !ok:
				bad("%s: unknown connector %s (known: %s, %s, %s, %s, %s, %s, %s, %s, %s)", vname(v), shortQuote(v.Connector), ConnectorText, ConnectorNexmark, ConnectorCollect, ConnectorFile, ConnectorBlackhole, ConnectorJetStreamSource, ConnectorJetStreamSink, ConnectorKafkaSource, ConnectorKafkaSink)
			case k != v.Kind:
				bad("%s: connector %q is a %s, not a %s", vname(v), v.Connector, k, v.Kind)
			case v.Connector == ConnectorFile:
				if why := badSinkPath(v.SinkPath()); why != "" {
					bad("%s: file sink path %s %s: use a relative path such as \"results/wordcount\"", vname(v), shortQuote(v.SinkPath()), why)
				}
			case v.Connector == ConnectorNexmark:
				if _, err := v.Nexmark(); err != nil {
					bad("%s: %v", vname(v), err)
				}
			case v.Connector == ConnectorJetStreamSource || v.Connector == ConnectorJetStreamSink:
				if _, err := v.JetStream(); err != nil {
					bad("%s: %v", vname(v), err)
				}
				if p := ParallelismOf(v, defaultParallelism); v.Connector == ConnectorJetStreamSource && p != 1 {
					bad("%s: a jetstream source reads its stream with one reader: set its parallelism to 1, not %d (rebalance after it to spread the work)", vname(v), p)
				}
			case v.Connector == ConnectorKafkaSource || v.Connector == ConnectorKafkaSink:
				if _, err := v.Kafka(); err != nil {
					bad("%s: %v", vname(v), err)
				}
			case v.Connector == ConnectorText:
				if _, _, err := v.MonitorInterval(); err != nil {
					bad("%s: %v", vname(v), err)
				}
			}
		}
	}

	ins := make(map[int]int)
	outs := make(map[int]int)
	seen := make(map[[2]int]bool)
	for _, e := range g.Edges {
		en := fmt.Sprintf("edge %d->%d", e.Source, e.Target)
		src, okS := byID[e.Source]
		dst, okT := byID[e.Target]
		if !okS {
			bad("%s: no vertex %d", en, e.Source)
		}
		if !okT {
			bad("%s: no vertex %d", en, e.Target)
		}
		if !KnownPartitioner(e.Partitioner) {
			bad("%s: unknown partitioner %s", en, shortQuote(string(e.Partitioner)))
		}
		if e.Source == e.Target {
			bad("%s: a vertex cannot feed itself", en)
		}
		if seen[[2]int{e.Source, e.Target}] {
			bad("%s: duplicate edge", en)
		}
		seen[[2]int{e.Source, e.Target}] = true
		if !okS || !okT {
			continue
		}
		outs[e.Source]++
		ins[e.Target]++
		if e.Partitioner == Forward && ParallelismOf(src, defaultParallelism) != ParallelismOf(dst, defaultParallelism) {
			bad("%s: forward edge between parallelism %d and %d: use rebalance or set equal parallelism",
				en, ParallelismOf(src, defaultParallelism), ParallelismOf(dst, defaultParallelism))
		}
		if Keyed(dst.Kind) && e.Partitioner != Hash {
			bad("%s: %s is keyed (%s) but fed by a %s edge: put a key_by before it", en, vname(dst), dst.Kind, e.Partitioner)
		}
	}

	for i := range g.Vertices {
		v := &g.Vertices[i]
		if byID[v.ID] != v {
			continue // a duplicate, reported above
		}
		switch v.Kind {
		case KindSource:
			if ins[v.ID] > 0 {
				bad("%s: a source cannot have inputs", vname(v))
			}
			if outs[v.ID] == 0 {
				bad("%s: has no outputs: records must end in a sink", vname(v))
			}
		case KindSink:
			if outs[v.ID] > 0 {
				bad("%s: a sink cannot have outputs", vname(v))
			}
			if ins[v.ID] == 0 {
				bad("%s: has no inputs", vname(v))
			}
		default:
			if !KnownKind(v.Kind) {
				continue
			}
			if ins[v.ID] == 0 {
				bad("%s: has no inputs", vname(v))
			}
			if outs[v.ID] == 0 {
				bad("%s: has no outputs: records must end in a sink", vname(v))
			}
		}
	}

	if len(probs) == 0 {
		if cyc := findCycle(g); cyc != nil {
			parts := make([]string, len(cyc))
			for i, id := range cyc {
				parts[i] = fmt.Sprint(id)
			}
			bad("cycle through vertices %s", strings.Join(parts, " -> "))
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidGraph, strings.Join(probs, "; "))
}

func vname(v *Vertex) string {
	if v.Name == "" {
		return fmt.Sprintf("vertex %d", v.ID)
	}
	return fmt.Sprintf("vertex %d %s", v.ID, shortQuote(v.Name))
}

// shortQuote quotes s for an error message, cut to its first 64 bytes when
// longer (a hostile plan may name an operator with a megabyte).
func shortQuote(s string) string {
	const keep = 64
	if len(s) <= keep {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:keep], len(s))
}

func sortedConfigKeys(c map[string]string) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// findCycle returns the ids along one cycle of g (first id repeated at the
// end), or nil. It assumes every edge joins existing vertices.
func findCycle(g *Graph) []int {
	adj := make(map[int][]int)
	for _, e := range g.Edges {
		adj[e.Source] = append(adj[e.Source], e.Target)
	}
	const (
		white = iota
		grey
		black
	)
	color := make(map[int]int)
	var stack []int
	var visit func(id int) []int
	visit = func(id int) []int {
		color[id] = grey
		stack = append(stack, id)
		for _, n := range adj[id] {
			switch color[n] {
			case grey:
				for i, s := range stack {
					if s == n {
						return append(append([]int(nil), stack[i:]...), n)
					}
				}
			case white:
				if c := visit(n); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return nil
	}
	for _, v := range g.Vertices {
		if color[v.ID] == white {
			if c := visit(v.ID); c != nil {
				return c
			}
		}
	}
	return nil
}

// badSinkPath says what is wrong with a file sink's path, or "": it names a
// directory under the tenant's files, so it must be relative, without
// empty, "." or ".." segments. (The TaskManager checks it against the blob
// key rules too.)
// BadFilePath says what is wrong with p as a directory under a tenant's
// files (a file sink's or the dead-letter path), or "" when nothing is.
func BadFilePath(p string) string { return badSinkPath(p) }

func badSinkPath(p string) string {
	p = strings.TrimSuffix(p, "/")
	switch {
	case p == "":
		return "is empty"
	case strings.HasPrefix(p, "/"):
		return "is absolute"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Sprintf("has a %q segment", seg)
		}
	}
	return ""
}
