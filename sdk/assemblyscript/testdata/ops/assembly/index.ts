// A job that uses every operator of the SDK, for sdk_test.go. The graph:
//
//   1 numbers (guest source: the job's arguments, then "1".."N")
//     -> 2 tag (map) -> 3 drop (filter) -> 4 split (flat_map) -> 5 parity (key_by)
//   5 =hash=> 6 sum (reduce, every update) -> 7 out (collect)
//   5 =hash=> 8 timer (process, keyed state and timers) -> 9 sink (guest sink)

import { job, Env, Record, Collector, Accumulator, Bytes, Context, KeyedContext, count, log } from "sluice";
export * from "sluice/abi";

const N: i32 = 10;

// The source's position: how many records it has emitted, kept in
// operator state "pos" at every barrier.
let pos: i32 = 0;

function numbers(ctx: Context, max: i32, out: Collector): bool {
  const args = ctx.args();
  for (let i = 0; i < max; i++) {
    if (pos >= args.length + N) return true;
    const s = pos < args.length ? args[pos] : (pos - args.length + 1).toString();
    out.emitValue(Bytes.fromString(s));
    pos++;
  }
  return pos >= args.length + N;
}

function openNumbers(ctx: Context): void {
  const v = ctx.operatorState("pos");
  if (v != null) pos = <i32>v.toI64();
}

function barrierNumbers(ctx: Context, id: i64): void {
  ctx.setOperatorState("pos", Bytes.fromI64(pos));
  log.info("numbers: barrier " + id.toString() + " at " + pos.toString());
}

// number is the decimal number v holds, or 0 when it holds anything else.
function number(v: Bytes): i64 {
  let n: i64 = 0;
  for (let i = 0; i < v.length; i++) {
    const c = v.at(i);
    if (c < 0x30 || c > 0x39) return 0;
    n = n * 10 + <i64>(c - 0x30);
  }
  return n;
}

// tag stamps numbers with a time (the number itself) and aborts on "abort".
const tagged = new Record();
function tag(r: Record): Record {
  assert(!r.value.equalsString("abort"), "tag was asked to abort");
  tagged.assign(r);
  const n = number(r.value);
  if (n > 0) {
    tagged.hasTime = true;
    tagged.time = n;
  }
  return tagged;
}

// drop drops multiples of 5.
function drop(r: Record): bool {
  return !(r.hasTime && r.time % 5 == 0);
}

// split emits each record twice, the second time with "!" appended.
function split(r: Record, out: Collector): void {
  out.emit(r);
  out.emitValue(Bytes.fromString(r.value.toString() + "!"));
}

const EVEN = Bytes.fromString("even");
const ODD = Bytes.fromString("odd");
const OTHER = Bytes.fromString("other");

function parity(r: Record): Bytes {
  if (!r.hasTime) return OTHER;
  return r.time % 2 == 0 ? EVEN : ODD;
}

// sum adds the records' times (their numbers) per key.
function sum(acc: Accumulator, r: Record): void {
  acc.setI64(acc.getI64() + r.time);
}

// timer counts a key's records in keyed state, remembers the last value,
// and sets a timer at now+10 that emits "key=count:last" and clears them.
function timer(ctx: KeyedContext, r: Record, out: Collector): void {
  if (r.value.equalsString("fail")) {
    ctx.fail("timer: asked to fail on key " + ctx.key().toString());
    return;
  }
  ctx.putI64("n", ctx.getI64("n") + 1);
  ctx.put("last", r.value);
  ctx.registerTimer(ctx.now() + 10);
  count("timer.records", 1);
}

function fire(ctx: KeyedContext, t: i64, out: Collector): void {
  const last = ctx.get("last");
  const s = ctx.key().toString() + "=" + ctx.getI64("n").toString() + ":" + (last == null ? "-" : last.toString()) + "@" + t.toString();
  out.emitKeyValue(ctx.key(), Bytes.fromString(s));
  ctx.delete("n");
  ctx.delete("last");
}

function sink(ctx: Context, r: Record): void {
  log.info("sink: " + r.value.toString());
  count("sink.records", 1);
}

function plan(env: Env): void {
  env.setName("ops");
  const keyed = env.source("numbers", numbers)
    .onOpen(openNumbers)
    .onBarrier(barrierNumbers)
    .map("tag", tag)
    .filter("drop", drop)
    .flatMap("split", split)
    .keyBy("parity", parity);
  keyed.reduce("sum", sum).collect("out");
  keyed.process("timer", timer).onTimer(fire).sink("sink", sink);
}

job(plan);
