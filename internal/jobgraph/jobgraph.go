package jobgraph

// Kind is what an operator does.
type Kind string

// The operator kinds of ABI v1.
const (
	KindSource  Kind = "source"   // produces records: a guest function or a host connector
	KindMap     Kind = "map"      // one record in, one out
	KindFlatMap Kind = "flat_map" // one record in, zero or more out
	KindFilter  Kind = "filter"   // one record in, it or nothing out
	KindKeyBy   Kind = "key_by"   // sets each record's key; edges out of it hash by that key
	KindReduce  Kind = "reduce"   // keyed: folds each key's records into keyed state
	KindProcess Kind = "process"  // keyed: arbitrary code with keyed state and timers
	KindSink    Kind = "sink"     // consumes records: a guest function or a host connector
)

// Partitioner decides which consumer subtask receives a record on an edge.
type Partitioner string

// The partitioners of ABI v1.
const (
	Forward   Partitioner = "forward"   // producer subtask i to consumer subtask i
	Hash      Partitioner = "hash"      // by the record's key group
	Rebalance Partitioner = "rebalance" // round robin
	Broadcast Partitioner = "broadcast" // every consumer subtask
)

// Host connectors: sources and sinks that run in the TaskManager rather than
// in the guest, for speed and for exactly-once.
const (
	ConnectorText    = "text"    // source: lines of blob objects or local files, handed out as splits
	ConnectorCollect = "collect" // sink: records return to the client with the job result
	ConnectorFile    = "file"    // sink: transactional part files, committed on checkpoints
	// ConnectorNexmark is a source of generated Nexmark events
	// (sdk/nexmark), handed out as splits of event ids.
	ConnectorNexmark = "nexmark"
	// ConnectorBlackhole is a sink that counts records and bytes and
	// keeps nothing, for benchmarks.
	ConnectorBlackhole = "blackhole"
)

// DefaultMaxParallelism is the number of key groups when a job sets none.
const DefaultMaxParallelism = 128

// Graph is a job's dataflow.
type Graph struct {
	Name           string   `json:"name"`
	MaxParallelism int      `json:"max_parallelism,omitempty"` // key groups; 0 means DefaultMaxParallelism
	Vertices       []Vertex `json:"vertices"`
	Edges          []Edge   `json:"edges"`
}

// Vertex is one operator.
type Vertex struct {
	ID          int               `json:"id"` // unique in the graph; the guest dispatches on it
	Name        string            `json:"name"`
	Kind        Kind              `json:"kind"`
	Parallelism int               `json:"parallelism,omitempty"` // 0 means the job's default parallelism
	Connector   string            `json:"connector,omitempty"`   // a host connector; empty means guest code
	Config      map[string]string `json:"config,omitempty"`      // operator or connector settings
}

// Edge carries records from Source's output to Target's input.
type Edge struct {
	Source      int         `json:"source"`
	Target      int         `json:"target"`
	Partitioner Partitioner `json:"partitioner"`
}
