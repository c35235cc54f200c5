//! Declaring a job's dataflow: [`Env`], [`Stream`], [`KeyedStream`].

use std::cell::RefCell;
use std::fmt::Write;

use crate::batch::Record;
use crate::json::write_str;
use crate::task::{Collector, Context, KeyedContext};

/// Turns one record into one. `buf` is an empty scratch buffer the output may
/// borrow, for a value the function builds.
pub type MapFn = Box<dyn for<'r> FnMut(Record<'r>, &'r mut Vec<u8>) -> Record<'r>>;
/// Turns one record into zero or more, emitted through the collector.
pub type FlatMapFn = Box<dyn FnMut(Record<'_>, &mut Collector<'_>)>;
/// Keeps the records it returns `true` for.
pub type FilterFn = Box<dyn FnMut(&Record<'_>) -> bool>;
/// Returns a record's key, borrowed from the record or built in the empty
/// scratch buffer `buf`.
pub type KeyFn = Box<dyn for<'r> FnMut(Record<'r>, &'r mut Vec<u8>) -> &'r [u8]>;
/// Folds a record into its key's accumulator, which is empty for the key's
/// first record.
pub type ReduceFn = Box<dyn FnMut(&mut Vec<u8>, Record<'_>)>;
/// Handles one record of a keyed stream with the key's state and timers.
pub type ProcessFn = Box<dyn FnMut(&mut KeyedContext, Record<'_>, &mut Collector<'_>)>;
/// Runs when a timer registered for the context's key fires, with its time.
pub type TimerFn = Box<dyn FnMut(&mut KeyedContext, i64, &mut Collector<'_>)>;
/// Produces up to `max` records and says whether the source goes on.
pub type SourceFn = Box<dyn FnMut(&mut Context, usize, &mut Collector<'_>) -> SourceStatus>;
/// Consumes one record.
pub type SinkFn = Box<dyn FnMut(&mut Context, Record<'_>)>;
/// A hook that runs when a task opens or closes.
pub type HookFn = Box<dyn FnMut(&mut Context)>;
/// A hook that runs when a checkpoint barrier reaches the operator.
pub type BarrierFn = Box<dyn FnMut(&mut Context, i64)>;

/// What a source function reports after a poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceStatus {
    /// More records may follow: poll again.
    More,
    /// The source has ended for good.
    Done,
}

/// When a reduce emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// `{key, accumulator}` after every record.
    EveryUpdate,
    /// Each key's final accumulator once, at the end of input (Flink's batch
    /// mode): for bounded jobs such as a word count.
    Final,
}

/// How records travel from one operator to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioner {
    /// Subtask i to subtask i; both sides need the same parallelism.
    Forward,
    /// By the key's key group; what a [`KeyedStream`] uses.
    Hash,
    /// Round robin.
    Rebalance,
    /// Every record to every subtask.
    Broadcast,
}

impl Partitioner {
    fn name(self) -> &'static str {
        match self {
            Partitioner::Forward => "forward",
            Partitioner::Hash => "hash",
            Partitioner::Rebalance => "rebalance",
            Partitioner::Broadcast => "broadcast",
        }
    }
}

/// What an operator runs, by kind.
pub(crate) enum Func {
    TextSource,
    Source(SourceFn),
    Map(MapFn),
    FlatMap(FlatMapFn),
    Filter(FilterFn),
    KeyBy(KeyFn, Option<ReduceFn>),
    Reduce(ReduceFn, Emit),
    Process(ProcessFn, Option<TimerFn>),
    Collect,
    Files,
    Sink(SinkFn),
}

impl Func {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Func::TextSource | Func::Source(_) => "source",
            Func::Map(_) => "map",
            Func::FlatMap(_) => "flat_map",
            Func::Filter(_) => "filter",
            Func::KeyBy(..) => "key_by",
            Func::Reduce(..) => "reduce",
            Func::Process(..) => "process",
            Func::Collect | Func::Files | Func::Sink(_) => "sink",
        }
    }

    pub(crate) fn connector(&self) -> Option<&'static str> {
        match self {
            Func::TextSource => Some("text"),
            Func::Collect => Some("collect"),
            Func::Files => Some("file"),
            _ => None,
        }
    }

    fn keyed(&self) -> bool {
        matches!(self, Func::Reduce(..) | Func::Process(..))
    }
}

/// The optional hooks of an operator.
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) open: Option<HookFn>,
    pub(crate) barrier: Option<BarrierFn>,
    pub(crate) close: Option<HookFn>,
}

pub(crate) struct OpDecl {
    pub(crate) id: i32,
    pub(crate) name: String,
    pub(crate) parallelism: u32,
    pub(crate) config: Vec<(String, String)>,
    pub(crate) func: Func,
    pub(crate) hooks: Hooks,
}

struct EdgeDecl {
    src: usize,
    dst: usize,
    part: Option<Partitioner>,
}

#[derive(Default)]
pub(crate) struct Graph {
    name: String,
    max_parallelism: u32,
    pub(crate) ops: Vec<OpDecl>,
    edges: Vec<EdgeDecl>,
    err: Option<String>,
}

impl Graph {
    fn fail(&mut self, msg: String) {
        if self.err.is_none() {
            self.err = Some(msg);
        }
    }
}

/// What a job's plan function declares its dataflow on.
///
/// The plan function runs once when the cluster plans the job and again in
/// every task, to find the task's operators: it must declare the same graph
/// for the same arguments and do nothing else.
pub struct Env {
    args: Vec<String>,
    g: RefCell<Graph>,
}

impl Env {
    pub(crate) fn new(args: Vec<String>) -> Self {
        Env { args, g: RefCell::new(Graph::default()) }
    }

    pub(crate) fn into_graph(self) -> Result<Graph, String> {
        let g = self.g.into_inner();
        if let Some(e) = g.err {
            return Err(e);
        }
        if g.ops.is_empty() {
            return Err("the job declares no operators".into());
        }
        Ok(g)
    }

    /// The job's arguments: what follows `--` on the command line.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Names the job; the default is the first source's name.
    pub fn set_name(&self, name: &str) {
        self.g.borrow_mut().name = name.to_string();
    }

    /// Sets the number of key groups: the most subtasks a keyed operator
    /// can ever be rescaled to. The default is 128.
    pub fn set_max_parallelism(&self, n: u32) {
        let mut g = self.g.borrow_mut();
        if n < 1 {
            g.fail(format!("set_max_parallelism({}): must be at least 1", n));
        }
        g.max_parallelism = n;
    }

    /// Reads text files line by line with the host's `text` connector: one
    /// record per line, the line without its line ending as the value. Each
    /// path is a file or glob pattern exactly as the user gave it after
    /// `--input`; the cluster resolves it.
    pub fn text_source<S: AsRef<str>>(&self, name: &str, paths: &[S]) -> Stream<'_> {
        let mut list = String::from("[");
        for (i, p) in paths.iter().enumerate() {
            if i > 0 {
                list.push(',');
            }
            write_str(&mut list, p.as_ref());
        }
        list.push(']');
        let op = self.add(name, Func::TextSource);
        self.g.borrow_mut().ops[op].config.push(("paths".into(), list));
        Stream { env: self, op, part: None }
    }

    /// Adds a source written in Rust. The SDK calls `f` whenever the task
    /// asks for records, until it returns [`SourceStatus::Done`]. Keep the
    /// source's position in operator state (write it in an
    /// [`Stream::on_barrier`] hook, read it back in [`Stream::on_open`]) so
    /// it resumes where a checkpoint was taken.
    pub fn source<F>(&self, name: &str, f: F) -> Stream<'_>
    where
        F: FnMut(&mut Context, usize, &mut Collector<'_>) -> SourceStatus + 'static,
    {
        let op = self.add(name, Func::Source(Box::new(f)));
        Stream { env: self, op, part: None }
    }

    fn add(&self, name: &str, func: Func) -> usize {
        let mut g = self.g.borrow_mut();
        let id = g.ops.len() as i32 + 1;
        if name.is_empty() {
            g.fail(format!("{} operator {} has no name: every operator needs one", func.kind(), id));
        }
        g.ops.push(OpDecl { id, name: name.to_string(), parallelism: 0, config: Vec::new(), func, hooks: Hooks::default() });
        g.ops.len() - 1
    }

    /// The graph as the JSON of docs/ABI.md (`internal/jobgraph.Graph`).
    pub(crate) fn graph_json(g: &mut Graph) -> String {
        // A key_by only computes keys: it runs at its input's parallelism
        // unless set, so it chains to its input and a key's records keep
        // their order (as the Go SDK does).
        for i in 0..g.edges.len() {
            let (s, d) = (g.edges[i].src, g.edges[i].dst);
            if matches!(g.ops[d].func, Func::KeyBy(..)) && g.ops[d].parallelism == 0 {
                g.ops[d].parallelism = g.ops[s].parallelism;
            }
        }
        let mut name = g.name.clone();
        if name.is_empty() {
            if let Some(o) = g.ops.iter().find(|o| o.func.kind() == "source") {
                name = o.name.clone();
            }
        }
        let mut j = String::from("{\"name\":");
        write_str(&mut j, &name);
        if g.max_parallelism > 0 {
            let _ = write!(j, ",\"max_parallelism\":{}", g.max_parallelism);
        }
        j.push_str(",\"vertices\":[");
        for (i, o) in g.ops.iter().enumerate() {
            if i > 0 {
                j.push(',');
            }
            let _ = write!(j, "{{\"id\":{},\"name\":", o.id);
            write_str(&mut j, &o.name);
            let _ = write!(j, ",\"kind\":\"{}\"", o.func.kind());
            if o.parallelism > 0 {
                let _ = write!(j, ",\"parallelism\":{}", o.parallelism);
            }
            if let Some(c) = o.func.connector() {
                let _ = write!(j, ",\"connector\":\"{}\"", c);
            }
            if !o.config.is_empty() {
                j.push_str(",\"config\":{");
                for (k, (key, val)) in o.config.iter().enumerate() {
                    if k > 0 {
                        j.push(',');
                    }
                    write_str(&mut j, key);
                    j.push(':');
                    write_str(&mut j, val);
                }
                j.push('}');
            }
            j.push('}');
        }
        j.push_str("],\"edges\":[");
        for (i, e) in g.edges.iter().enumerate() {
            if i > 0 {
                j.push(',');
            }
            // Parallelism 0 is the job's default, so equal fields mean equal
            // parallelism once the cluster picks it.
            let p = e.part.unwrap_or(if g.ops[e.src].parallelism == g.ops[e.dst].parallelism {
                Partitioner::Forward
            } else {
                Partitioner::Rebalance
            });
            let _ = write!(j, "{{\"source\":{},\"target\":{},\"partitioner\":\"{}\"}}", g.ops[e.src].id, g.ops[e.dst].id, p.name());
        }
        j.push_str("]}");
        j
    }
}

/// The output of one operator; its methods add operators that read it.
/// Streams are cheap handles: a stream read by two operators branches.
#[derive(Clone, Copy)]
pub struct Stream<'e> {
    env: &'e Env,
    op: usize,
    part: Option<Partitioner>,
}

/// A stream partitioned by key: records with the same key reach the same
/// subtask, where keyed state and timers are kept per key.
#[derive(Clone, Copy)]
pub struct KeyedStream<'e> {
    s: Stream<'e>,
}

impl<'e> Stream<'e> {
    /// Adds an operator reading this stream.
    fn then(&self, name: &str, func: Func) -> Stream<'e> {
        let keyed = func.keyed();
        let kind = func.kind();
        let op = self.env.add(name, func);
        let mut g = self.env.g.borrow_mut();
        if g.ops[self.op].func.kind() == "sink" {
            let sink = g.ops[self.op].name.clone();
            g.fail(format!("{} {:?} reads sink {:?}: a sink has no output", kind, name, sink));
        }
        if keyed && self.part != Some(Partitioner::Hash) {
            g.fail(format!("{} {:?} must follow key_by", kind, name));
        }
        g.edges.push(EdgeDecl { src: self.op, dst: op, part: self.part });
        Stream { env: self.env, op, part: None }
    }

    /// Adds an operator that turns each record into one. `f` gets the
    /// record and an empty scratch buffer its output may borrow:
    ///
    /// ```
    /// # fn plan(s: sluice::Stream<'_>) {
    /// s.map("upper", |r, buf| {
    ///     buf.extend(r.value.iter().map(u8::to_ascii_uppercase));
    ///     sluice::Record::new(buf)
    /// });
    /// # }
    /// ```
    pub fn map<F>(&self, name: &str, f: F) -> Stream<'e>
    where
        F: for<'r> FnMut(Record<'r>, &'r mut Vec<u8>) -> Record<'r> + 'static,
    {
        self.then(name, Func::Map(Box::new(f)))
    }

    /// Adds an operator that turns each record into zero or more, passed to
    /// the collector.
    pub fn flat_map<F>(&self, name: &str, f: F) -> Stream<'e>
    where
        F: FnMut(Record<'_>, &mut Collector<'_>) + 'static,
    {
        self.then(name, Func::FlatMap(Box::new(f)))
    }

    /// Adds an operator that keeps the records `f` returns `true` for.
    pub fn filter<F>(&self, name: &str, f: F) -> Stream<'e>
    where
        F: FnMut(&Record<'_>) -> bool + 'static,
    {
        self.then(name, Func::Filter(Box::new(f)))
    }

    /// Adds an operator that sets each record's key to `f(record, buf)`;
    /// the operators after it see the stream partitioned by that key. The
    /// key may borrow from the record (`|r, _| r.value`) or be built in the
    /// empty scratch buffer `buf`.
    pub fn key_by<F>(&self, name: &str, f: F) -> KeyedStream<'e>
    where
        F: for<'r> FnMut(Record<'r>, &'r mut Vec<u8>) -> &'r [u8] + 'static,
    {
        let s = self.then(name, Func::KeyBy(Box::new(f), None));
        KeyedStream { s: Stream { part: Some(Partitioner::Hash), ..s } }
    }

    /// Ends the stream in the host's `collect` sink: the values come back to
    /// the client with the job's result. For small results.
    pub fn collect(&self, name: &str) -> Stream<'e> {
        self.then(name, Func::Collect)
    }

    /// Ends the stream in the host's transactional `file` sink: each value is
    /// one line of part files under `path` (relative, no `..`), committed
    /// when a checkpoint completes and at the end of a bounded job.
    pub fn write_files(&self, name: &str, path: &str) -> Stream<'e> {
        let s = self.then(name, Func::Files);
        self.env.g.borrow_mut().ops[s.op].config.push(("path".into(), path.into()));
        s
    }

    /// Ends the stream in a sink written in Rust.
    pub fn sink<F>(&self, name: &str, f: F) -> Stream<'e>
    where
        F: FnMut(&mut Context, Record<'_>) + 'static,
    {
        self.then(name, Func::Sink(Box::new(f)))
    }

    /// Sets the timer callback of a [`KeyedStream::process`] operator.
    pub fn on_timer<F>(self, f: F) -> Self
    where
        F: FnMut(&mut KeyedContext, i64, &mut Collector<'_>) + 'static,
    {
        let mut g = self.env.g.borrow_mut();
        let o = &mut g.ops[self.op];
        if let Func::Process(_, t) = &mut o.func {
            *t = Some(Box::new(f));
        } else {
            let msg = format!("on_timer on {:?}: only process operators have timers", o.name);
            g.fail(msg);
        }
        drop(g);
        self
    }

    /// Sets how many subtasks run this operator; the default is the job's
    /// parallelism, chosen when it is submitted.
    pub fn set_parallelism(self, n: u32) -> Self {
        set_parallelism(self.env, self.op, n);
        self
    }

    /// Makes the next operator read this stream round robin.
    pub fn rebalance(self) -> Self {
        Stream { part: Some(Partitioner::Rebalance), ..self }
    }

    /// Makes every subtask of the next operator read every record.
    pub fn broadcast(self) -> Self {
        Stream { part: Some(Partitioner::Broadcast), ..self }
    }

    /// Makes subtask i of the next operator read subtask i of this one; both
    /// need the same parallelism. The default when they have it.
    pub fn forward(self) -> Self {
        Stream { part: Some(Partitioner::Forward), ..self }
    }

    /// Sets a hook that runs when a task running this operator opens, before
    /// any record: the place to read operator state back after a restore.
    pub fn on_open<F: FnMut(&mut Context) + 'static>(self, f: F) -> Self {
        self.env.g.borrow_mut().ops[self.op].hooks.open = Some(Box::new(f));
        self
    }

    /// Sets a hook that runs when checkpoint `checkpoint_id` reaches this
    /// operator, before the host snapshots the task's state: the place to
    /// write operator state such as a source's position.
    pub fn on_barrier<F: FnMut(&mut Context, i64) + 'static>(self, f: F) -> Self {
        self.env.g.borrow_mut().ops[self.op].hooks.barrier = Some(Box::new(f));
        self
    }

    /// Sets a hook that runs when a task running this operator ends.
    pub fn on_close<F: FnMut(&mut Context) + 'static>(self, f: F) -> Self {
        self.env.g.borrow_mut().ops[self.op].hooks.close = Some(Box::new(f));
        self
    }
}

fn set_parallelism(env: &Env, op: usize, n: u32) {
    let mut g = env.g.borrow_mut();
    if n < 1 {
        let msg = format!("set_parallelism({}) on {:?}: must be at least 1", n, g.ops[op].name);
        g.fail(msg);
        return;
    }
    g.ops[op].parallelism = n;
}

impl<'e> KeyedStream<'e> {
    /// Folds each key's records into an accumulator, emitting
    /// `{key, accumulator}` as [`Emit`] says. `f` gets the key's accumulator
    /// (empty for its first record) to change in place.
    ///
    /// Accumulators are kept in guest memory between checkpoint barriers and
    /// written to keyed state in batches at each barrier, so a record costs
    /// no host call; a checkpoint holds exactly the records before it.
    pub fn reduce<F>(&self, name: &str, f: F, emit: Emit) -> Stream<'e>
    where
        F: FnMut(&mut Vec<u8>, Record<'_>) + 'static,
    {
        let s = self.s.then(name, Func::Reduce(Box::new(f), emit));
        if emit == Emit::Final {
            self.s.env.g.borrow_mut().ops[s.op].config.push(("emit".into(), "final".into()));
        }
        s
    }

    /// Adds a keyed operator with keyed state and processing-time timers;
    /// set its timer callback with [`Stream::on_timer`].
    pub fn process<F>(&self, name: &str, f: F) -> Stream<'e>
    where
        F: FnMut(&mut KeyedContext, Record<'_>, &mut Collector<'_>) + 'static,
    {
        self.s.then(name, Func::Process(Box::new(f), None))
    }

    /// Makes the key_by a per-call combiner (Hadoop's combiner): during each
    /// call of its task it folds the records of each key with `f` into an
    /// accumulator (empty for the key's first record of the call) and, at the
    /// end of the call, passes on one `{key, accumulator}` record per key
    /// seen, with no time, instead of every record. The graph is the same.
    ///
    /// The keyed operator downstream then gets partial accumulators, not the
    /// original records: its function must merge them (a word count's
    /// combiner adds one per word, its reduce adds the values). That is
    /// exact when merging partial accumulators in any order and grouping
    /// gives the same result as folding every record, as sums, counts,
    /// minima and maxima do.
    ///
    /// Nothing is held between calls: barriers arrive between calls, so a
    /// checkpoint never finds records in the combiner, and checkpoints,
    /// savepoints and rescaling are unaffected. Within a call the combiner
    /// passes its accumulators on early when it holds 65,536 keys.
    pub fn combine<F>(self, f: F) -> Self
    where
        F: FnMut(&mut Vec<u8>, Record<'_>) + 'static,
    {
        let mut g = self.s.env.g.borrow_mut();
        if let Func::KeyBy(_, c) = &mut g.ops[self.s.op].func {
            *c = Some(Box::new(f));
        }
        drop(g);
        self
    }

    /// Sets the key_by operator's parallelism; by default it is its input's,
    /// so it chains to it and each key's records keep their order.
    pub fn set_parallelism(self, n: u32) -> Self {
        set_parallelism(self.s.env, self.s.op, n);
        self
    }
}
