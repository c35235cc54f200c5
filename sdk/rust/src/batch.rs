//! Records and the batch encoding of docs/ABI.md section 2.

use std::fmt;

/// One element of a stream: a value, and optionally a key and a time
/// (milliseconds since the Unix epoch).
///
/// A `Record` borrows its bytes. The one handed to your function points into
/// a buffer the SDK reuses, so it is valid during that call only; copy what
/// you keep. A record you emit or return is copied by the SDK before the call
/// returns, so it may borrow from anything that lives that long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record<'a> {
    /// The key, set by a `key_by` upstream and present on every record that
    /// reaches a keyed operator.
    pub key: Option<&'a [u8]>,
    /// The record's time, if it has one.
    pub time: Option<i64>,
    /// The value.
    pub value: &'a [u8],
}

impl<'a> Record<'a> {
    /// A record with `value` and no key or time.
    pub fn new(value: &'a [u8]) -> Self {
        Record { key: None, time: None, value }
    }

    /// This record with `key` as its key.
    pub fn with_key(self, key: &'a [u8]) -> Self {
        Record { key: Some(key), ..self }
    }

    /// This record with `time` as its time.
    pub fn with_time(self, time: i64) -> Self {
        Record { time: Some(time), ..self }
    }

    /// The key, or an empty slice when the record has none.
    pub fn key_or_empty(&self) -> &'a [u8] {
        self.key.unwrap_or(&[])
    }
}

/// A batch that does not follow the encoding of docs/ABI.md section 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedBatch(pub String);

impl fmt::Display for MalformedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed batch: {}", self.0)
    }
}

impl std::error::Error for MalformedBatch {}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Decodes `batch` and calls `f` with each record in order, checking every
/// length against the batch. `f` returns `false` to stop early.
///
/// # Errors
///
/// [`MalformedBatch`] when a length overruns the batch, a flag is unknown or
/// bytes follow the last record; the records before the fault were passed
/// to `f`.
pub fn for_each_record<'a>(
    batch: &'a [u8],
    mut f: impl FnMut(Record<'a>) -> bool,
) -> Result<(), MalformedBatch> {
    let bad = |what: String| Err(MalformedBatch(what));
    if batch.len() < 4 {
        return bad(format!("{} bytes", batch.len()));
    }
    let n = u32_at(batch, 0);
    let end = batch.len();
    let mut p = 4usize;
    for i in 0..n {
        if end - p < 5 {
            return bad(format!("record {} truncated", i));
        }
        let flags = batch[p];
        p += 1;
        if flags & !3 != 0 {
            return bad(format!("record {}: unknown flags {:#x}", i, flags));
        }
        let mut r = Record::default();
        if flags & 1 != 0 {
            let k = u32_at(batch, p) as usize;
            p += 4;
            if end - p < k || end - p - k < 4 {
                return bad(format!("record {}: key overruns the batch", i));
            }
            r.key = Some(&batch[p..p + k]);
            p += k;
        }
        if flags & 2 != 0 {
            if end - p < 12 {
                return bad(format!("record {}: time overruns the batch", i));
            }
            let mut t = [0u8; 8];
            t.copy_from_slice(&batch[p..p + 8]);
            r.time = Some(i64::from_le_bytes(t));
            p += 8;
        }
        let v = u32_at(batch, p) as usize;
        p += 4;
        if end - p < v {
            return bad(format!("record {}: value overruns the batch", i));
        }
        r.value = &batch[p..p + v];
        p += v;
        if !f(r) {
            return Ok(());
        }
    }
    if p != end {
        return bad(format!("{} trailing bytes", end - p));
    }
    Ok(())
}

/// Writes records in the batch encoding into a reusable buffer.
#[derive(Debug)]
pub(crate) struct BatchWriter {
    buf: Vec<u8>,
    count: u32,
}

impl BatchWriter {
    pub(crate) fn with_capacity(cap: usize) -> Self {
        let mut buf = Vec::with_capacity(cap.max(4));
        buf.extend_from_slice(&[0; 4]);
        BatchWriter { buf, count: 0 }
    }

    pub(crate) fn push(&mut self, r: &Record<'_>) {
        let b = &mut self.buf;
        let mut flags = 0u8;
        if r.key.is_some() {
            flags |= 1;
        }
        if r.time.is_some() {
            flags |= 2;
        }
        b.push(flags);
        if let Some(k) = r.key {
            b.extend_from_slice(&(k.len() as u32).to_le_bytes());
            b.extend_from_slice(k);
        }
        if let Some(t) = r.time {
            b.extend_from_slice(&t.to_le_bytes());
        }
        b.extend_from_slice(&(r.value.len() as u32).to_le_bytes());
        b.extend_from_slice(r.value);
        self.count += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// The finished batch; [`BatchWriter::clear`] starts the next one.
    pub(crate) fn finish(&mut self) -> &[u8] {
        let c = self.count.to_le_bytes();
        self.buf[..4].copy_from_slice(&c);
        &self.buf
    }

    pub(crate) fn clear(&mut self) {
        self.buf.truncate(4);
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = BatchWriter::with_capacity(0);
        let recs = [
            Record::new(b"v"),
            Record::new(b"").with_key(b"k"),
            Record::new(b"xyz").with_key(b"").with_time(-7),
        ];
        for r in &recs {
            w.push(r);
        }
        let b = w.finish().to_vec();
        let mut got = Vec::new();
        for_each_record(&b, |r| {
            got.push(r);
            true
        })
        .unwrap();
        assert_eq!(got, recs);
    }

    #[test]
    fn rejects_malformed() {
        for (b, want) in [
            (&[1u8, 0, 0][..], "3 bytes"),
            (&[1, 0, 0, 0, 0][..], "record 0 truncated"),
            (&[1, 0, 0, 0, 4, 0, 0, 0, 0][..], "unknown flags"),
            (&[1, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0][..], "key overruns"),
            (&[1, 0, 0, 0, 0, 2, 0, 0, 0, b'a'][..], "value overruns"),
            (&[0, 0, 0, 0, 0][..], "1 trailing bytes"),
        ] {
            let err = for_each_record(b, |_| true).unwrap_err();
            assert!(err.to_string().contains(want), "{:?}: {}", b, err);
        }
    }
}
