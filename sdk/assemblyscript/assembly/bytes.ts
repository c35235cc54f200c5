// Bytes and the growable buffer the SDK builds batches in.

/**
 * Bytes is a view of `length` bytes of linear memory at `ptr`: a record's
 * key or value, a state value, a word inside a line. It copies nothing.
 *
 * A Bytes the SDK hands to your function (a record's key and value, a state
 * read) points into a buffer the SDK reuses: it is valid during that call
 * only. Copy what you keep with `copy()` or `toString()`. A Bytes you pass to
 * the SDK (emit, state, timers) is copied by the SDK before the call returns,
 * so you may reuse one Bytes object and its memory for every record.
 */
export class Bytes {
  /** Keeps the memory of a Bytes made from a string or an array alive. */
  private owner: ArrayBuffer | null = null;

  constructor(public ptr: usize = 0, public length: i32 = 0) {}

  /** Bytes of the UTF-8 encoding of s (a new buffer). */
  static fromString(s: string): Bytes {
    const buf = String.UTF8.encode(s);
    return Bytes.of(buf);
  }

  /** Bytes viewing all of buf, keeping it alive. */
  static of(buf: ArrayBuffer): Bytes {
    const b = new Bytes(changetype<usize>(buf), buf.byteLength);
    b.owner = buf;
    return b;
  }

  /** Bytes viewing the bytes of a, keeping its buffer alive. */
  static ofArray(a: Uint8Array): Bytes {
    const b = new Bytes(a.dataStart, a.length);
    b.owner = a.buffer;
    return b;
  }

  /** The little-endian 8-byte encoding of n (a new buffer). */
  static fromI64(n: i64): Bytes {
    const buf = new ArrayBuffer(8);
    store<i64>(changetype<usize>(buf), n);
    return Bytes.of(buf);
  }

  /** Points this view at [ptr, ptr+length) and returns it. */
  @inline set(ptr: usize, length: i32): Bytes {
    this.ptr = ptr;
    this.length = length;
    this.owner = null;
    return this;
  }

  /** The byte at i; i must be in [0, length) (asserted). */
  at(i: i32): u8 {
    assert(<u32>i < <u32>this.length, "Bytes.at: index out of range");
    return load<u8>(this.ptr + <usize>i);
  }

  /** The byte at i without a bounds check: for hot loops that checked i. */
  @inline atUnchecked(i: i32): u8 {
    return load<u8>(this.ptr + <usize>i);
  }

  /** A view of [start, end) of these bytes (both clamped to the length). */
  slice(start: i32, end: i32 = i32.MAX_VALUE): Bytes {
    const n = this.length;
    if (start < 0) start = 0;
    if (end > n) end = n;
    if (start > end) start = end;
    const b = new Bytes(this.ptr + <usize>start, end - start);
    b.owner = this.owner;
    return b;
  }

  /** A copy of the bytes that stays valid. */
  copy(): Bytes {
    const buf = new ArrayBuffer(this.length);
    memory.copy(changetype<usize>(buf), this.ptr, <usize>this.length);
    return Bytes.of(buf);
  }

  /** A copy of the bytes as a Uint8Array. */
  toUint8Array(): Uint8Array {
    const a = new Uint8Array(this.length);
    memory.copy(a.dataStart, this.ptr, <usize>this.length);
    return a;
  }

  /** The bytes decoded as UTF-8 (invalid sequences become U+FFFD). */
  toString(): string {
    return String.UTF8.decodeUnsafe(this.ptr, <usize>this.length);
  }

  /** Whether o holds the same bytes. */
  equals(o: Bytes): bool {
    return this.length == o.length && memory.compare(this.ptr, o.ptr, <usize>this.length) == 0;
  }

  /** Whether the bytes are the UTF-8 encoding of s. */
  equalsString(s: string): bool {
    const n = String.UTF8.byteLength(s);
    if (n != this.length) return false;
    const buf = String.UTF8.encode(s);
    return memory.compare(this.ptr, changetype<usize>(buf), <usize>n) == 0;
  }

  /** The first 8 bytes as a little-endian i64; 0 when shorter. */
  toI64(): i64 {
    return this.length < 8 ? 0 : load<i64>(this.ptr);
  }
}

/**
 * Buf is a growable buffer in memory the garbage collector does not manage
 * (heap.alloc), so that pointers into it stay valid until it grows.
 */
export class Buf {
  ptr: usize = 0;
  len: u32 = 0;
  cap: u32 = 0;

  constructor(initial: u32 = 0) {
    if (initial > 0) this.reserve(initial);
  }

  /** Makes room for n more bytes. */
  reserve(n: u32): void {
    const need = <u64>this.len + <u64>n;
    if (need <= <u64>this.cap) return;
    let c: u64 = this.cap > 0 ? <u64>this.cap : 256;
    while (c < need) c *= 2;
    assert(c <= <u64>u32.MAX_VALUE, "buffer larger than 4 GiB");
    this.ptr = this.ptr == 0 ? heap.alloc(<usize>c) : heap.realloc(this.ptr, <usize>c);
    this.cap = <u32>c;
  }

  /** Appends n bytes at p. */
  @inline add(p: usize, n: u32): void {
    this.reserve(n);
    memory.copy(this.ptr + this.len, p, n);
    this.len += n;
  }

  @inline addByte(b: u8): void {
    this.reserve(1);
    store<u8>(this.ptr + this.len, b);
    this.len += 1;
  }

  @inline addU32(v: u32): void {
    this.reserve(4);
    store<u32>(this.ptr + this.len, v);
    this.len += 4;
  }

  @inline addI64(v: i64): void {
    this.reserve(8);
    store<i64>(this.ptr + this.len, v);
    this.len += 8;
  }

  /** Appends the UTF-8 encoding of s. */
  addString(s: string): void {
    const n = <u32>String.UTF8.byteLength(s);
    this.reserve(n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.ptr + this.len);
    this.len += n;
  }

  @inline reset(): void {
    this.len = 0;
  }

  /** A view of the buffer's bytes, valid until it next grows. */
  bytes(): Bytes {
    return new Bytes(this.ptr, <i32>this.len);
  }
}
