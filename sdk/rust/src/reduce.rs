//! The reduce operator: accumulators cached in guest memory between
//! barriers, written to keyed state in batches.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// A multiply-rotate hash over 8-byte words: std's SipHash resists hash
/// flooding, which a word count does not need, and costs several times more
/// per key in wasm.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, b: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let mut tail = 0u64;
        for (i, &x) in chunks.remainder().iter().enumerate() {
            tail |= (x as u64) << (8 * i);
        }
        self.0 = (h.rotate_left(5) ^ tail ^ b.len() as u64).wrapping_mul(K);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        // HashMap takes the top bits for its control bytes: mix them well.
        let h = self.0;
        (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 32)
    }
}

struct Entry {
    key: Box<[u8]>,
    acc: Vec<u8>,
    dirty: bool,
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
    index: HashMap<Box<[u8]>, u32, BuildHasherDefault<WordHasher>>,
    ents: Vec<Entry>,
    dirty: Vec<u32>,
    bytes: usize,
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
            index: HashMap::default(),
            ents: Vec::new(),
            dirty: Vec::new(),
            bytes: 0,
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
        let i = match self.index.get(key) {
            Some(&i) => i as usize,
            None => self.insert(key),
        };
        let e = &mut self.ents[i];
        let before = e.acc.capacity();
        (self.f)(&mut e.acc, r);
        self.bytes += e.acc.capacity().saturating_sub(before);
        if !e.dirty {
            e.dirty = true;
            self.dirty.push(i as u32);
        }
        if self.emit == Emit::EveryUpdate {
            let e = &self.ents[i];
            push(rest, Record::new(&e.acc).with_key(&e.key), out);
        }
        if self.ents.len() >= CACHE_ENTRIES || self.bytes >= CACHE_BYTES {
            self.flush(true);
        }
    }

    /// Adds `key` with the accumulator keyed state has for it, if any.
    fn insert(&mut self, key: &[u8]) -> usize {
        let mut acc = Vec::new();
        if self.may_hold() {
            let v = self.vertex;
            if let Some(n) = host::get_into(&mut self.get, |buf| host::state_get(v, STATE, key, buf)) {
                acc.extend_from_slice(&self.get[..n]);
            }
        }
        let i = self.ents.len();
        self.bytes += 2 * key.len() + acc.capacity() + 64;
        self.ents.push(Entry { key: key.into(), acc, dirty: false });
        self.index.insert(key.into(), i as u32);
        i
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
            let e = &mut self.ents[i as usize];
            e.dirty = false;
            self.batch.push(&Record::new(&e.acc).with_key(&e.key));
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
            self.index.clear();
            self.ents.clear();
            self.bytes = 0;
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
            let index = &self.index;
            let res = for_each_record(&self.scan[..n as usize], |r| {
                if !index.contains_key(r.key_or_empty()) {
                    push(rest, r, out);
                }
                true
            });
            if let Err(e) = res {
                crate::fail(format!("reduce: state scan: {}", e));
                return;
            }
        }
        for e in &self.ents {
            push(rest, Record::new(&e.acc).with_key(&e.key), out);
        }
    }
}
