// Declaring the dataflow: Env, Stream, KeyedStream and the graph JSON
// (docs/ABI.md, sluice_plan).

import { Bytes } from "./bytes";
import { Record } from "./record";
import { quote, quoteList } from "./json";
import { Accumulator, Collector, Context, KeyedContext } from "./task";

/** Turns one record into one record. Return r itself or a Record you reuse. */
export type MapFunc = (r: Record) => Record;
/** Turns one record into zero or more, emitted through out. */
export type FlatMapFunc = (r: Record, out: Collector) => void;
/** Keeps the records for which it returns true. */
export type FilterFunc = (r: Record) => bool;
/** Returns a record's key: which subtask sees it downstream, and its keyed state. */
export type KeyFunc = (r: Record) => Bytes;
/**
 * Folds r into acc, the key's accumulator kept by the SDK. acc.isSet is
 * false for a key's first record; change it in place with acc.setI64 or
 * acc.set.
 */
export type ReduceFunc = (acc: Accumulator, r: Record) => void;
/** Handles one record of a keyed stream, with the key's state and timers. */
export type ProcessFunc = (ctx: KeyedContext, r: Record, out: Collector) => void;
/** Runs when a processing-time timer registered for ctx.key() fires. */
export type TimerFunc = (ctx: KeyedContext, timeMs: i64, out: Collector) => void;
/**
 * Produces up to max records through out and returns true once the source
 * has ended. Keep its position in operator state (write it in an onBarrier
 * hook, read it back in onOpen) so it resumes after a failure.
 */
export type SourceFunc = (ctx: Context, max: i32, out: Collector) => bool;
/** Consumes one record. */
export type SinkFunc = (ctx: Context, r: Record) => void;
/** An operator's open or close hook. */
export type HookFunc = (ctx: Context) => void;
/** An operator's barrier hook: write operator state here. */
export type BarrierFunc = (ctx: Context, checkpointId: i64) => void;
/** The job's plan function: declares the dataflow on env. */
export type PlanFunc = (env: Env) => void;

/** How a reduce emits. */
export enum Emit {
  /** A record {key, accumulator} after every update. */
  Updates,
  /** Each key's final accumulator once, at the end of input (bounded jobs). */
  Final,
}

// The vertex kinds of the job graph.
export const KIND_SOURCE = "source";
export const KIND_MAP = "map";
export const KIND_FLAT_MAP = "flat_map";
export const KIND_FILTER = "filter";
export const KIND_KEY_BY = "key_by";
export const KIND_REDUCE = "reduce";
export const KIND_PROCESS = "process";
export const KIND_SINK = "sink";

/** Op is one declared operator: its vertex and the functions behind it. */
export class Op {
  parallelism: i32 = 0;
  connector: string = "";
  configKeys: string[] = [];
  configValues: string[] = [];
  hasOutput: bool = false;
  final: bool = false;

  mapFn: MapFunc | null = null;
  flatMapFn: FlatMapFunc | null = null;
  filterFn: FilterFunc | null = null;
  keyFn: KeyFunc | null = null;
  combineFn: ReduceFunc | null = null;
  reduceFn: ReduceFunc | null = null;
  processFn: ProcessFunc | null = null;
  timerFn: TimerFunc | null = null;
  sourceFn: SourceFunc | null = null;
  sinkFn: SinkFunc | null = null;

  onOpen: HookFunc | null = null;
  onBarrier: BarrierFunc | null = null;
  onClose: HookFunc | null = null;

  constructor(public id: i32, public name: string, public kind: string) {}

  config(key: string, value: string): void {
    this.configKeys.push(key);
    this.configValues.push(value);
  }
}

class Edge {
  constructor(public src: Op, public dst: Op, public part: string) {}
}

/** Env is what a job's plan function declares its dataflow on. */
export class Env {
  name: string = "";
  maxParallelism: i32 = 0;
  ops: Op[] = [];
  edges: Edge[] = [];
  err: string = "";

  constructor(private argList: string[]) {}

  /** The job's arguments (what follows `--` on the command line). */
  args(): string[] {
    return this.argList;
  }

  /**
   * Reports a problem found while planning, such as a bad argument: the plan
   * fails with msg (what the user sees) instead of declaring a graph.
   */
  fail(msg: string): void {
    if (this.err.length == 0) this.err = msg;
  }

  /** Names the job; the default is the first source's name. */
  setName(name: string): void {
    this.name = name;
  }

  /** The number of key groups: the most subtasks a keyed operator can have. Default 128. */
  setMaxParallelism(n: i32): void {
    if (n < 1) {
      this.fail("setMaxParallelism(" + n.toString() + "): must be at least 1");
      return;
    }
    this.maxParallelism = n;
  }

  /**
   * Reads text files line by line with the host's "text" connector: one
   * record per line, the line without its line ending as the value. Each
   * path is a file or a glob pattern, exactly as the user gave it.
   */
  textSource(name: string, paths: string[]): Stream {
    const o = this.add(name, KIND_SOURCE, false);
    o.connector = "text";
    o.config("paths", quoteList(paths));
    return new Stream(this, o, "");
  }

  /** A source written in AssemblyScript, called until it returns true. */
  source(name: string, fn: SourceFunc): Stream {
    const o = this.add(name, KIND_SOURCE, false);
    o.sourceFn = fn;
    return new Stream(this, o, "");
  }

  add(name: string, kind: string, keyed: bool): Op {
    const o = new Op(this.ops.length + 1, name, kind);
    if (name.length == 0) this.fail(kind + " operator " + o.id.toString() + " has no name: every operator needs one");
    this.ops.push(o);
    return o;
  }

  /** The graph JSON (internal/jobgraph.Graph). */
  graph(): string {
    // A key_by only computes keys: it runs at its input's parallelism unless
    // set, so it chains to its input and one key's records stay in order.
    for (let i = 0; i < this.edges.length; i++) {
      const e = this.edges[i];
      if (e.dst.kind == KIND_KEY_BY && e.dst.parallelism == 0) e.dst.parallelism = e.src.parallelism;
    }
    let name = this.name;
    for (let i = 0; i < this.ops.length && name.length == 0; i++) {
      if (this.ops[i].kind == KIND_SOURCE) name = this.ops[i].name;
    }
    let s = "{\"name\":" + quote(name);
    if (this.maxParallelism > 0) s += ",\"max_parallelism\":" + this.maxParallelism.toString();
    s += ",\"vertices\":[";
    for (let i = 0; i < this.ops.length; i++) {
      const o = this.ops[i];
      if (i > 0) s += ",";
      s += "{\"id\":" + o.id.toString() + ",\"name\":" + quote(o.name) + ",\"kind\":" + quote(o.kind);
      if (o.parallelism > 0) s += ",\"parallelism\":" + o.parallelism.toString();
      if (o.connector.length > 0) s += ",\"connector\":" + quote(o.connector);
      if (o.configKeys.length > 0) {
        s += ",\"config\":{";
        for (let j = 0; j < o.configKeys.length; j++) {
          if (j > 0) s += ",";
          s += quote(o.configKeys[j]) + ":" + quote(o.configValues[j]);
        }
        s += "}";
      }
      s += "}";
    }
    s += "],\"edges\":[";
    for (let i = 0; i < this.edges.length; i++) {
      const e = this.edges[i];
      let p = e.part;
      if (p.length == 0) {
        // Parallelism 0 is the job default, so equal fields mean equal
        // parallelism once the cluster picks the default.
        p = e.src.parallelism == e.dst.parallelism ? "forward" : "rebalance";
      }
      if (i > 0) s += ",";
      s += "{\"source\":" + e.src.id.toString() + ",\"target\":" + e.dst.id.toString() + ",\"partitioner\":" + quote(p) + "}";
    }
    return s + "]}";
  }
}

/** Stream is the output of one operator; its methods add operators that read it. */
export class Stream {
  constructor(public env: Env, public op: Op, public part: string) {}

  then(name: string, kind: string): Op {
    const e = this.env;
    if (this.op.kind == KIND_SINK) e.fail(kind + " \"" + name + "\" reads sink \"" + this.op.name + "\": a sink has no output");
    const o = e.add(name, kind, false);
    if ((kind == KIND_REDUCE || kind == KIND_PROCESS) && this.part != "hash") e.fail(kind + " \"" + name + "\" must follow keyBy");
    this.op.hasOutput = true;
    e.edges.push(new Edge(this.op, o, this.part));
    return o;
  }

  /** Turns each record into one record. */
  map(name: string, fn: MapFunc): Stream {
    const o = this.then(name, KIND_MAP);
    o.mapFn = fn;
    return new Stream(this.env, o, "");
  }

  /** Turns each record into zero or more. */
  flatMap(name: string, fn: FlatMapFunc): Stream {
    const o = this.then(name, KIND_FLAT_MAP);
    o.flatMapFn = fn;
    return new Stream(this.env, o, "");
  }

  /** Keeps the records fn returns true for. */
  filter(name: string, fn: FilterFunc): Stream {
    const o = this.then(name, KIND_FILTER);
    o.filterFn = fn;
    return new Stream(this.env, o, "");
  }

  /** Sets each record's key to fn(record); what follows sees the stream partitioned by it. */
  keyBy(name: string, fn: KeyFunc): KeyedStream {
    const o = this.then(name, KIND_KEY_BY);
    o.keyFn = fn;
    return new KeyedStream(new Stream(this.env, o, "hash"));
  }

  /** Ends the stream in the host's "collect" sink: values come back with the job's result. */
  collect(name: string): Stream {
    const o = this.then(name, KIND_SINK);
    o.connector = "collect";
    return new Stream(this.env, o, "");
  }

  /**
   * Ends the stream in the host's transactional "file" sink: each value is
   * one line of part files under path, committed with checkpoints.
   */
  writeFiles(name: string, path: string): Stream {
    const o = this.then(name, KIND_SINK);
    o.connector = "file";
    o.config("path", path);
    return new Stream(this.env, o, "");
  }

  /** Ends the stream in a sink written in AssemblyScript. */
  sink(name: string, fn: SinkFunc): Stream {
    const o = this.then(name, KIND_SINK);
    o.sinkFn = fn;
    return new Stream(this.env, o, "");
  }

  /** How many subtasks run this operator; the default is the job's parallelism. */
  setParallelism(n: i32): Stream {
    if (n < 1) this.env.fail("setParallelism(" + n.toString() + ") on \"" + this.op.name + "\": must be at least 1");
    else this.op.parallelism = n;
    return this;
  }

  /** The next operator receives this stream round-robin. */
  rebalance(): Stream {
    return new Stream(this.env, this.op, "rebalance");
  }

  /** Every subtask of the next operator receives every record. */
  broadcast(): Stream {
    return new Stream(this.env, this.op, "broadcast");
  }

  /** Subtask i of the next operator reads subtask i of this one (equal parallelism). */
  forward(): Stream {
    return new Stream(this.env, this.op, "forward");
  }

  /** The timer callback of a process operator. */
  onTimer(fn: TimerFunc): Stream {
    if (this.op.kind != KIND_PROCESS) this.env.fail("onTimer on \"" + this.op.name + "\": only process operators have timers");
    this.op.timerFn = fn;
    return this;
  }

  /** A hook run when a task running this operator starts: read operator state back here. */
  onOpen(fn: HookFunc): Stream {
    this.op.onOpen = fn;
    return this;
  }

  /** A hook run when a checkpoint reaches this operator: write operator state here. */
  onBarrier(fn: BarrierFunc): Stream {
    this.op.onBarrier = fn;
    return this;
  }

  /** A hook run when a task running this operator ends. */
  onClose(fn: HookFunc): Stream {
    this.op.onClose = fn;
    return this;
  }
}

/** KeyedStream is a stream partitioned by key, for reduce and process. */
export class KeyedStream {
  constructor(public s: Stream) {}

  /** The key_by's parallelism; by default its input's, so it chains to it. */
  setParallelism(n: i32): KeyedStream {
    this.s.setParallelism(n);
    return this;
  }

  /**
   * Makes the keyBy a per-call combiner (Hadoop's combiner): during each
   * call of its task it folds the records of each key with fn into an
   * accumulator (unset for the key's first record of the call) and, at the
   * end of the call, passes on one {key, accumulator} record per key seen,
   * with no time, instead of every record. The graph is the same.
   *
   * The keyed operator downstream then gets partial accumulators, not the
   * original records: its function must merge them (a word count's
   * combiner adds one per word, its reduce adds the values). That is exact
   * when merging partial accumulators in any order and grouping gives the
   * same result as folding every record, as sums, counts, minima and
   * maxima do.
   *
   * Nothing is held between calls: barriers arrive between calls, so a
   * checkpoint never finds records in the combiner, and checkpoints,
   * savepoints and rescaling are unaffected. Within a call the combiner
   * passes its accumulators on early when it holds 65,536 keys.
   */
  combine(fn: ReduceFunc): KeyedStream {
    this.s.op.combineFn = fn;
    return this;
  }

  /**
   * Folds each key's records into an accumulator. It emits {key,
   * accumulator} after every update, or once per key at the end of input
   * with Emit.Final. Accumulators stay in guest memory between barriers and
   * go to keyed state at each barrier, so a record costs no host call.
   */
  reduce(name: string, fn: ReduceFunc, emit: Emit = Emit.Updates): Stream {
    const o = this.s.then(name, KIND_REDUCE);
    o.reduceFn = fn;
    if (emit == Emit.Final) {
      o.final = true;
      o.config("emit", "final");
    }
    return new Stream(this.s.env, o, "");
  }

  /** A keyed operator with keyed state and processing-time timers (see onTimer). */
  process(name: string, fn: ProcessFunc): Stream {
    const o = this.s.then(name, KIND_PROCESS);
    o.processFn = fn;
    return new Stream(this.s.env, o, "");
  }
}

// The job's plan function. A module is one job, so one global is the registry.
let registered: PlanFunc | null = null;

/**
 * Registers the function that declares the job's dataflow. Call it once,
 * at the top level of the entry file. It runs when the cluster plans the job
 * and again in every task, so it must declare the same graph for the same
 * arguments and do nothing else.
 */
export function job(plan: PlanFunc): void {
  assert(registered == null, "job called twice: a module declares one job");
  registered = plan;
}

/** declare runs the registered plan function; on failure env.err is set. */
export function declare(args: string[]): Env {
  const e = new Env(args);
  const plan = registered;
  if (plan == null) {
    e.fail("no job declared: call job(plan) at the top level of the entry file");
    return e;
  }
  plan(e);
  if (e.err.length == 0 && e.ops.length == 0) e.fail("plan: the job declares no operators");
  return e;
}
