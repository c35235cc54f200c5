package guest

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Record is one element of a stream: a value, and optionally a key and a
// timestamp (milliseconds since the Unix epoch).
//
// # Notes
//
// A Record handed to your function is valid only during that call: its Key
// and Value alias a buffer the SDK reuses. Copy what you keep. A Record your
// function returns or emits is copied by the SDK right away, so you may reuse
// its buffers on the next call.
type Record = abi.Record

// Header is one of a record's headers (Record.Headers): a Kafka record's, say.
type Header = abi.Header

// MapFunc turns one record into one record.
type MapFunc func(r Record) Record

// FlatMapFunc turns one record into zero or more, emitted through out.
type FlatMapFunc func(r Record, out *Collector)

// FilterFunc keeps the records for which it returns true.
type FilterFunc func(r Record) bool

// KeyFunc returns a record's key. The key decides which subtask sees the
// record downstream and which keyed state it reads.
type KeyFunc func(r Record) []byte

// ReduceFunc folds r into acc, the key's accumulator so far (nil for the
// first record of a key), and returns the new accumulator. It may modify and
// return acc in place.
type ReduceFunc func(acc []byte, r Record) []byte

// ProcessFunc handles one record of a keyed stream, with access to the
// record key's state and timers.
type ProcessFunc func(ctx *KeyedContext, r Record, out *Collector)

// TimerFunc runs when a processing-time timer registered for ctx.Key() fires.
type TimerFunc func(ctx *KeyedContext, timeMs int64, out *Collector)

// SourceFunc produces up to max records through out and reports whether the
// source has ended. Keep the source's position in operator state (write it in
// an OnBarrier hook, read it back in OnOpen) so it resumes after a failure.
type SourceFunc func(ctx *Context, max int, out *Collector) (done bool)

// SinkFunc consumes one record.
type SinkFunc func(ctx *Context, r Record)

// Job registers the function that declares the job's dataflow. Call it once,
// from an init function of the job's main package:
//
//	func init() {
//		guest.Job(func(env *guest.Env) {
//			env.TextSource("lines", env.Args()...).
//				FlatMap("tokenize", tokenize).
//				KeyBy("word", wordKey).
//				Reduce("count", count, guest.EmitFinal()).
//				Map("format", format).
//				Collect("out")
//		})
//	}
//
//	func main() {}
//
// The function runs once when the cluster plans the job and again in every
// task to find the task's operators, so it must declare the same graph for
// the same arguments and do nothing else.
func Job(plan func(env *Env)) {
	if registered != nil {
		panic("guest.Job called twice: a module declares one job")
	}
	registered = plan
}

// registered is the job's plan function. A module is one job, so one
// package-level variable is the whole registry.
var registered func(env *Env)

// Env is what a job's plan function declares its dataflow on.
type Env struct {
	args  []string
	name  string
	maxP  int
	ops   []*op
	edges []*edge
	err   error
}

// Args returns the job's arguments (what follows `--` on the command line).
func (e *Env) Args() []string { return e.args }

// Fail reports a problem found while planning, such as a bad argument: the
// plan fails with err instead of declaring a graph.
func (e *Env) Fail(err error) {
	if e.err == nil && err != nil {
		e.err = err
	}
}

// SetName names the job; the default is the first source's name.
func (e *Env) SetName(name string) { e.name = name }

// SetMaxParallelism sets the number of key groups: the most subtasks a keyed
// operator can ever be rescaled to. The default is 128.
func (e *Env) SetMaxParallelism(n int) {
	if n < 1 {
		e.fail("SetMaxParallelism(%d): must be at least 1", n)
		return
	}
	e.maxP = n
}

// TextSource reads text files line by line with the host's "text" connector:
// one record per line, the line (without its newline) as the Value. Each
// path is a file or a glob pattern, resolved by the cluster.
func (e *Env) TextSource(name string, paths ...string) *Stream {
	o := e.add(name, jobgraph.KindSource, false)
	o.connector = jobgraph.ConnectorText
	o.config = map[string]string{"paths": jsonStrings(paths)}
	return &Stream{env: e, op: o}
}

// NexmarkOptions configure a NexmarkSource; zero fields take the
// defaults.
type NexmarkOptions struct {
	// Events is the stream's number of events; 0 means unbounded.
	Events int64
	// Rate is the stream's rate in events per second over all its
	// subtasks, which also spaces the events' times; 0 means as fast as
	// possible, with event times spaced as at 10,000 events per second.
	Rate int64
	// Seed selects the stream.
	Seed uint64
	// BaseTime is the first event's time, in milliseconds since the Unix
	// epoch.
	BaseTime int64
	// OutOfOrderGroup, above 1, permutes each run of that many events, so
	// event times are out of order within it.
	OutOfOrderGroup int64
}

// NexmarkSource reads the Nexmark benchmark's events, generated by the
// host's "nexmark" connector: persons, auctions and bids in the
// proportions 1:3:46, each record's Value one event in the encoding of
// package sdk/nexmark (which decodes it), its Time the event's time, no
// key. Each subtask generates its own timeline of the stream; the same
// options always give the same events.
func (e *Env) NexmarkSource(name string, o NexmarkOptions) *Stream {
	op := e.add(name, jobgraph.KindSource, false)
	op.connector = jobgraph.ConnectorNexmark
	op.config = map[string]string{}
	set := func(key string, v int64) {
		if v != 0 {
			op.config[key] = strconv.FormatInt(v, 10)
		}
	}
	set(jobgraph.ConfigNexmarkEvents, o.Events)
	set(jobgraph.ConfigNexmarkRate, o.Rate)
	set(jobgraph.ConfigNexmarkBaseTime, o.BaseTime)
	set(jobgraph.ConfigNexmarkOutOfOrder, o.OutOfOrderGroup)
	if o.Seed != 0 {
		op.config[jobgraph.ConfigNexmarkSeed] = strconv.FormatUint(o.Seed, 10)
	}
	return &Stream{env: e, op: op}
}

// JetStreamOptions configure a JetStreamSource or a JetStreamSink; the
// keys they set are those of docs/ABI.md section 5.
type JetStreamOptions struct {
	// URL is the server, or several separated by commas
	// (nats://host:port; tls://host:port for TLS). Required.
	URL string
	// User and PasswordSecret, or TokenSecret, authenticate. The secrets
	// are named, not held: PasswordSecret "nats" is the value of the job
	// config key secret.nats, which the job's submitter sets (sluice run
	// --job-secret nats=FILE), so the password is in neither the module
	// nor the job graph, and the cluster keeps it out of its logs,
	// status and errors.
	User                        string
	PasswordSecret, TokenSecret string
	// Subject is a source's subject filter (empty: the whole stream).
	Subject string
	// Start is where a source without a checkpoint starts: "first" (the
	// default), "new", "seq:N" or "time:RFC3339".
	Start string
	// AtLeastOnce makes a sink publish at once rather than when the
	// checkpoint completes: lower latency, duplicates after a restore.
	AtLeastOnce bool
}

func (o JetStreamOptions) config() map[string]string {
	c := map[string]string{jobgraph.ConfigNATSURL: o.URL}
	for k, v := range map[string]string{jobgraph.ConfigNATSUser: o.User, jobgraph.ConfigJetStreamStart: o.Start} {
		if v != "" {
			c[k] = v
		}
	}
	for k, name := range map[string]string{jobgraph.ConfigNATSToken: o.TokenSecret, jobgraph.ConfigNATSPassword: o.PasswordSecret} {
		if name != "" {
			c[k] = jobgraph.SecretRef + name
		}
	}
	return c
}

// JetStreamSource reads the NATS JetStream stream named stream with the
// host's "jetstream-source" connector, in sequence order: each message's
// subject is the record's Key, its data the Value, its timestamp the Time.
// The next sequence is kept in each checkpoint, so a restore resumes
// there. It is unbounded and runs with parallelism 1 (one reader per
// stream; rebalance after it to spread the work).
func (e *Env) JetStreamSource(name, stream string, o JetStreamOptions) *Stream {
	op := e.add(name, jobgraph.KindSource, false)
	op.connector = jobgraph.ConnectorJetStreamSource
	op.config = o.config()
	op.config[jobgraph.ConfigJetStreamStream] = stream
	if o.Subject != "" {
		op.config[jobgraph.ConfigJetStreamSubject] = o.Subject
	}
	op.parallelism = 1
	return &Stream{env: e, op: op}
}

// Source adds a source written in Go. The SDK calls fn whenever the task
// asks for records, until fn reports done.
func (e *Env) Source(name string, fn SourceFunc) *Stream {
	o := e.add(name, jobgraph.KindSource, fn == nil)
	o.source = fn
	return &Stream{env: e, op: o}
}

// Stream is the output of one operator; its methods add operators that read it.
type Stream struct {
	env  *Env
	op   *op
	part jobgraph.Partitioner // for the next edge; "" = forward when parallelism matches, else rebalance
}

// KeyedStream is a stream partitioned by key: records with the same key reach
// the same subtask, where keyed state and timers are kept per key.
type KeyedStream struct {
	s *Stream
}

// Map adds an operator that turns each record into one record.
func (s *Stream) Map(name string, fn MapFunc) *Stream {
	o := s.then(name, jobgraph.KindMap, fn == nil)
	o.mapFn = fn
	return &Stream{env: s.env, op: o}
}

// FlatMap adds an operator that turns each record into zero or more.
func (s *Stream) FlatMap(name string, fn FlatMapFunc) *Stream {
	o := s.then(name, jobgraph.KindFlatMap, fn == nil)
	o.flatMap = fn
	return &Stream{env: s.env, op: o}
}

// Filter adds an operator that keeps the records fn returns true for.
func (s *Stream) Filter(name string, fn FilterFunc) *Stream {
	o := s.then(name, jobgraph.KindFilter, fn == nil)
	o.filter = fn
	return &Stream{env: s.env, op: o}
}

// KeyBy adds an operator that sets each record's Key to fn(record); the
// operators after it see the stream partitioned by that key.
func (s *Stream) KeyBy(name string, fn KeyFunc) *KeyedStream {
	o := s.then(name, jobgraph.KindKeyBy, fn == nil)
	o.keyFn = fn
	return &KeyedStream{s: &Stream{env: s.env, op: o, part: jobgraph.Hash}}
}

// SetParallelism sets the key_by operator's parallelism; by default it is
// its input's, so it chains to it and each key's records keep their order.
func (k *KeyedStream) SetParallelism(n int) *KeyedStream {
	k.s.op.setParallelism(k.s.env, n)
	return k
}

// ReduceOption changes how Reduce emits.
type ReduceOption func(o *op)

// EmitFinal makes Reduce emit each key's final accumulator once, when its
// input ends (Flink's batch mode), instead of every update. Use it for
// bounded jobs such as a word count.
func EmitFinal() ReduceOption { return func(o *op) { o.final = true } }

// EmitResult makes Reduce emit fn(dst, acc) instead of the accumulator acc
// itself: the result of an accumulator, as Flink's AggregateFunction has
// one (an average from a sum and a count, say). fn appends the result to dst
// (empty, with room the SDK reuses) and returns it; keyed state and
// checkpoints keep the accumulator.
func EmitResult(fn func(dst, acc []byte) []byte) ReduceOption {
	return func(o *op) { o.result = fn }
}

// Reduce folds each key's records into an accumulator kept in keyed state.
// It emits a record {Key: key, Value: accumulator} after every update, or
// once per key at the end of input with EmitFinal.
//
// # Notes
//
// Accumulators are cached in the guest between checkpoint barriers and
// written to keyed state in batches at each barrier, so a record costs no
// host call; checkpoints hold exactly the records processed before them.
func (k *KeyedStream) Reduce(name string, fn ReduceFunc, opts ...ReduceOption) *Stream {
	o := k.s.then(name, jobgraph.KindReduce, fn == nil)
	o.reduce = fn
	for _, opt := range opts {
		opt(o)
	}
	if o.final {
		o.config = map[string]string{"emit": "final"}
	}
	return &Stream{env: k.s.env, op: o}
}

// Process adds a keyed operator with keyed state and processing-time timers;
// set its timer callback with OnTimer.
func (k *KeyedStream) Process(name string, fn ProcessFunc) *Stream {
	o := k.s.then(name, jobgraph.KindProcess, fn == nil)
	o.process = fn
	return &Stream{env: k.s.env, op: o}
}

// OnTimer sets the timer callback of a Process operator.
func (s *Stream) OnTimer(fn TimerFunc) *Stream {
	if s.op.kind != jobgraph.KindProcess {
		s.env.fail("OnTimer on %q: only Process operators have timers", s.op.name)
	}
	if s.op.window != nil {
		s.env.fail("OnTimer on %q: a window operator's timers are its own", s.op.name)
		return s
	}
	if s.op.interval != nil {
		s.env.fail("OnTimer on %q: an interval join's timers are its own", s.op.name)
		return s
	}
	s.op.timer = fn
	return s
}

// Collect ends the stream in the host's "collect" sink: the records' Values
// come back to the client with the job's result. For small results.
func (s *Stream) Collect(name string) *Stream {
	o := s.then(name, jobgraph.KindSink, false)
	o.connector = jobgraph.ConnectorCollect
	return &Stream{env: s.env, op: o}
}

// Blackhole ends the stream in the host's "blackhole" sink, which counts
// the records and their bytes (in the task's metrics) and keeps nothing:
// for benchmarks.
func (s *Stream) Blackhole(name string) *Stream {
	o := s.then(name, jobgraph.KindSink, false)
	o.connector = jobgraph.ConnectorBlackhole
	return &Stream{env: s.env, op: o}
}

// WriteFiles ends the stream in the host's transactional "file" sink: each
// record's Value is written as one line to part files under path, committed
// when a checkpoint completes (and at the end of a bounded job).
func (s *Stream) WriteFiles(name, path string) *Stream {
	o := s.then(name, jobgraph.KindSink, false)
	o.connector = jobgraph.ConnectorFile
	o.config = map[string]string{"path": path}
	return &Stream{env: s.env, op: o}
}

// JetStreamSink ends the stream in the host's "jetstream-sink" connector:
// each record's Value is published to subject (its Key, if any, in the
// Sluice-Key header). Exactly once by default: the records are held until
// the checkpoint after them completes and are then published with
// Nats-Msg-Id headers the server deduplicates within the stream's
// duplicate window, so the job needs checkpoints. o.AtLeastOnce publishes
// at once instead.
func (s *Stream) JetStreamSink(name, subject string, o JetStreamOptions) *Stream {
	op := s.then(name, jobgraph.KindSink, false)
	op.connector = jobgraph.ConnectorJetStreamSink
	op.config = o.config()
	delete(op.config, jobgraph.ConfigJetStreamStart)
	op.config[jobgraph.ConfigJetStreamSubject] = subject
	if o.AtLeastOnce {
		op.config[jobgraph.ConfigJetStreamDelivery] = jobgraph.DeliveryAtLeastOnce
	}
	return &Stream{env: s.env, op: op}
}

// Sink ends the stream in a sink written in Go.
func (s *Stream) Sink(name string, fn SinkFunc) *Stream {
	o := s.then(name, jobgraph.KindSink, fn == nil)
	o.sink = fn
	return &Stream{env: s.env, op: o}
}

// SetParallelism sets how many subtasks run this operator; the default is
// the job's parallelism, chosen when it is submitted.
func (s *Stream) SetParallelism(n int) *Stream {
	s.op.setParallelism(s.env, n)
	return s
}

// PoisonPolicy is what a task does with a record that makes an operator
// fail (a panic, a trap): see SetPoisonRecords.
type PoisonPolicy string

// Poison-record policies; the job config key pipeline.poison-records sets
// the job's.
const (
	// PoisonFail fails the task, naming the record's position.
	PoisonFail PoisonPolicy = PoisonPolicy(jobgraph.PoisonFail)
	// PoisonSkip drops the record, counts it and goes on.
	PoisonSkip PoisonPolicy = PoisonPolicy(jobgraph.PoisonSkip)
	// PoisonDeadLetter drops the record and writes it, with the failure
	// and the guest's stack, to the job's pipeline.dead-letter.path.
	PoisonDeadLetter PoisonPolicy = PoisonPolicy(jobgraph.PoisonDeadLetter)
)

// SetPoisonRecords overrides the job's poison-record policy for the task
// this operator runs in (when operators chained together set different
// ones, the strictest wins: fail, then dead-letter, then skip).
//
// # Notes
//
// Skipping relies on the operators being deterministic, as exactly-once
// recovery does: the task rebuilds its instance by replaying the records
// since its last checkpoint (docs/OPERATIONS.md, "Poison records").
func (s *Stream) SetPoisonRecords(p PoisonPolicy) *Stream {
	if _, err := jobgraph.ParsePoisonPolicy(string(p)); err != nil {
		s.env.fail("SetPoisonRecords(%q) on %q: want %s", string(p), s.op.name, jobgraph.PoisonPolicies)
		return s
	}
	if s.op.config == nil {
		s.op.config = map[string]string{}
	}
	s.op.config[jobgraph.ConfigPoisonRecords] = string(p)
	return s
}

// Rebalance makes the next operator receive this stream round-robin.
func (s *Stream) Rebalance() *Stream { return &Stream{env: s.env, op: s.op, part: jobgraph.Rebalance} }

// Broadcast makes every subtask of the next operator receive every record.
func (s *Stream) Broadcast() *Stream { return &Stream{env: s.env, op: s.op, part: jobgraph.Broadcast} }

// Forward makes subtask i of the next operator read subtask i of this one;
// both must have the same parallelism. This is the default when they do.
func (s *Stream) Forward() *Stream { return &Stream{env: s.env, op: s.op, part: jobgraph.Forward} }

// OnOpen sets a hook that runs when a task running this operator starts,
// before any record: the place to read operator state back.
func (s *Stream) OnOpen(fn func(ctx *Context)) *Stream { s.op.onOpen = fn; return s }

// OnBarrier sets a hook that runs when checkpoint checkpointID reaches this
// operator, before the host snapshots the task's state: the place to write
// operator state such as a source's position.
func (s *Stream) OnBarrier(fn func(ctx *Context, checkpointID int64)) *Stream {
	s.op.onBarrier = fn
	return s
}

// OnClose sets a hook that runs when a task running this operator ends.
func (s *Stream) OnClose(fn func(ctx *Context)) *Stream { s.op.onClose = fn; return s }

// Collector passes records to the next operator.
type Collector struct {
	next stage
	// Direct paths for the common chain tails, because Go's wasm code pays
	// for every call and every Record copied: the emitter itself, or a
	// KeyBy that feeds the emitter.
	emit  *emitter
	keyBy *keyByStage
}

func newCollector(next stage) Collector {
	c := Collector{next: next}
	c.emit, _ = next.(*emitter)
	if kb, ok := next.(*keyByStage); ok && kb.emit != nil && kb.tag == 0 {
		c.keyBy = kb
	}
	return c
}

// Emit passes r on. The SDK copies it before Emit returns.
func (c *Collector) Emit(r Record) { c.next.push(r) }

// EmitValue passes on a record with value v and no key or time.
func (c *Collector) EmitValue(v []byte) {
	switch {
	case c.emit != nil:
		c.emit.pushValue(v)
	case c.keyBy != nil:
		c.keyBy.emit.pushKeyValue(c.keyBy.fn(Record{Value: v}), v)
	default:
		c.next.push(Record{Value: v})
	}
}

// EmitKeyValue passes on a record with key k and value v.
func (c *Collector) EmitKeyValue(k, v []byte) {
	if c.emit != nil {
		c.emit.pushKeyValue(k, v)
		return
	}
	c.next.push(Record{Key: k, HasKey: true, Value: v})
}

// Int64 returns n as 8 little-endian bytes, the encoding the *Int64 helpers use.
func Int64(n int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }

// PutInt64 writes n into b (reusing it when it has room) and returns it.
func PutInt64(b []byte, n int64) []byte {
	if cap(b) < 8 {
		b = make([]byte, 8)
	}
	b = b[:8]
	binary.LittleEndian.PutUint64(b, uint64(n))
	return b
}

// AsInt64 decodes 8 little-endian bytes; nil or short input is 0.
func AsInt64(b []byte) int64 {
	if len(b) < 8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func (e *Env) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}
