//! The reduce operator: accumulators cached in guest memory between
//! barriers, written to keyed state in batches.

use crate::batch::{for_each_record, BatchWriter, Record};
use crate::host;
use crate::plan::{Emit, ReduceFn};
use crate::task::{push, Emitter, Node};

// Bounds of the cache: beyond them it is written back and emptied. A batch
// of state_put_batch holds about putBatchBytes.
const CACHE_ENTRIES: usize = 256 << 10;
const CACHE_BYTES: usize = 16 << 20;
const PUT_BATCH_BYTES: usize = 1 << 20;
const SCAN_BYTES: usize = 64 << 10;

/// The keyed state name the reduce keeps its accumulators under.
const STATE: &str = "";

/// A multiply-rotate hash over 8-byte words, folded to 32 bits: the table
/// needs speed, not SipHash's resistance to hash flooding.
fn hash(b: &[u8]) -> u32 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = b.len() as u64;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let mut tail = 0u64;
    for (i, &x) in chunks.remainder().iter().enumerate() {
        tail |= (x as u64) << (8 * i);
    }
    h = (h.rotate_left(5) ^ tail).wrapping_mul(K);
    (h ^ (h >> 32)) as u32
}

#[derive(Clone, Copy)]
struct Entry {
    hash: u32,
    koff: u32,
    klen: u32,
    aoff: u32,
    alen: u32,
    acap: u32,
    dirty: bool,
}

/// The accumulator cache: key -> accumulator, open addressing over one
/// byte arena holding keys and accumulators back to back, as the C and Go
/// word counts do. A new key costs no allocation of its own, where a
/// `HashMap<Box<[u8]>, Vec<u8>>` costs three, and an allocation in wasm
/// costs about as much as the rest of a record's work.
#[derive(Default)]
struct Table {
    slots: Vec<u32>, // power-of-two length; 0 is empty, else an index into ents plus 1
    ents: Vec<Entry>,
    arena: Vec<u8>,
}

enum Find {
    Found(usize),
    Vacant { slot: usize, hash: u32 },
}

impl Table {
    fn find(&mut self, key: &[u8]) -> Find {
        if self.slots.is_empty() {
            self.slots = vec![0; 1024];
        }
        let h = hash(key);
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return Find::Vacant { slot: i, hash: h };
            }
            let e = &self.ents[s as usize - 1];
            if e.hash == h && e.klen as usize == key.len() && self.key(s as usize - 1) == key {
                return Find::Found(s as usize - 1);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, key: &[u8], slot: usize, hash: u32, acc: &[u8]) -> usize {
        let koff = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        let (aoff, acap) = self.place(acc);
        self.ents.push(Entry { hash, koff, klen: key.len() as u32, aoff, alen: acc.len() as u32, acap, dirty: false });
        self.slots[slot] = self.ents.len() as u32;
        if 2 * self.ents.len() > self.slots.len() {
            let mut slots = vec![0u32; 2 * self.slots.len()];
            let mask = slots.len() - 1;
            for (j, e) in self.ents.iter().enumerate() {
                let mut i = e.hash as usize & mask;
                while slots[i] != 0 {
                    i = (i + 1) & mask;
                }
                slots[i] = j as u32 + 1;
            }
            self.slots = slots;
        }
        self.ents.len() - 1
    }

    /// Appends v to the arena with room to grow to 8 bytes, an i64.
    fn place(&mut self, v: &[u8]) -> (u32, u32) {
        let off = self.arena.len();
        let cap = v.len().max(8);
        self.arena.extend_from_slice(v);
        self.arena.resize(off + cap, 0);
        (off as u32, cap as u32)
    }

    fn key(&self, i: usize) -> &[u8] {
        let e = &self.ents[i];
        &self.arena[e.koff as usize..(e.koff + e.klen) as usize]
    }

    fn acc(&self, i: usize) -> &[u8] {
        let e = &self.ents[i];
        &self.arena[e.aoff as usize..(e.aoff + e.alen) as usize]
    }

    /// Sets entry i's accumulator, in place when it fits; otherwise at the
    /// arena's end (the old bytes are garbage until the table is cleared).
    fn set(&mut self, i: usize, v: &[u8]) {
        let e = self.ents[i];
        if v.len() <= e.acap as usize {
            self.arena[e.aoff as usize..e.aoff as usize + v.len()].copy_from_slice(v);
        } else {
            let (aoff, acap) = self.place(v);
            self.ents[i].aoff = aoff;
            self.ents[i].acap = acap;
        }
        self.ents[i].alen = v.len() as u32;
    }

    fn len(&self) -> usize {
        self.ents.len()
    }

    fn size(&self) -> usize {
        self.arena.len() + 4 * self.slots.len() + std::mem::size_of::<Entry>() * self.ents.len()
    }

    fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = 0);
        self.ents.clear();
        self.arena.clear();
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Known {
    /// Not looked at yet.
    Unknown,
    /// Keyed state held nothing when looked at, and every accumulator
    /// written since is in the cache.
    Empty,
    /// Keyed state may hold keys the cache does not.
    MayHold,
}

pub(crate) struct Reduce {
    vertex: i32,
    f: ReduceFn,
    emit: Emit,
    table: Table,
    acc: Vec<u8>,
    dirty: Vec<u32>,
    known: Known,
    scan: Vec<u8>,
    get: Vec<u8>,
    batch: BatchWriter,
}

impl Reduce {
    pub(crate) fn new(vertex: i32, f: ReduceFn, emit: Emit) -> Self {
        Reduce {
            vertex,
            f,
            emit,
            table: Table::default(),
            acc: Vec::new(),
            dirty: Vec::new(),
            known: Known::Unknown,
            scan: Vec::new(),
            get: Vec::new(),
            batch: BatchWriter::with_capacity(0),
        }
    }

    pub(crate) fn push(&mut self, r: Record<'_>, rest: &mut [Node], out: &mut Emitter) {
        let key = match r.key {
            Some(k) => k,
            None => {
                crate::fail("reduce got a record without a key: put key_by before it");
                return;
            }
        };
        let i = match self.table.find(key) {
            Find::Found(i) => i,
            Find::Vacant { slot, hash } => {
                let mut restored = 0;
                if self.may_hold() {
                    let v = self.vertex;
                    restored = host::get_into(&mut self.get, |buf| host::state_get(v, STATE, key, buf)).unwrap_or(0);
                }
                // may_hold's scan does not move entries, so the slot holds.
                self.table.insert(key, slot, hash, &self.get[..restored])
            }
        };
        // The function works on a Vec; the table keeps the bytes.
        self.acc.clear();
        self.acc.extend_from_slice(self.table.acc(i));
        (self.f)(&mut self.acc, r);
        self.table.set(i, &self.acc);
        let e = &mut self.table.ents[i];
        if !e.dirty {
            e.dirty = true;
            self.dirty.push(i as u32);
        }
        if self.emit == Emit::EveryUpdate {
            push(rest, Record::new(self.table.acc(i)).with_key(self.table.key(i)), out);
        }
        if self.table.len() >= CACHE_ENTRIES || self.table.size() >= CACHE_BYTES {
            self.flush(true);
        }
    }

    /// Whether keyed state may hold an accumulator the cache does not have.
    /// It starts empty unless restored, and only this operator writes it:
    /// while it was found empty and the cache was never emptied, every
    /// accumulator is in the cache and a new key needs no state_get (most of
    /// a word count's keys are new). One scan tells empty from not.
    fn may_hold(&mut self) -> bool {
        if self.known == Known::Unknown {
            self.known = Known::Empty;
            self.scan.resize(SCAN_BYTES, 0);
            loop {
                let n = host::state_scan(self.vertex, STATE, &mut self.scan);
                if n == 0 {
                    break;
                }
                self.known = Known::MayHold;
                if n < 0 {
                    // Finish the scan all the same, so the next one starts over.
                    self.scan.resize(n.unsigned_abs() as usize, 0);
                }
            }
        }
        self.known == Known::MayHold
    }

    /// Writes the accumulators changed since the last flush to keyed state;
    /// with `evict`, empties the cache too.
    pub(crate) fn flush(&mut self, evict: bool) {
        for &i in &self.dirty {
            let i = i as usize;
            self.table.ents[i].dirty = false;
            self.batch.push(&Record::new(self.table.acc(i)).with_key(self.table.key(i)));
            if self.batch.len() >= PUT_BATCH_BYTES {
                host::state_put_batch(self.vertex, STATE, self.batch.finish());
                self.batch.clear();
            }
        }
        if self.batch.count() > 0 {
            host::state_put_batch(self.vertex, STATE, self.batch.finish());
            self.batch.clear();
        }
        self.dirty.clear();
        if evict {
            self.table.clear();
            self.known = Known::MayHold;
        }
    }

    /// At the end of input, a final reduce emits every key once: the cache
    /// has the newest accumulator of each key it holds, and a scan of keyed
    /// state finds the others (restored, or written back at an eviction).
    pub(crate) fn end_input(&mut self, rest: &mut [Node], out: &mut Emitter) {
        if self.emit != Emit::Final {
            return;
        }
        self.scan.resize(SCAN_BYTES.max(self.scan.len()), 0);
        loop {
            let n = host::state_scan(self.vertex, STATE, &mut self.scan);
            if n == 0 {
                break;
            }
            if n < 0 {
                self.scan.resize(n.unsigned_abs() as usize, 0);
                continue;
            }
            let table = &mut self.table;
            let res = for_each_record(&self.scan[..n as usize], |r| {
                if let Find::Vacant { .. } = table.find(r.key_or_empty()) {
                    push(rest, r, out);
                }
                true
            });
            if let Err(e) = res {
                crate::fail(format!("reduce: state scan: {}", e));
                return;
            }
        }
        for i in 0..self.table.len() {
            push(rest, Record::new(self.table.acc(i)).with_key(self.table.key(i)), out);
        }
    }
}
