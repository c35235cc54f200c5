// wordcount-as: the word count of examples/wordcount, written in
// AssemblyScript with the Sluice SDK (sdk/assemblyscript). Words are maximal
// runs of ASCII letters, lower-cased; the result is one "word<TAB>count"
// record per distinct word. Pass the input with `-- --input PATH`
// (repeatable; a glob pattern is fine). With --combine the keyBy is a
// per-call combiner (KeyedStream.combine in the SDK): it passes on one
// {word, count} per distinct word of each call, and the count adds counts;
// the results are the same.

import { job, Env, Record, Collector, Accumulator, Bytes, Emit } from "sluice";

// The module's exports are the SDK's: only an entry file's exports count.
export * from "sluice/abi";

function plan(env: Env): void {
  const args = env.args();
  const inputs = new Array<string>();
  let combine = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a == "--combine" || a == "-combine") {
      combine = true;
    } else if (a == "--input" || a == "-input") {
      if (i + 1 == args.length) {
        env.fail("--input needs a value: pass -- --input PATH");
        return;
      }
      inputs.push(args[++i]);
    } else if (a.startsWith("--input=") || a.startsWith("-input=")) {
      inputs.push(a.substring(a.indexOf("=") + 1));
    } else {
      env.fail("unknown argument " + a + ": wordcount-as takes --input PATH (repeatable) and --combine");
      return;
    }
  }
  if (inputs.length == 0) {
    env.fail("no input: pass -- --input PATH");
    return;
  }
  env.setName("wordcount");
  const words = env.textSource("lines", inputs)
    .flatMap("tokenize", tokenize)
    .keyBy("word", wordKey);
  // With --combine the keyBy counts each call's words itself and passes on
  // one {word, count} per distinct word; the count then adds counts.
  if (combine) words.combine(countWord);
  words.reduce("count", combine ? addCounts : countWord, Emit.Final)
    .map("format", format)
    .collect("out");
}

// LETTERS maps each ASCII letter to its lower case and every other byte to
// 0: one load per byte is the cheapest test.
const LETTERS = memory.data(256);
for (let c = 0x61; c <= 0x7a; c++) {
  store<u8>(LETTERS + c, <u8>c);
  store<u8>(LETTERS + c - 0x20, <u8>c);
}

// word is the view tokenize emits (the SDK copies what it is given), and
// lower its buffer for words that need lower-casing.
const word = new Bytes();
let lower = new Uint8Array(256);

// tokenize emits each maximal run of ASCII letters of a line, lower-cased.
// A word already in lower case is emitted straight from the line.
function tokenize(r: Record, out: Collector): void {
  const p = r.value.ptr;
  const n = r.value.length;
  let i = 0;
  for (;;) {
    while (i < n && load<u8>(LETTERS + load<u8>(p + i)) == 0) i++;
    if (i == n) return;
    const start = i;
    let upper: u32 = 0;
    while (i < n) {
      const c = load<u8>(p + i);
      const l = load<u8>(LETTERS + c);
      if (l == 0) break;
      upper |= l ^ c;
      i++;
    }
    const len = i - start;
    if (upper != 0) {
      if (len > lower.length) lower = new Uint8Array(len * 2);
      const d = lower.dataStart;
      for (let j = 0; j < len; j++) store<u8>(d + j, load<u8>(LETTERS + load<u8>(p + start + j)));
      word.set(d, len);
    } else {
      word.set(p + start, len);
    }
    out.emitValue(word);
  }
}

function wordKey(r: Record): Bytes {
  return r.value;
}

// countWord adds one to the word's count.
function countWord(acc: Accumulator, r: Record): void {
  acc.setI64(acc.getI64() + 1);
}

// addCounts adds a combined record's count (8 bytes, little-endian) to the
// word's.
function addCounts(acc: Accumulator, r: Record): void {
  acc.setI64(acc.getI64() + r.value.toI64());
}

// format turns {word, count} into "word<TAB>count", in a buffer it reuses.
const line = new Record();
let lineBuf = new Uint8Array(64);

function format(r: Record): Record {
  const k = r.key;
  let n = r.value.toI64();
  if (k.length + 21 > lineBuf.length) lineBuf = new Uint8Array((k.length + 21) * 2);
  const d = lineBuf.dataStart;
  memory.copy(d, k.ptr, k.length);
  store<u8>(d + k.length, 0x09);
  // The digits, written backwards from the end of the buffer's tail.
  const digits = d + k.length + 1;
  let len = 0;
  do {
    store<u8>(digits + 20 - len, <u8>(0x30 + n % 10));
    n /= 10;
    len++;
  } while (n > 0);
  memory.copy(digits, digits + 21 - len, len);
  line.value.set(d, k.length + 1 + len);
  return line;
}

// Last, after the globals the functions use: top-level code runs in order.
job(plan);
