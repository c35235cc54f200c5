// The accumulator cache of a reduce: key -> accumulator, with a dirty mark
// for what keyed state has not seen yet. An open-addressing hash table over
// memory the garbage collector does not manage: no object per key, nothing
// for the collector to scan, one probe for most lookups.

import { Buf, Bytes } from "./bytes";

// An entry is 7 u32s: hash, key offset, key length, accumulator offset,
// length and capacity (in the arena), flags.
const ENT: u32 = 28;
const F_PRESENT: u32 = 1;
const F_DIRTY: u32 = 2;
const MIN_SLOTS: u32 = 1 << 10;

// hash is FNV-1a with a final mix, so that the low bits the table uses
// depend on every byte.
@inline function hash(p: usize, n: u32): u32 {
  let h: u32 = 2166136261;
  for (let i: u32 = 0; i < n; i++) h = (h ^ load<u8>(p + i)) * 16777619;
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  return h;
}

export class AccTable {
  slots: usize = 0; // u32 each: 0 is empty, else an entry index plus 1
  nslots: u32 = 0;
  ents: Buf = new Buf(0);
  arena: Buf = new Buf(0);
  dirty: Buf = new Buf(0); // u32 entry indexes, in the order they became dirty
  count: i32 = 0;

  @inline private ent(i: i32): usize {
    return this.ents.ptr + <usize>(<u32>i * ENT);
  }

  /** The index of the key's entry, or -1. */
  find(kp: usize, kn: u32): i32 {
    if (this.nslots == 0) return -1;
    const h = hash(kp, kn);
    const mask = this.nslots - 1;
    const arena = this.arena.ptr;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const s = load<u32>(this.slots + (<usize>i << 2));
      if (s == 0) return -1;
      const e = this.ents.ptr + <usize>((s - 1) * ENT);
      if (load<u32>(e) == h && load<u32>(e, 8) == kn && memory.compare(arena + load<u32>(e, 4), kp, kn) == 0) return <i32>(s - 1);
    }
    return -1;
  }

  /** Adds the key, absent from the table, with no accumulator; returns its index. */
  insert(kp: usize, kn: u32): i32 {
    if ((<u32>this.count + 1) * 2 > this.nslots) this.grow();
    const h = hash(kp, kn);
    const koff = this.arena.len;
    this.arena.add(kp, kn);
    const idx = this.count;
    this.ents.reserve(ENT);
    const e = this.ents.ptr + this.ents.len;
    store<u32>(e, h);
    store<u32>(e, koff, 4);
    store<u32>(e, kn, 8);
    store<u32>(e, 0, 12);
    store<u32>(e, 0, 16);
    store<u32>(e, 0, 20);
    store<u32>(e, 0, 24);
    this.ents.len += ENT;
    this.count++;
    const mask = this.nslots - 1;
    let i = h & mask;
    while (load<u32>(this.slots + (<usize>i << 2)) != 0) i = (i + 1) & mask;
    store<u32>(this.slots + (<usize>i << 2), <u32>idx + 1);
    return idx;
  }

  private grow(): void {
    const ns = this.nslots == 0 ? MIN_SLOTS : 2 * this.nslots;
    const slots = heap.alloc(<usize>ns << 2);
    memory.fill(slots, 0, <usize>ns << 2);
    const mask = ns - 1;
    for (let j = 0; j < this.count; j++) {
      let i = load<u32>(this.ent(j)) & mask;
      while (load<u32>(slots + (<usize>i << 2)) != 0) i = (i + 1) & mask;
      store<u32>(slots + (<usize>i << 2), <u32>j + 1);
    }
    if (this.slots != 0) heap.free(this.slots);
    this.slots = slots;
    this.nslots = ns;
  }

  @inline present(i: i32): bool {
    return (load<u32>(this.ent(i), 24) & F_PRESENT) != 0;
  }
  @inline kptr(i: i32): usize {
    return this.arena.ptr + load<u32>(this.ent(i), 4);
  }
  @inline klen(i: i32): u32 {
    return load<u32>(this.ent(i), 8);
  }
  @inline aptr(i: i32): usize {
    return this.arena.ptr + load<u32>(this.ent(i), 12);
  }
  @inline alen(i: i32): u32 {
    return load<u32>(this.ent(i), 16);
  }

  /** Points view at entry i's key and returns it. */
  keyView(i: i32, view: Bytes): Bytes {
    return view.set(this.kptr(i), <i32>this.klen(i));
  }

  /** Points view at entry i's accumulator (empty when none) and returns it. */
  acc(i: i32, view: Bytes): Bytes {
    if (!this.present(i)) return view.set(0, 0);
    return view.set(this.aptr(i), <i32>this.alen(i));
  }

  accI64(i: i32): i64 {
    if (!this.present(i) || this.alen(i) < 8) return 0;
    return load<i64>(this.aptr(i));
  }

  setI64(i: i32, n: i64): void {
    const e = this.ent(i);
    if (load<u32>(e, 20) >= 8) {
      store<i64>(this.arena.ptr + load<u32>(e, 12), n);
      store<u32>(e, 8, 16);
      this.mark(i);
      return;
    }
    const tmp = memory.data(8);
    store<i64>(tmp, n);
    this.set(i, tmp, 8);
  }

  /** Stores [p, p+n) as entry i's accumulator; p may point into the arena. */
  set(i: i32, p: usize, n: u32): void {
    let e = this.ent(i);
    if (n <= load<u32>(e, 20)) {
      memory.copy(this.arena.ptr + load<u32>(e, 12), p, n);
    } else {
      // A new place at the end; the old one is garbage until the table is
      // reset. The arena may move as it grows, and p with it when it
      // points into the arena.
      const c = n > 8 ? n : 8;
      const old = this.arena.ptr, oldLen = this.arena.len;
      this.arena.reserve(c);
      if (p >= old && p < old + oldLen) p = this.arena.ptr + (p - old);
      const aoff = this.arena.len;
      memory.copy(this.arena.ptr + aoff, p, n);
      this.arena.len += c;
      e = this.ent(i);
      store<u32>(e, aoff, 12);
      store<u32>(e, c, 20);
    }
    store<u32>(e, n, 16);
    this.mark(i);
  }

  @inline private mark(i: i32): void {
    const e = this.ent(i);
    const f = load<u32>(e, 24);
    if ((f & F_DIRTY) == 0) this.dirty.addU32(<u32>i);
    store<u32>(e, f | F_PRESENT | F_DIRTY, 24);
  }

  /** Sets entry i's accumulator as read from keyed state: present, not dirty. */
  load(i: i32, p: usize, n: u32): void {
    this.set(i, p, n);
    const e = this.ent(i);
    store<u32>(e, load<u32>(e, 24) & ~F_DIRTY, 24);
    this.dirty.len -= 4;
  }

  @inline dirtyCount(): i32 {
    return <i32>(this.dirty.len >> 2);
  }
  @inline dirtyAt(j: i32): i32 {
    return <i32>load<u32>(this.dirty.ptr + (<usize>j << 2));
  }
  @inline clearDirty(i: i32): void {
    const e = this.ent(i);
    store<u32>(e, load<u32>(e, 24) & ~F_DIRTY, 24);
  }
  @inline resetDirty(): void {
    this.dirty.len = 0;
  }

  /** About how many bytes the table holds. */
  size(): u32 {
    return this.arena.len + 4 * this.nslots + this.ents.len + this.dirty.len;
  }

  /** Empties the table, keeping its memory. */
  reset(): void {
    if (this.slots != 0) memory.fill(this.slots, 0, <usize>this.nslots << 2);
    this.ents.len = 0;
    this.arena.len = 0;
    this.dirty.len = 0;
    this.count = 0;
  }
}
