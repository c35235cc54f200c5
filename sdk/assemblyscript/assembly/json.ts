// A JSON writer for the plan and a reader for the task info (docs/ABI.md,
// sections 3 and 8). The reader is a real one: it decodes every escape,
// including \uXXXX and surrogate pairs, and skips fields it does not know.

import { Buf } from "./bytes";

const HEX = "0123456789abcdef";

/** quote returns s as a JSON string literal. */
export function quote(s: string): string {
  let out = "\"";
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc = "";
    if (c == 0x22) esc = "\\\"";
    else if (c == 0x5c) esc = "\\\\";
    else if (c == 0x0a) esc = "\\n";
    else if (c == 0x0d) esc = "\\r";
    else if (c == 0x09) esc = "\\t";
    else if (c < 0x20) esc = "\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
    else continue;
    out += s.substring(start, i) + esc;
    start = i + 1;
  }
  return out + s.substring(start) + "\"";
}

/** quoteList returns a JSON array of strings. */
export function quoteList(list: string[]): string {
  let out = "[";
  for (let i = 0; i < list.length; i++) {
    if (i > 0) out += ",";
    out += quote(list[i]);
  }
  return out + "]";
}

/** TaskInfo is the task info sluice_open gets (internal/abi.TaskInfo). */
export class TaskInfo {
  jobId: string = "";
  task: string = "";
  chain: i32[] = [];
  subtask: i32 = 0;
  parallelism: i32 = 0;
  maxParallelism: i32 = 0;
  keyGroupStart: i32 = 0;
  keyGroupEnd: i32 = 0;
  args: string[] = [];
}

/** Reader parses JSON held in [ptr, ptr+len). Errors set err and stop. */
class Reader {
  pos: usize;
  end: usize;
  err: string = "";
  scratch: Buf = new Buf(64);

  constructor(ptr: usize, len: usize) {
    this.pos = ptr;
    this.end = ptr + len;
  }

  fail(msg: string): void {
    if (this.err.length == 0) this.err = msg;
    this.pos = this.end;
  }

  ws(): void {
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) return;
      this.pos++;
    }
  }

  peek(): i32 {
    this.ws();
    return this.pos < this.end ? <i32>load<u8>(this.pos) : -1;
  }

  expect(c: i32): void {
    if (this.peek() != c) {
      this.fail("expected '" + String.fromCharCode(c) + "'");
      return;
    }
    this.pos++;
  }

  hex4(): i32 {
    if (this.end - this.pos < 4) {
      this.fail("truncated \\u escape");
      return 0;
    }
    let v = 0;
    for (let i = 0; i < 4; i++) {
      const c = <i32>load<u8>(this.pos++);
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) {
        this.fail("bad \\u escape");
        return 0;
      }
      v = (v << 4) | d;
    }
    return v;
  }

  utf8(cp: i32): void {
    const b = this.scratch;
    if (cp < 0x80) b.addByte(<u8>cp);
    else if (cp < 0x800) {
      b.addByte(<u8>(0xc0 | (cp >> 6)));
      b.addByte(<u8>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      b.addByte(<u8>(0xe0 | (cp >> 12)));
      b.addByte(<u8>(0x80 | ((cp >> 6) & 0x3f)));
      b.addByte(<u8>(0x80 | (cp & 0x3f)));
    } else {
      b.addByte(<u8>(0xf0 | (cp >> 18)));
      b.addByte(<u8>(0x80 | ((cp >> 12) & 0x3f)));
      b.addByte(<u8>(0x80 | ((cp >> 6) & 0x3f)));
      b.addByte(<u8>(0x80 | (cp & 0x3f)));
    }
  }

  str(): string {
    this.expect(0x22);
    const b = this.scratch;
    b.reset();
    while (this.pos < this.end) {
      const c = load<u8>(this.pos++);
      if (c == 0x22) return String.UTF8.decodeUnsafe(b.ptr, b.len);
      if (c != 0x5c) {
        b.addByte(c);
        continue;
      }
      if (this.pos >= this.end) break;
      const e = load<u8>(this.pos++);
      if (e == 0x22 || e == 0x5c || e == 0x2f) b.addByte(e);
      else if (e == 0x62) b.addByte(0x08);
      else if (e == 0x66) b.addByte(0x0c);
      else if (e == 0x6e) b.addByte(0x0a);
      else if (e == 0x72) b.addByte(0x0d);
      else if (e == 0x74) b.addByte(0x09);
      else if (e == 0x75) {
        let cp = this.hex4();
        if (cp >= 0xd800 && cp < 0xdc00) {
          // A high surrogate: a low one must follow to make one code point.
          if (this.end - this.pos >= 6 && load<u8>(this.pos) == 0x5c && load<u8>(this.pos + 1) == 0x75) {
            this.pos += 2;
            const lo = this.hex4();
            cp = lo >= 0xdc00 && lo < 0xe000 ? 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00) : 0xfffd;
          } else cp = 0xfffd;
        } else if (cp >= 0xdc00 && cp < 0xe000) cp = 0xfffd;
        this.utf8(cp);
      } else {
        this.fail("bad escape in a string");
        return "";
      }
    }
    this.fail("unterminated string");
    return "";
  }

  num(): i64 {
    this.ws();
    let neg = false;
    if (this.pos < this.end && load<u8>(this.pos) == 0x2d) {
      neg = true;
      this.pos++;
    }
    let v: i64 = 0;
    let digits = 0;
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c < 0x30 || c > 0x39) break;
      v = v * 10 + <i64>(c - 0x30);
      this.pos++;
      digits++;
    }
    if (digits == 0) this.fail("expected a number");
    return neg ? -v : v;
  }

  /** skip skips one value of any type. */
  skip(): void {
    const c = this.peek();
    if (c == 0x22) {
      this.str();
    } else if (c == 0x7b || c == 0x5b) {
      const close = c == 0x7b ? 0x7d : 0x5d;
      this.pos++;
      if (this.peek() == close) {
        this.pos++;
        return;
      }
      while (this.err.length == 0) {
        if (c == 0x7b) {
          this.str();
          this.expect(0x3a);
        }
        this.skip();
        const n = this.peek();
        this.pos++;
        if (n == close) return;
        if (n != 0x2c) this.fail("expected ',' in a list or object");
      }
    } else {
      // A number, true, false or null.
      let any = false;
      while (this.pos < this.end) {
        const d = load<u8>(this.pos);
        if (d == 0x2c || d == 0x7d || d == 0x5d || d == 0x20 || d == 0x0a || d == 0x0d || d == 0x09) break;
        this.pos++;
        any = true;
      }
      if (!any) this.fail("expected a value");
    }
  }
}

/** parseTaskInfo reads the task info JSON; it returns null and sets err[0]. */
export function parseTaskInfo(ptr: usize, len: usize, err: string[]): TaskInfo | null {
  const r = new Reader(ptr, len);
  const info = new TaskInfo();
  r.expect(0x7b);
  if (r.peek() == 0x7d) r.pos++;
  else {
    while (r.err.length == 0) {
      const k = r.str();
      r.expect(0x3a);
      if (k == "job_id") info.jobId = r.str();
      else if (k == "task") info.task = r.str();
      else if (k == "subtask") info.subtask = <i32>r.num();
      else if (k == "parallelism") info.parallelism = <i32>r.num();
      else if (k == "max_parallelism") info.maxParallelism = <i32>r.num();
      else if (k == "key_group_start") info.keyGroupStart = <i32>r.num();
      else if (k == "key_group_end") info.keyGroupEnd = <i32>r.num();
      else if (k == "chain" || k == "args") {
        if (r.peek() == 0x6e) {
          r.skip(); // null
        } else {
          r.expect(0x5b);
          if (r.peek() == 0x5d) r.pos++;
          else {
            while (r.err.length == 0) {
              if (k == "chain") info.chain.push(<i32>r.num());
              else info.args.push(r.str());
              const n = r.peek();
              r.pos++;
              if (n == 0x5d) break;
              if (n != 0x2c) r.fail("expected ',' in a list");
            }
          }
        }
      } else r.skip();
      const n = r.peek();
      r.pos++;
      if (n == 0x7d) break;
      if (n != 0x2c) r.fail("expected ',' or '}' in the task info");
    }
  }
  heap.free(r.scratch.ptr);
  if (r.err.length > 0) {
    err[0] = r.err;
    return null;
  }
  return info;
}
