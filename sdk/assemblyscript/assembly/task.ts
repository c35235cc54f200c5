// Running a task: the chain of operators one instance runs, the contexts
// user functions get, and the bodies of the ABI's exports (docs/ABI.md,
// section 3).

import * as host from "./host";
import { Buf, Bytes } from "./bytes";
import { Record } from "./record";
import { TaskInfo, parseTaskInfo } from "./json";
import {
  Env, Op, ReduceFunc, declare,
  KIND_FILTER, KIND_FLAT_MAP, KIND_KEY_BY, KIND_MAP, KIND_PROCESS, KIND_REDUCE, KIND_SINK, KIND_SOURCE,
} from "./plan";
import { AccTable } from "./acctable";

// flushBytes is how much output the SDK buffers before it emits in the
// middle of a call. Output is always emitted before an export returns, so a
// call usually makes exactly one emit.
const FLUSH_BYTES: u32 = 1 << 20;

// ---- failures and counters --------------------------------------------

// failure is the reason the current export fails, "" while it does not.
// AssemblyScript has no exceptions, so fail() records the reason, the SDK
// stops feeding records, and the export returns ERROR when it unwinds.
let failure = "";

/**
 * Fails the task with msg: the SDK stops feeding records to the chain and
 * the current call returns ERROR with msg once your function returns. The
 * task restarts from its last checkpoint (or the job fails).
 */
export function fail(msg: string): void {
  if (failure.length == 0) failure = msg.length > 0 ? msg : "fail() with an empty message";
}

/** Whether fail was called during the current call. */
export function failed(): bool {
  return failure.length > 0;
}

// counters holds counter deltas not yet handed to the host.
const counters = new Map<string, i64>();

/**
 * Adds delta to the job-wide counter name (an accumulator in Flink's terms).
 * Counters are handed to the host once per call, not per count.
 */
export function count(name: string, delta: i64): void {
  counters.set(name, counters.has(name) ? counters.get(name) + delta : delta);
}

function flushCounters(): void {
  if (counters.size == 0) return;
  const names = counters.keys();
  for (let i = 0; i < names.length; i++) {
    const d = counters.get(names[i]);
    if (d != 0) {
      const b = String.UTF8.encode(names[i]);
      host.counter_add(changetype<usize>(b), b.byteLength, d);
    }
  }
  counters.clear();
}

// ---- stages -------------------------------------------------------------

/** Stage is one operator of a chain, or the emitter after the last. */
export class Stage {
  push(r: Record): void {
    unreachable();
  }
  endInput(): void {}
}

/** Emitter encodes the chain's output (docs/ABI.md, section 2) and emits it. */
export class Emitter extends Stage {
  buf: Buf = new Buf(64 << 10);
  n: u32 = 0;

  constructor() {
    super();
    this.buf.len = 4;
  }

  push(r: Record): void {
    let need: u32 = 5 + <u32>r.value.length;
    if (r.hasKey) need += 4 + <u32>r.key.length;
    if (r.hasTime) need += 8;
    const b = this.buf;
    b.reserve(need);
    let p = b.ptr + b.len;
    store<u8>(p, (r.hasKey ? 1 : 0) | (r.hasTime ? 2 : 0));
    p += 1;
    if (r.hasKey) {
      store<u32>(p, r.key.length);
      memory.copy(p + 4, r.key.ptr, r.key.length);
      p += 4 + r.key.length;
    }
    if (r.hasTime) {
      store<i64>(p, r.time);
      p += 8;
    }
    store<u32>(p, r.value.length);
    memory.copy(p + 4, r.value.ptr, r.value.length);
    b.len += need;
    this.added();
  }

  /** push of {value}, without a Record. */
  pushValue(vp: usize, vn: i32): void {
    const b = this.buf;
    const need: u32 = 5 + <u32>vn;
    b.reserve(need);
    const p = b.ptr + b.len;
    store<u8>(p, 0);
    store<u32>(p + 1, vn);
    memory.copy(p + 5, vp, vn);
    b.len += need;
    this.added();
  }

  /** push of {key, value}, without a Record. */
  pushKeyValue(kp: usize, kn: i32, vp: usize, vn: i32): void {
    const b = this.buf;
    const need: u32 = 9 + <u32>kn + <u32>vn;
    b.reserve(need);
    const p = b.ptr + b.len;
    store<u8>(p, 1);
    store<u32>(p + 1, kn);
    memory.copy(p + 5, kp, kn);
    store<u32>(p + 5 + kn, vn);
    memory.copy(p + 9 + kn, vp, vn);
    b.len += need;
    this.added();
  }

  @inline added(): void {
    this.n++;
    if (this.buf.len >= FLUSH_BYTES) this.flush();
  }

  flush(): void {
    if (this.n == 0) return;
    store<u32>(this.buf.ptr, this.n);
    host.emit(this.buf.ptr, this.buf.len);
    this.buf.len = 4;
    this.n = 0;
  }
}

/** Collector passes records to the next operator. */
export class Collector {
  // Direct paths for the common chain tails, the emitter itself or a keyBy
  // that feeds it: a call through Stage costs a type dispatch per record.
  emitter: Emitter | null;
  keyBy: KeyByStage | null = null;
  private rec: Record = new Record();

  constructor(public next: Stage) {
    this.emitter = next instanceof Emitter ? changetype<Emitter>(next) : null;
    if (next instanceof KeyByStage) {
      const kb = changetype<KeyByStage>(next);
      if (kb.emitter != null && kb.comb == null) this.keyBy = kb;
    }
  }

  /** Passes r on. The SDK copies it before emit returns. */
  emit(r: Record): void {
    this.next.push(r);
  }

  /** Passes on a record with value v and no key or time. */
  emitValue(v: Bytes): void {
    const em = this.emitter;
    if (em != null) {
      em.pushValue(v.ptr, v.length);
      return;
    }
    const r = this.rec;
    r.value.set(v.ptr, v.length);
    r.hasKey = false;
    r.hasTime = false;
    const kb = this.keyBy;
    if (kb != null) {
      const k = kb.fn(r);
      changetype<Emitter>(kb.emitter).pushKeyValue(k.ptr, k.length, v.ptr, v.length);
      return;
    }
    this.next.push(r);
  }

  /** Passes on a record with key k and value v. */
  emitKeyValue(k: Bytes, v: Bytes): void {
    const em = this.emitter;
    if (em != null) {
      em.pushKeyValue(k.ptr, k.length, v.ptr, v.length);
      return;
    }
    const r = this.rec;
    r.key.set(k.ptr, k.length);
    r.value.set(v.ptr, v.length);
    r.hasKey = true;
    r.hasTime = false;
    this.next.push(r);
  }
}

class MapStage extends Stage {
  constructor(public fn: (r: Record) => Record, public next: Stage) {
    super();
  }
  push(r: Record): void {
    this.next.push(this.fn(r));
  }
  endInput(): void {
    this.next.endInput();
  }
}

class FilterStage extends Stage {
  constructor(public fn: (r: Record) => bool, public next: Stage) {
    super();
  }
  push(r: Record): void {
    if (this.fn(r)) this.next.push(r);
  }
  endInput(): void {
    this.next.endInput();
  }
}

class FlatMapStage extends Stage {
  out: Collector;
  constructor(public fn: (r: Record, out: Collector) => void, public next: Stage) {
    super();
    this.out = new Collector(next);
  }
  push(r: Record): void {
    this.fn(r, this.out);
  }
  endInput(): void {
    this.next.endInput();
  }
}

// A combining keyBy passes its accumulators on early, within a call, when it
// holds this many keys: it bounds the table's memory.
const COMBINE_KEYS: i32 = 65536;

export class KeyByStage extends Stage {
  emitter: Emitter | null;
  private rec: Record = new Record();
  // The combiner (KeyedStream.combine): the accumulators of the keys seen
  // since the last flush, or null.
  comb: AccTable | null = null;
  private combAcc: Accumulator | null = null;
  private combFn: ReduceFunc | null = null;
  constructor(public fn: (r: Record) => Bytes, public next: Stage, combineFn: ReduceFunc | null) {
    super();
    this.emitter = next instanceof Emitter ? changetype<Emitter>(next) : null;
    if (combineFn != null) {
      const c = new AccTable();
      this.comb = c;
      this.combAcc = new Accumulator(c);
      this.combFn = combineFn;
    }
  }
  push(r: Record): void {
    const k = this.fn(r);
    const c = this.comb;
    if (c != null) {
      const kp = k.ptr, kn = <u32>k.length;
      let i = c.find(kp, kn);
      if (i < 0) i = c.insert(kp, kn);
      const acc = changetype<Accumulator>(this.combAcc);
      acc.i = i;
      const o = this.rec.assign(r);
      o.key.set(kp, kn);
      o.hasKey = true;
      changetype<ReduceFunc>(this.combFn)(acc, o);
      if (c.count >= COMBINE_KEYS) this.flush();
      return;
    }
    const em = this.emitter;
    if (em != null && !r.hasTime) {
      em.pushKeyValue(k.ptr, k.length, r.value.ptr, r.value.length);
      return;
    }
    // A record of our own: the caller's is not ours to change.
    const o = this.rec.assign(r);
    o.key.set(k.ptr, k.length);
    o.hasKey = true;
    this.next.push(o);
  }
  /** Passes the combiner's accumulators on, one {key, accumulator} per key, and forgets them. */
  flush(): void {
    const c = this.comb;
    if (c == null || c.count == 0) return;
    const o = this.rec;
    o.hasKey = true;
    o.hasTime = false;
    for (let i = 0; i < c.count && !failed(); i++) {
      c.keyView(i, o.key);
      c.acc(i, o.value);
      this.next.push(o);
    }
    c.reset();
  }
  endInput(): void {
    this.next.endInput();
  }
}

// A reduce keeps its accumulators in guest memory (AccTable), so a record
// costs no host call: a key's accumulator is read from keyed state once,
// when the key is first seen (it may be there after a restore), and the
// changed ones are written back with state_put_batch at every barrier,
// before the barrier hooks, so the host's snapshot holds everything
// processed before the barrier; and when the cache outgrows these bounds
// (then it is emptied).
const REDUCE_CACHE_ENTRIES: i32 = 256 << 10;
const REDUCE_CACHE_BYTES: u32 = 16 << 20;
const PUT_BATCH_BYTES: u32 = 1 << 20;
const SCAN_BYTES: u32 = 64 << 10;

const STATE_UNKNOWN: u8 = 0;
const STATE_EMPTY: u8 = 1;
const STATE_MAY_HOLD: u8 = 2;

/**
 * Accumulator is a reduce's accumulator of the current key, kept by the SDK.
 * Change it in place; the SDK writes it to keyed state at checkpoints.
 */
export class Accumulator {
  /** @internal */ t: AccTable;
  /** @internal */ i: i32 = 0;
  private view: Bytes = new Bytes();

  constructor(t: AccTable) {
    this.t = t;
  }

  /** Whether the key has an accumulator yet (false for its first record). */
  get isSet(): bool {
    return this.t.present(this.i);
  }

  /** The accumulator's bytes (empty when not set); valid until it is set again. */
  value(): Bytes {
    return this.t.acc(this.i, this.view);
  }

  /** The accumulator as a little-endian i64; 0 when not set. */
  getI64(): i64 {
    return this.t.accI64(this.i);
  }

  /** Sets the accumulator to the 8-byte little-endian encoding of n. */
  setI64(n: i64): void {
    this.t.setI64(this.i, n);
  }

  /** Sets the accumulator to a copy of v (v may be the accumulator's own bytes). */
  set(v: Bytes): void {
    this.t.set(this.i, v.ptr, <u32>v.length);
  }
}

class ReduceStage extends Stage {
  ctx: KeyedContext;
  cache: AccTable = new AccTable();
  acc: Accumulator = new Accumulator(this.cache);
  scan: Buf = new Buf(0);
  batch: Buf = new Buf(0);
  state: u8 = STATE_UNKNOWN;
  private out: Record = new Record();
  private rec: Record = new Record();

  constructor(public op: Op, public t: Task, public next: Stage) {
    super();
    this.ctx = new KeyedContext(t, op);
  }

  push(r: Record): void {
    if (!r.hasKey) {
      fail("reduce \"" + this.op.name + "\" got a record without a key: put keyBy before it");
      return;
    }
    const c = this.cache;
    const kp = r.key.ptr, kn = <u32>r.key.length;
    let i = c.find(kp, kn);
    if (i < 0) {
      i = c.insert(kp, kn);
      if (this.stateMayHold()) {
        this.ctx.cur.set(kp, kn);
        const v = this.ctx.get("");
        if (v != null) c.load(i, v.ptr, <u32>v.length);
      }
    }
    this.acc.i = i;
    changetype<(acc: Accumulator, r: Record) => void>(this.op.reduceFn)(this.acc, r);
    if (!this.op.final) {
      const o = this.out;
      const k = c.keyView(i, o.key);
      c.acc(i, o.value);
      o.hasKey = true;
      o.hasTime = false;
      this.next.push(o);
    }
    if (c.count >= REDUCE_CACHE_ENTRIES || c.size() >= REDUCE_CACHE_BYTES) this.flush(true);
  }

  /** Writes the accumulators changed since the last flush; empties the cache when evict. */
  flush(evict: bool): void {
    const c = this.cache;
    if (c.dirtyCount() > 0) {
      const b = this.batch;
      b.reset();
      b.addU32(0);
      let n: u32 = 0;
      const nd = c.dirtyCount();
      for (let j = 0; j < nd; j++) {
        const i = c.dirtyAt(j);
        c.clearDirty(i);
        const kn = c.klen(i), an = c.alen(i);
        b.reserve(9 + kn + an);
        b.addByte(1);
        b.addU32(kn);
        b.add(c.kptr(i), kn);
        b.addU32(an);
        b.add(c.aptr(i), an);
        n++;
        if (b.len >= PUT_BATCH_BYTES) {
          this.putBatch(n);
          n = 0;
        }
      }
      if (n > 0) this.putBatch(n);
      c.resetDirty();
    }
    if (evict) {
      c.reset();
      this.state = STATE_MAY_HOLD;
    }
  }

  putBatch(n: u32): void {
    const b = this.batch;
    store<u32>(b.ptr, n);
    host.state_put_batch(this.op.id, 0, 0, b.ptr, b.len);
    b.len = 4;
  }

  // stateMayHold reports whether keyed state may hold an accumulator the
  // cache does not have. Keyed state starts empty unless it was restored,
  // and then only the reduce writes it: while it was found empty and the
  // cache was never emptied, every accumulator is in the cache and a new
  // key needs no state_get. One scan tells empty from not.
  stateMayHold(): bool {
    if (this.state == STATE_UNKNOWN) {
      this.state = STATE_MAY_HOLD;
      const s = this.scan;
      s.reserve(SCAN_BYTES);
      let empty = true;
      for (;;) {
        const n = host.state_scan(this.op.id, 0, 0, s.ptr, s.cap);
        if (n == 0) break;
        empty = false;
        // Finish the scan all the same, so the next one starts over.
        if (n < 0) s.reserve(<u32>-n);
      }
      if (empty) this.state = STATE_EMPTY;
    }
    return this.state == STATE_MAY_HOLD;
  }

  endInput(): void {
    if (this.op.final) this.emitFinal();
    this.next.endInput();
  }

  // emitFinal emits every key's accumulator once: the cache has the newest
  // of every key it holds; a scan of keyed state finds the others.
  emitFinal(): void {
    const c = this.cache;
    const s = this.scan;
    s.reserve(SCAN_BYTES);
    const r = this.rec;
    for (;;) {
      const n = host.state_scan(this.op.id, 0, 0, s.ptr, s.cap);
      if (n == 0) break;
      if (n < 0) {
        s.reserve(<u32>-n);
        continue;
      }
      const cnt = load<u32>(s.ptr);
      let p = s.ptr + 4;
      for (let j: u32 = 0; j < cnt && !failed(); j++) {
        p = decodeRecord(p, s.ptr + <usize>n, r);
        if (p == 0) {
          fail("reduce \"" + this.op.name + "\": malformed state scan");
          return;
        }
        if (c.find(r.key.ptr, <u32>r.key.length) < 0) this.next.push(r);
      }
    }
    const o = this.out;
    o.hasKey = true;
    o.hasTime = false;
    for (let i = 0; i < c.count && !failed(); i++) {
      if (!c.present(i)) continue;
      c.keyView(i, o.key);
      c.acc(i, o.value);
      this.next.push(o);
    }
  }
}

class ProcessStage extends Stage {
  ctx: KeyedContext;
  out: Collector;
  constructor(public op: Op, t: Task, public next: Stage) {
    super();
    this.ctx = new KeyedContext(t, op);
    this.out = new Collector(next);
  }
  push(r: Record): void {
    if (!r.hasKey) {
      fail("process \"" + this.op.name + "\" got a record without a key: put keyBy before it");
      return;
    }
    this.ctx.cur.set(r.key.ptr, r.key.length);
    changetype<(ctx: KeyedContext, r: Record, out: Collector) => void>(this.op.processFn)(this.ctx, r, this.out);
  }
  endInput(): void {
    this.next.endInput();
  }
}

class SinkStage extends Stage {
  constructor(public ctx: Context, public fn: (ctx: Context, r: Record) => void) {
    super();
  }
  push(r: Record): void {
    this.fn(this.ctx, r);
  }
}

// ---- contexts -------------------------------------------------------------

/** Context gives an operator's functions access to the task they run in. */
export class Context {
  /** @internal */ t: Task;
  /** @internal */ op: Op;
  /** @internal */ buf: Buf = new Buf(0);
  private view: Bytes = new Bytes();

  constructor(t: Task, op: Op) {
    this.t = t;
    this.op = op;
  }

  /** The operator's name. */
  name(): string {
    return this.op.name;
  }
  /** The operator's vertex id in the job graph. */
  vertex(): i32 {
    return this.op.id;
  }
  /** Which of the operator's parallel subtasks this is, from 0. */
  subtask(): i32 {
    return this.t.info.subtask;
  }
  /** How many subtasks run the operator. */
  parallelism(): i32 {
    return this.t.info.parallelism;
  }
  /** The job's id. */
  jobId(): string {
    return this.t.info.jobId;
  }
  /** The job's arguments. */
  args(): string[] {
    return this.t.info.args;
  }
  /** The task's processing time in ms since the Unix epoch, as the host grants it. */
  now(): i64 {
    return host.now_ms();
  }
  /** Adds delta to the job-wide counter name. */
  count(name: string, delta: i64): void {
    count(name, delta);
  }
  /** Fails the task with msg (see fail). */
  fail(msg: string): void {
    fail(msg);
  }

  /** This subtask's operator state name, or null; valid until the next state call on this context. */
  operatorState(name: string): Bytes | null {
    const nm = this.t.nameBytes(name);
    const b = this.buf;
    for (;;) {
      const n = host.op_state_get(this.op.id, changetype<usize>(nm), nm.byteLength, b.ptr, b.cap);
      if (n == host.ABSENT) return null;
      if (<u32>n <= b.cap) return this.view.set(b.ptr, n);
      b.reserve(<u32>n);
    }
    return null;
  }

  /** Stores v as operator state name; it is part of every checkpoint from now on. */
  setOperatorState(name: string, v: Bytes): void {
    const nm = this.t.nameBytes(name);
    host.op_state_put(this.op.id, changetype<usize>(nm), nm.byteLength, v.ptr, v.length);
  }

  /** Removes operator state name. */
  deleteOperatorState(name: string): void {
    const nm = this.t.nameBytes(name);
    host.op_state_delete(this.op.id, changetype<usize>(nm), nm.byteLength);
  }
}

/**
 * KeyedContext is a Context inside a keyed operator, scoped to the key of
 * the record (or timer) being handled. State is kept by the host, per key.
 */
export class KeyedContext extends Context {
  /** @internal */ cur: Bytes = new Bytes();
  private sview: Bytes = new Bytes();
  private ibuf: Buf = new Buf(8);

  /** The current key; valid during the call only. */
  key(): Bytes {
    return this.cur;
  }

  /** The current key's state name, or null; valid until the next state call on this context. */
  get(name: string): Bytes | null {
    const nm = this.t.nameBytes(name);
    const b = this.buf;
    const k = this.cur;
    for (;;) {
      const n = host.state_get(this.op.id, changetype<usize>(nm), nm.byteLength, k.ptr, k.length, b.ptr, b.cap);
      if (n == host.ABSENT) return null;
      if (<u32>n <= b.cap) return this.sview.set(b.ptr, n);
      b.reserve(<u32>n);
    }
    return null;
  }

  /** Stores v as the current key's state name. */
  put(name: string, v: Bytes): void {
    const nm = this.t.nameBytes(name);
    host.state_put(this.op.id, changetype<usize>(nm), nm.byteLength, this.cur.ptr, this.cur.length, v.ptr, v.length);
  }

  /** Removes the current key's state name. */
  delete(name: string): void {
    const nm = this.t.nameBytes(name);
    host.state_delete(this.op.id, changetype<usize>(nm), nm.byteLength, this.cur.ptr, this.cur.length);
  }

  /**
   * The current key's state name as an i64 (its first 8 bytes,
   * little-endian); 0 when absent or shorter. It leaves the Bytes get
   * returned intact.
   */
  getI64(name: string): i64 {
    const nm = this.t.nameBytes(name);
    const b = this.ibuf;
    const k = this.cur;
    for (;;) {
      const n = host.state_get(this.op.id, changetype<usize>(nm), nm.byteLength, k.ptr, k.length, b.ptr, b.cap);
      if (n < 8) return 0;
      if (<u32>n <= b.cap) return load<i64>(b.ptr);
      b.reserve(<u32>n);
    }
    return 0;
  }

  /** Stores n as the current key's state name (8 bytes, little-endian). */
  putI64(name: string, n: i64): void {
    const b = this.ibuf;
    store<i64>(b.ptr, n);
    const nm = this.t.nameBytes(name);
    host.state_put(this.op.id, changetype<usize>(nm), nm.byteLength, this.cur.ptr, this.cur.length, b.ptr, 8);
  }

  /**
   * Asks for the operator's onTimer callback to run for the current key
   * once processing time reaches timeMs. The same time twice is one timer.
   */
  registerTimer(timeMs: i64): void {
    if (this.op.timerFn == null) {
      fail("registerTimer in \"" + this.op.name + "\": give the operator an onTimer callback first");
      return;
    }
    host.timer_register(this.op.id, this.cur.ptr, this.cur.length, timeMs);
  }

  /** Cancels a timer registered for the current key. */
  deleteTimer(timeMs: i64): void {
    host.timer_delete(this.op.id, this.cur.ptr, this.cur.length, timeMs);
  }
}

// ---- the task -------------------------------------------------------------

/** Task is the chain of operators one instance runs. */
export class Task {
  ops: Op[] = [];
  ctxs: Context[] = [];
  stages: Stage[] = [];
  out: Emitter = new Emitter();
  head: Stage = this.out;
  sourceFn: ((ctx: Context, max: i32, out: Collector) => bool) | null = null;
  sourceCtx: Context | null = null;
  sourceOut: Collector | null = null;
  rec: Record = new Record();
  names: Map<string, ArrayBuffer> = new Map<string, ArrayBuffer>();

  constructor(public info: TaskInfo) {}

  /**
   * The end of a call that may have pushed records: combiners pass their
   * accumulators on, in chain order (one may feed another), so nothing is
   * held between calls.
   */
  endCall(): void {
    for (let i = 0; i < this.stages.length && !failed(); i++) {
      const s = this.stages[i];
      if (s instanceof KeyByStage) changetype<KeyByStage>(s).flush();
    }
  }

  /** name's UTF-8 bytes, encoded once. */
  nameBytes(name: string): ArrayBuffer {
    if (this.names.has(name)) return this.names.get(name);
    const b = String.UTF8.encode(name);
    this.names.set(name, b);
    return b;
  }
}

// The task this instance runs: an instance runs one task.
let current: Task | null = null;

function newTask(info: TaskInfo): Task | null {
  const env = declare(info.args);
  if (env.err.length > 0) {
    fail("plan: " + env.err);
    return null;
  }
  const chain = info.chain;
  if (chain.length == 0) {
    fail("open: empty chain");
    return null;
  }
  const t = new Task(info);
  for (let i = 0; i < chain.length; i++) {
    const id = chain[i];
    if (id < 1 || id > env.ops.length) {
      fail("open: chain names vertex " + id.toString() + ", the job declares 1.." + env.ops.length.toString() + " (is the plan deterministic?)");
      return null;
    }
    const o = env.ops[id - 1];
    if (o.connector.length > 0) {
      fail("open: vertex " + id.toString() + " \"" + o.name + "\" is the host connector \"" + o.connector + "\", not guest code");
      return null;
    }
    if (o.kind == KIND_SOURCE && i != 0) {
      fail("open: source \"" + o.name + "\" inside a chain");
      return null;
    }
    if (o.kind == KIND_SINK && i != chain.length - 1) {
      fail("open: sink \"" + o.name + "\" is not the chain's tail");
      return null;
    }
    t.ops.push(o);
    t.ctxs.push(new Context(t, o));
  }
  const stages = new Array<Stage>(t.ops.length);
  let next: Stage = t.out;
  for (let i = t.ops.length - 1; i >= 0; i--) {
    const o = t.ops[i];
    const k = o.kind;
    let s: Stage;
    if (k == KIND_MAP) s = new MapStage(changetype<(r: Record) => Record>(o.mapFn), next);
    else if (k == KIND_FILTER) s = new FilterStage(changetype<(r: Record) => bool>(o.filterFn), next);
    else if (k == KIND_FLAT_MAP) s = new FlatMapStage(changetype<(r: Record, out: Collector) => void>(o.flatMapFn), next);
    else if (k == KIND_KEY_BY) s = new KeyByStage(changetype<(r: Record) => Bytes>(o.keyFn), next, o.combineFn);
    else if (k == KIND_REDUCE) {
      s = new ReduceStage(o, t, next);
      t.ctxs[i] = changetype<ReduceStage>(s).ctx;
    } else if (k == KIND_PROCESS) {
      s = new ProcessStage(o, t, next);
      t.ctxs[i] = changetype<ProcessStage>(s).ctx;
    } else if (k == KIND_SINK) s = new SinkStage(t.ctxs[i], changetype<(ctx: Context, r: Record) => void>(o.sinkFn));
    else if (k == KIND_SOURCE) {
      t.sourceFn = o.sourceFn;
      t.sourceCtx = t.ctxs[i];
      t.sourceOut = new Collector(next);
      s = next; // records never enter a source
    } else {
      fail("open: vertex " + o.id.toString() + " \"" + o.name + "\" has unknown kind \"" + k + "\"");
      return null;
    }
    stages[i] = s;
    next = s;
  }
  t.stages = stages;
  t.head = stages[0];
  return t;
}

// decodeRecord decodes the record at p (batch end at end) into r, checking
// every length; it returns the position after it, or 0 when malformed.
@inline function decodeRecord(p: usize, end: usize, r: Record): usize {
  if (end - p < 5) return 0;
  const flags = load<u8>(p);
  p += 1;
  if (flags & ~3) return 0;
  if (flags & 1) {
    const k = <usize>load<u32>(p);
    p += 4;
    if (end - p < k + 4) return 0;
    r.key.set(p, <i32>k);
    r.hasKey = true;
    p += k;
  } else {
    r.key.set(0, 0);
    r.hasKey = false;
  }
  if (flags & 2) {
    if (end - p < 12) return 0;
    r.time = load<i64>(p);
    r.hasTime = true;
    p += 8;
  } else {
    r.time = 0;
    r.hasTime = false;
  }
  const v = <usize>load<u32>(p);
  p += 4;
  if (end - p < v) return 0;
  r.value.set(p, <i32>v);
  return p + v;
}

// eachRecord decodes the batch at [ptr, ptr+len) and pushes each record to
// s, stopping at a failure. It returns "" or what is malformed.
function eachRecord(ptr: usize, len: usize, s: Stage, r: Record): string {
  if (len < 4) return "malformed batch: " + len.toString() + " bytes";
  const n = load<u32>(ptr);
  const end = ptr + len;
  let p = ptr + 4;
  for (let i: u32 = 0; i < n; i++) {
    p = decodeRecord(p, end, r);
    if (p == 0) return "malformed batch: record " + i.toString() + " overruns it or has unknown flags";
    s.push(r);
    if (failed()) return "";
  }
  if (p != end) return "malformed batch: " + (end - p).toString() + " trailing bytes";
  return "";
}

// ---- the exports' bodies --------------------------------------------------

// regions are what sluice_alloc handed out, so an export can check the
// host passes back a region it got.
const regions = new Map<usize, u32>();

export function doAlloc(size: u32): usize {
  const p = heap.alloc(size > 0 ? <usize>size : 1);
  regions.set(p, size);
  return p;
}

export function doFree(p: usize): void {
  if (!regions.has(p)) return;
  regions.delete(p);
  heap.free(p);
}

function inRegion(p: usize, n: u32): bool {
  return regions.has(p) && n <= regions.get(p);
}

// finish ends an export: the failure's reason goes to the host and the
// status is ERROR, or the output and counters go to the host and it is st.
function finish(st: i32): i32 {
  const cur = current;
  if (cur != null && failure.length == 0) cur.endCall();
  if (failure.length > 0) {
    const b = String.UTF8.encode(failure);
    host.fail(changetype<usize>(b), b.byteLength);
    return host.STATUS_ERROR;
  }
  const t = current;
  if (t != null) t.out.flush();
  flushCounters();
  return st;
}

export function doPlan(p: usize, n: u32): i32 {
  if (!inRegion(p, n)) {
    fail("plan: the host passed a range that is not a region from sluice_alloc");
    return finish(0);
  }
  if (n < 4) {
    fail("plan: arguments: malformed batch");
    return finish(0);
  }
  const cnt = load<u32>(p);
  const args = new Array<string>();
  const r = new Record();
  let q = p + 4;
  for (let i: u32 = 0; i < cnt; i++) {
    q = decodeRecord(q, p + n, r);
    if (q == 0) {
      fail("plan: arguments: malformed batch");
      return finish(0);
    }
    args.push(r.value.toString());
  }
  const env = declare(args);
  if (env.err.length > 0) {
    fail(env.err);
    return finish(0);
  }
  const g = String.UTF8.encode(env.graph());
  host.set_plan(changetype<usize>(g), g.byteLength);
  return finish(host.STATUS_OK);
}

export function doOpen(p: usize, n: u32): i32 {
  if (current != null) {
    fail("open: the instance already runs task \"" + changetype<Task>(current).info.task + "\"");
    return finish(0);
  }
  if (!inRegion(p, n)) {
    fail("open: the host passed a range that is not a region from sluice_alloc");
    return finish(0);
  }
  const err = [""];
  const info = parseTaskInfo(p, n, err);
  if (info == null) {
    fail("open: task info: " + err[0]);
    return finish(0);
  }
  const t = newTask(info);
  if (t == null) return finish(0);
  current = t;
  for (let i = 0; i < t.ops.length && !failed(); i++) {
    const h = t.ops[i].onOpen;
    if (h != null) h(t.ctxs[i]);
  }
  return finish(host.STATUS_OK);
}

export function doProcess(p: usize, n: u32): i32 {
  const t = current;
  if (t == null) {
    fail("process before open");
    return finish(0);
  }
  if (t.sourceFn != null) {
    fail("process: the chain's head \"" + t.ops[0].name + "\" is a source");
    return finish(0);
  }
  if (!inRegion(p, n)) {
    fail("process: the host passed a range that is not a region from sluice_alloc");
    return finish(0);
  }
  const err = eachRecord(p, n, t.head, t.rec);
  if (err.length > 0) fail("process: " + err);
  return finish(host.STATUS_OK);
}

export function doSourcePoll(max: i32): i32 {
  const t = current;
  if (t == null) {
    fail("source poll before open");
    return finish(0);
  }
  const fn = t.sourceFn;
  if (fn == null) {
    fail("source poll: the chain's head \"" + t.ops[0].name + "\" is not a source");
    return finish(0);
  }
  const done = fn(changetype<Context>(t.sourceCtx), max, changetype<Collector>(t.sourceOut));
  return finish(done ? host.STATUS_DONE : host.STATUS_OK);
}

export function doEndInput(): i32 {
  const t = current;
  if (t == null) {
    fail("end of input before open");
    return finish(0);
  }
  t.head.endInput();
  return finish(host.STATUS_OK);
}

export function doBarrier(checkpointId: i64): i32 {
  const t = current;
  if (t == null) {
    fail("barrier before open");
    return finish(0);
  }
  for (let i = 0; i < t.ops.length && !failed(); i++) {
    // Keyed state a stage holds in guest memory goes to the host first: the
    // host snapshots when this call returns.
    const s = t.stages[i];
    if (s instanceof ReduceStage) changetype<ReduceStage>(s).flush(false);
    const h = t.ops[i].onBarrier;
    if (h != null) h(t.ctxs[i], checkpointId);
  }
  return finish(host.STATUS_OK);
}

export function doTimers(p: usize, n: u32): i32 {
  const t = current;
  if (t == null) {
    fail("timers before open");
    return finish(0);
  }
  if (!inRegion(p, n) || n < 4) {
    fail("timers: malformed batch");
    return finish(0);
  }
  const cnt = load<u32>(p);
  const r = t.rec;
  let q = p + 4;
  for (let i: u32 = 0; i < cnt && !failed(); i++) {
    q = decodeRecord(q, p + n, r);
    if (q == 0 || r.value.length != 4) {
      fail("timers: malformed batch");
      break;
    }
    const id = <i32>load<u32>(r.value.ptr);
    let ps: ProcessStage | null = null;
    for (let j = 0; j < t.ops.length; j++) {
      const s = t.stages[j];
      if (t.ops[j].id == id && s instanceof ProcessStage) ps = changetype<ProcessStage>(s);
    }
    if (ps == null || ps.op.timerFn == null) {
      fail("timers: vertex " + id.toString() + " is not a process operator with onTimer in this task");
      break;
    }
    ps.ctx.cur.set(r.key.ptr, r.key.length);
    changetype<(ctx: KeyedContext, timeMs: i64, out: Collector) => void>(ps.op.timerFn)(ps.ctx, r.time, ps.out);
  }
  return finish(host.STATUS_OK);
}

export function doClose(): i32 {
  const t = current;
  if (t == null) return finish(host.STATUS_OK);
  for (let i = 0; i < t.ops.length && !failed(); i++) {
    const h = t.ops[i].onClose;
    if (h != null) h(t.ctxs[i]);
  }
  return finish(host.STATUS_OK);
}
