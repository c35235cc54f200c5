//! Running a task: the chain of operators one instance runs, the contexts
//! operators see, and the output batch.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use crate::batch::{BatchWriter, Record};
use crate::host;
use crate::plan::{FilterFn, FlatMapFn, Func, Hooks, KeyFn, MapFn, ProcessFn, ReduceFn, SinkFn, SourceFn, TimerFn};
use crate::reduce::Reduce;

/// How much output is buffered before a batch is emitted in the middle of a
/// call; output is always emitted before an export returns.
const FLUSH_BYTES: usize = 1 << 20;

/// The task info of docs/ABI.md (`sluice_open`).
#[derive(Debug, Default)]
pub(crate) struct TaskInfo {
    pub(crate) job_id: String,
    pub(crate) task: String,
    pub(crate) chain: Vec<i32>,
    pub(crate) subtask: u32,
    pub(crate) parallelism: u32,
    pub(crate) max_parallelism: u32,
    pub(crate) key_group_start: u32,
    pub(crate) key_group_end: u32,
    pub(crate) args: Vec<String>,
}

/// What an operator's functions see of the task they run in.
pub struct Context {
    info: Rc<TaskInfo>,
    vertex: i32,
    name: Rc<str>,
    buf: Vec<u8>,
}

impl Context {
    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operator's vertex id in the job graph.
    pub fn vertex(&self) -> i32 {
        self.vertex
    }

    /// Which of the operator's parallel subtasks this is, from 0.
    pub fn subtask(&self) -> u32 {
        self.info.subtask
    }

    /// How many subtasks run the operator.
    pub fn parallelism(&self) -> u32 {
        self.info.parallelism
    }

    /// The job's number of key groups.
    pub fn max_parallelism(&self) -> u32 {
        self.info.max_parallelism
    }

    /// The inclusive range of key groups whose keyed state this subtask holds.
    pub fn key_groups(&self) -> (u32, u32) {
        (self.info.key_group_start, self.info.key_group_end)
    }

    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.info.job_id
    }

    /// The task's display name, such as `count (2/4)`.
    pub fn task(&self) -> &str {
        &self.info.task
    }

    /// The job's arguments.
    pub fn args(&self) -> &[String] {
        &self.info.args
    }

    /// The task's processing time in milliseconds since the Unix epoch, as
    /// the host grants it (docs/ABI.md, `now_ms`): a virtual clock unless
    /// the job has `sandbox.clock=wall`.
    pub fn now_ms(&self) -> i64 {
        host::now_ms()
    }

    /// Adds `delta` to the job-wide counter `name`; see [`crate::count`].
    pub fn count(&self, name: &str, delta: i64) {
        crate::count(name, delta)
    }

    /// This subtask's operator state `name`, if set. The slice is valid
    /// until the next state call on this context.
    pub fn operator_state(&mut self, name: &str) -> Option<&[u8]> {
        let v = self.vertex;
        host::get_into(&mut self.buf, |b| host::op_state_get(v, name, b)).map(move |n| &self.buf[..n])
    }

    /// Stores `value` as operator state `name`; it is part of every
    /// checkpoint from now on. After a rescale each old subtask's operator
    /// state goes to exactly one new subtask.
    pub fn set_operator_state(&self, name: &str, value: &[u8]) {
        host::op_state_put(self.vertex, name, value)
    }

    /// Removes operator state `name`.
    pub fn delete_operator_state(&self, name: &str) {
        host::op_state_delete(self.vertex, name)
    }
}

/// A [`Context`] inside a keyed operator, scoped to the key of the record
/// (or timer) being handled. Its state is the host's, per key, and part of
/// every checkpoint; it dereferences to the [`Context`].
pub struct KeyedContext {
    ctx: Context,
    key: Vec<u8>,
    timers: bool,
}

impl Deref for KeyedContext {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl DerefMut for KeyedContext {
    fn deref_mut(&mut self) -> &mut Context {
        &mut self.ctx
    }
}

impl KeyedContext {
    /// The current key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current key's state `name`, if set. The slice is valid until the
    /// next state call on this context.
    pub fn get(&mut self, name: &str) -> Option<&[u8]> {
        let v = self.ctx.vertex;
        let key = &self.key;
        host::get_into(&mut self.ctx.buf, |b| host::state_get(v, name, key, b)).map(move |n| &self.ctx.buf[..n])
    }

    /// Stores `value` as the current key's state `name`.
    pub fn put(&self, name: &str, value: &[u8]) {
        host::state_put(self.ctx.vertex, name, &self.key, value)
    }

    /// Removes the current key's state `name`.
    pub fn delete(&self, name: &str) {
        host::state_delete(self.ctx.vertex, name, &self.key)
    }

    /// The current key's state `name` as an `i64` (see [`crate::as_i64`]).
    pub fn get_i64(&mut self, name: &str) -> Option<i64> {
        self.get(name).map(crate::as_i64)
    }

    /// Stores `n` as the current key's state `name`.
    pub fn put_i64(&self, name: &str, n: i64) {
        self.put(name, &n.to_le_bytes())
    }

    /// Asks for the operator's timer callback to run for the current key once
    /// processing time reaches `time_ms`. Registering the same time twice
    /// for a key gives one call.
    ///
    /// # Panics
    ///
    /// When the operator has no [`crate::Stream::on_timer`] callback.
    pub fn register_timer(&self, time_ms: i64) {
        if !self.timers {
            panic!("register_timer in {:?}: give the operator an on_timer callback first", self.ctx.name);
        }
        host::timer_register(self.ctx.vertex, &self.key, time_ms)
    }

    /// Cancels a timer registered for the current key.
    pub fn delete_timer(&self, time_ms: i64) {
        host::timer_delete(self.ctx.vertex, &self.key, time_ms)
    }
}

/// The output batch of the chain's last operator.
pub(crate) struct Emitter {
    w: BatchWriter,
}

impl Emitter {
    fn push(&mut self, r: &Record<'_>) {
        self.w.push(r);
        if self.w.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    pub(crate) fn flush(&mut self) {
        if self.w.count() > 0 {
            host::emit(self.w.finish());
            self.w.clear();
        }
    }
}

/// Passes records to the next operator of the chain (or out of the task).
/// Records are copied before `emit` returns, so they may borrow anything.
pub struct Collector<'a> {
    rest: &'a mut [Node],
    out: &'a mut Emitter,
}

impl Collector<'_> {
    /// Passes `r` on.
    pub fn emit(&mut self, r: Record<'_>) {
        push(self.rest, r, self.out)
    }

    /// Passes on a record with value `v` and no key or time.
    pub fn emit_value(&mut self, v: &[u8]) {
        push(self.rest, Record::new(v), self.out)
    }

    /// Passes on a record with key `k` and value `v`.
    pub fn emit_key_value(&mut self, k: &[u8], v: &[u8]) {
        push(self.rest, Record::new(v).with_key(k), self.out)
    }
}

pub(crate) enum Kind {
    Map(MapFn, Vec<u8>),
    FlatMap(FlatMapFn),
    Filter(FilterFn),
    KeyBy(KeyFn, Vec<u8>, Option<Box<Combiner>>),
    Reduce(Box<Reduce>),
    Process(ProcessFn, Option<TimerFn>),
    Sink(SinkFn),
    Source(SourceFn),
}

/// One operator of the task's chain.
pub(crate) struct Node {
    ctx: KeyedContext,
    hooks: Hooks,
    kind: Kind,
}

/// Runs `r` through `nodes`, the rest of the chain; past its end, into the
/// output batch.
pub(crate) fn push(nodes: &mut [Node], r: Record<'_>, out: &mut Emitter) {
    let (n, rest) = match nodes.split_first_mut() {
        Some(x) => x,
        None => return out.push(&r),
    };
    match &mut n.kind {
        Kind::Map(f, buf) => {
            buf.clear();
            let o = f(r, buf);
            push(rest, o, out)
        }
        Kind::FlatMap(f) => f(r, &mut Collector { rest, out }),
        Kind::Filter(f) => {
            if f(&r) {
                push(rest, r, out)
            }
        }
        Kind::KeyBy(f, buf, comb) => {
            buf.clear();
            let k = f(r, buf);
            match comb {
                None => push(rest, r.with_key(k), out),
                Some(c) => {
                    c.add(k, r.with_key(k));
                    if c.index.len() >= COMBINE_KEYS {
                        c.flush(rest, out)
                    }
                }
            }
        }
        Kind::Reduce(s) => s.push(r, rest, out),
        Kind::Process(f, _) => match r.key {
            Some(k) => {
                n.ctx.key.clear();
                n.ctx.key.extend_from_slice(k);
                f(&mut n.ctx, r, &mut Collector { rest, out })
            }
            None => crate::fail(format!("process {:?} got a record without a key: put key_by before it", n.ctx.name())),
        },
        Kind::Sink(f) => f(&mut n.ctx, r),
        // A source heads its chain: nothing pushes into it.
        Kind::Source(_) => {}
    }
}

/// How many keys a combiner holds before it passes its accumulators on
/// within a call, which bounds its memory.
const COMBINE_KEYS: usize = 65536;

/// FNV-1a: the combiner hashes short keys in guest memory, where SipHash's
/// protection against chosen keys buys nothing (a task's input is its job's).
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for b in bytes {
            h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A key_by's per-call combiner ([`crate::KeyedStream::combine`]): the
/// accumulators of the keys seen since the last flush.
pub(crate) struct Combiner {
    f: ReduceFn,
    /// Key to index into `accs`.
    index: HashMap<Vec<u8>, usize, BuildHasherDefault<Fnv>>,
    /// Accumulators; the first `index.len()` are live, the rest keep their
    /// memory for the next call.
    accs: Vec<Vec<u8>>,
}

impl Combiner {
    fn new(f: ReduceFn) -> Self {
        Combiner { f, index: HashMap::default(), accs: Vec::new() }
    }

    /// Folds `r` into `k`'s accumulator.
    fn add(&mut self, k: &[u8], r: Record<'_>) {
        let i = match self.index.get(k) {
            Some(&i) => i,
            None => {
                let i = self.index.len();
                self.index.insert(k.to_vec(), i);
                match self.accs.get_mut(i) {
                    Some(a) => a.clear(),
                    None => self.accs.push(Vec::new()),
                }
                i
            }
        };
        (self.f)(&mut self.accs[i], r)
    }

    /// Passes one `{key, accumulator}` per key on and forgets them.
    fn flush(&mut self, rest: &mut [Node], out: &mut Emitter) {
        let Combiner { index, accs, .. } = self;
        for (k, i) in index.drain() {
            push(rest, Record::new(&accs[i]).with_key(&k), out)
        }
    }
}

/// The chain of operators this instance runs.
pub(crate) struct Task {
    pub(crate) info: Rc<TaskInfo>,
    nodes: Vec<Node>,
    pub(crate) out: Emitter,
}

impl Task {
    /// Builds the chain `info.chain` names out of the declared operators.
    pub(crate) fn new(info: TaskInfo, mut ops: Vec<crate::plan::OpDecl>) -> Result<Task, String> {
        if info.chain.is_empty() {
            return Err("open: empty chain".into());
        }
        let info = Rc::new(info);
        let count = ops.len();
        let mut slots: Vec<Option<crate::plan::OpDecl>> = ops.drain(..).map(Some).collect();
        let mut nodes = Vec::with_capacity(info.chain.len());
        for (i, &id) in info.chain.iter().enumerate() {
            let o = match slots.get_mut((id as usize).wrapping_sub(1)).and_then(Option::take) {
                Some(o) => o,
                None => {
                    return Err(format!(
                        "open: chain names vertex {}, the job declares 1..{} (is the plan deterministic?)",
                        id, count
                    ))
                }
            };
            if let Some(c) = o.func.connector() {
                return Err(format!("open: vertex {} {:?} is the host connector {:?}, not guest code", id, o.name, c));
            }
            let last = i + 1 == info.chain.len();
            let kind = match o.func {
                Func::Map(f) => Kind::Map(f, Vec::new()),
                Func::FlatMap(f) => Kind::FlatMap(f),
                Func::Filter(f) => Kind::Filter(f),
                Func::KeyBy(f, c) => Kind::KeyBy(f, Vec::new(), c.map(|f| Box::new(Combiner::new(f)))),
                Func::Reduce(f, emit) => Kind::Reduce(Box::new(Reduce::new(o.id, f, emit))),
                Func::Process(f, t) => Kind::Process(f, t),
                Func::Sink(f) if last => Kind::Sink(f),
                Func::Sink(_) => return Err(format!("open: sink {:?} is not the chain's tail", o.name)),
                Func::Source(f) if i == 0 => Kind::Source(f),
                Func::Source(_) => return Err(format!("open: source {:?} inside a chain", o.name)),
                Func::TextSource | Func::Collect | Func::Files => unreachable!("connectors were refused above"),
            };
            let timers = matches!(kind, Kind::Process(_, Some(_)));
            let ctx = Context { info: info.clone(), vertex: o.id, name: o.name.into(), buf: Vec::new() };
            nodes.push(Node { ctx: KeyedContext { ctx, key: Vec::new(), timers }, hooks: o.hooks, kind });
        }
        Ok(Task { info, nodes, out: Emitter { w: BatchWriter::with_capacity(64 << 10) } })
    }

    pub(crate) fn open(&mut self) {
        for n in &mut self.nodes {
            if let Some(h) = &mut n.hooks.open {
                h(&mut n.ctx);
            }
        }
    }

    /// Runs every record of `batch` through the chain, stopping at a failure.
    pub(crate) fn process(&mut self, batch: &[u8]) -> Result<(), String> {
        if matches!(self.nodes[0].kind, Kind::Source(_)) {
            return Err(format!("process: the chain's head {:?} is a source", self.nodes[0].ctx.name()));
        }
        let (nodes, out) = (&mut self.nodes[..], &mut self.out);
        crate::batch::for_each_record(batch, |r| {
            push(nodes, r, out);
            !failed()
        })
        .map_err(|e| format!("process: {}", e))
    }

    pub(crate) fn poll(&mut self, max: usize) -> Result<crate::SourceStatus, String> {
        let (head, rest) = self.nodes.split_first_mut().expect("a chain is never empty");
        match &mut head.kind {
            Kind::Source(f) => Ok(f(&mut head.ctx, max, &mut Collector { rest, out: &mut self.out })),
            _ => Err(format!("source poll: the chain's head {:?} is not a source", head.ctx.name())),
        }
    }

    /// The end of a call that may have pushed records: combiners pass their
    /// accumulators on, in chain order (one may feed another), so nothing
    /// is held between calls.
    pub(crate) fn end_call(&mut self) {
        for i in 0..self.nodes.len() {
            let (n, rest) = self.nodes[i..].split_first_mut().expect("i is in range");
            if let Kind::KeyBy(_, _, Some(c)) = &mut n.kind {
                c.flush(rest, &mut self.out);
            }
        }
    }

    /// The end of input, in chain order: a final reduce emits its results.
    pub(crate) fn end_input(&mut self) {
        for i in 0..self.nodes.len() {
            let (n, rest) = self.nodes[i..].split_first_mut().expect("i is in range");
            if let Kind::Reduce(s) = &mut n.kind {
                s.end_input(rest, &mut self.out);
            }
        }
    }

    /// Runs each operator's barrier work in chain order: accumulators held
    /// in guest memory go to keyed state first, since the host snapshots
    /// when the call returns, then the hook.
    pub(crate) fn barrier(&mut self, id: i64) {
        for n in &mut self.nodes {
            if let Kind::Reduce(s) = &mut n.kind {
                s.flush(false);
            }
            if let Some(h) = &mut n.hooks.barrier {
                h(&mut n.ctx, id);
            }
        }
    }

    /// Runs the timer callback of `vertex` for `key` at `time`.
    pub(crate) fn timer(&mut self, vertex: i32, key: &[u8], time: i64) -> Result<(), String> {
        let i = self.nodes.iter().position(|n| n.ctx.vertex == vertex && matches!(n.kind, Kind::Process(_, Some(_))));
        let i = i.ok_or_else(|| format!("timers: vertex {} is not a process operator with on_timer in this task", vertex))?;
        let (n, rest) = self.nodes[i..].split_first_mut().expect("i is in range");
        if let Kind::Process(_, Some(t)) = &mut n.kind {
            n.ctx.key.clear();
            n.ctx.key.extend_from_slice(key);
            t(&mut n.ctx, time, &mut Collector { rest, out: &mut self.out });
        }
        Ok(())
    }

    pub(crate) fn close(&mut self) {
        for n in &mut self.nodes {
            if let Some(h) = &mut n.hooks.close {
                h(&mut n.ctx);
            }
        }
    }
}

// One instance runs one task, single-threaded: its state lives in
// thread-locals, which on wasm32 are plain statics.
thread_local! {
    pub(crate) static TASK: RefCell<Option<Task>> = RefCell::new(None);
    static FAILED: Cell<bool> = Cell::new(false);
    static FAILURE: RefCell<String> = RefCell::new(String::new());
    static COUNTERS: RefCell<Vec<(String, i64)>> = RefCell::new(Vec::new());
}

/// Records `msg` as the reason the current call fails; the first reason
/// wins. See [`crate::fail`].
pub(crate) fn set_failure(msg: String) {
    FAILED.with(|f| {
        if !f.get() {
            f.set(true);
            FAILURE.with(|m| *m.borrow_mut() = msg);
        }
    });
}

pub(crate) fn failed() -> bool {
    FAILED.with(Cell::get)
}

/// The failure of the current call, if any, cleared.
pub(crate) fn take_failure() -> Option<String> {
    if !FAILED.with(|f| f.replace(false)) {
        return None;
    }
    Some(FAILURE.with(|m| std::mem::take(&mut *m.borrow_mut())))
}

pub(crate) fn add_count(name: &str, delta: i64) {
    COUNTERS.with(|c| {
        let mut c = c.borrow_mut();
        match c.iter_mut().find(|(n, _)| n == name) {
            Some((_, d)) => *d += delta,
            None => c.push((name.to_string(), delta)),
        }
    })
}

pub(crate) fn flush_counters() {
    COUNTERS.with(|c| {
        for (name, d) in c.borrow_mut().drain(..) {
            if d != 0 {
                host::counter_add(&name, d);
            }
        }
    })
}
