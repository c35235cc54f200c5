//! The word count of `examples/wordcount`, written with the Rust SDK: words
//! are maximal runs of ASCII letters, lower-cased, and the result is one
//! `word<TAB>count` record per distinct word. Pass the input with
//! `-- --input PATH` (repeatable; a glob pattern is fine). With `--combine`
//! the key_by is a per-call combiner ([`sluice::KeyedStream::combine`]): it
//! passes on one `{word, count}` per distinct word of each call, and the
//! count adds counts; the results are the same.
//!
//! The graph, with its vertex ids:
//!
//! ```text
//! 1 lines (text source) -> 2 tokenize (flat_map) -> 3 word (key_by)
//!   =hash=> 4 count (reduce, emit final) -> 5 format (map) -> 6 out (collect)
//! ```

use std::error::Error;
use std::io::Write;

use sluice::{Collector, Emit, Env, Record};

fn plan(env: &Env) -> Result<(), Box<dyn Error>> {
    let (inputs, combine) = parse_args(env.args())?;
    env.set_name("wordcount");
    let mut words = env.text_source("lines", &inputs).flat_map("tokenize", tokenizer()).key_by("word", |r, _| r.value);
    // With --combine the key_by counts each call's words itself and passes
    // on one {word, count} per distinct word; the count then adds counts.
    let reduce: fn(&mut Vec<u8>, Record<'_>) = if combine {
        words = words.combine(count);
        add_counts
    } else {
        count
    };
    words.reduce("count", reduce, Emit::Final).map("format", format).collect("out");
    Ok(())
}

sluice::job!(plan);

/// The arguments: `--input PATH` or `--input=PATH`, repeated, and
/// `--combine`; it returns the inputs and whether to combine.
fn parse_args(args: &[String]) -> Result<(Vec<String>, bool), String> {
    let mut inputs = Vec::new();
    let mut combine = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--combine" || a == "-combine" {
            combine = true;
        } else if a == "--input" || a == "-input" {
            match it.next() {
                Some(v) => inputs.push(v.clone()),
                None => return Err("--input needs a value: pass -- --input PATH".into()),
            }
        } else if let Some(v) = a.strip_prefix("--input=").or_else(|| a.strip_prefix("-input=")) {
            inputs.push(v.to_string());
        } else {
            return Err(format!("unknown argument {}: wordcount-rs takes --input PATH (repeatable) and --combine", a));
        }
    }
    if inputs.is_empty() {
        return Err("no input: pass -- --input PATH".into());
    }
    Ok((inputs, combine))
}

/// Maps each ASCII letter to its lower case and every other byte to 0: one
/// table lookup per byte tests and lower-cases at once.
const LETTERS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = b'a';
    while c <= b'z' {
        t[c as usize] = c;
        t[(c - b'a' + b'A') as usize] = c;
        c += 1;
    }
    t
};

/// Emits each maximal run of ASCII letters of a line, lower-cased. A word
/// already in lower case is emitted straight from the line; the others are
/// lower-cased into one scratch buffer, since records are copied as they
/// are emitted.
fn tokenizer() -> impl FnMut(Record<'_>, &mut Collector<'_>) {
    let mut lower = Vec::new();
    move |r, out| {
        let b = r.value;
        let mut i = 0;
        loop {
            while i < b.len() && LETTERS[b[i] as usize] == 0 {
                i += 1;
            }
            if i == b.len() {
                return;
            }
            let start = i;
            let mut upper = false;
            while i < b.len() {
                let l = LETTERS[b[i] as usize];
                if l == 0 {
                    break;
                }
                upper |= l != b[i];
                i += 1;
            }
            let w = &b[start..i];
            if upper {
                lower.clear();
                lower.extend(w.iter().map(|c| LETTERS[*c as usize]));
                out.emit_value(&lower);
            } else {
                out.emit_value(w);
            }
        }
    }
}

/// Adds one to the word's count.
fn count(acc: &mut Vec<u8>, _: Record<'_>) {
    sluice::put_i64(acc, sluice::as_i64(acc) + 1)
}

/// Adds a combined record's count (8 bytes, little-endian) to the word's.
fn add_counts(acc: &mut Vec<u8>, r: Record<'_>) {
    sluice::put_i64(acc, sluice::as_i64(acc) + sluice::as_i64(r.value))
}

/// Turns `{word, count}` into `word<TAB>count`.
fn format<'r>(r: Record<'r>, buf: &'r mut Vec<u8>) -> Record<'r> {
    buf.extend_from_slice(r.key_or_empty());
    // Writing to a Vec cannot fail.
    let _ = write!(buf, "\t{}", sluice::as_i64(r.value));
    Record::new(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_args(&s(&["--input", "a", "--input=b", "-input=c"])).unwrap(), (s(&["a", "b", "c"]), false));
        assert_eq!(parse_args(&s(&["--combine", "--input", "a"])).unwrap(), (s(&["a"]), true));
        assert!(parse_args(&[]).unwrap_err().contains("no input"));
        assert!(parse_args(&s(&["--input"])).unwrap_err().contains("--input needs a value"));
        assert!(parse_args(&s(&["--out"])).unwrap_err().contains("unknown argument --out"));
    }
}
