//! A job that uses every part of the SDK the word count does not: a guest
//! source keeping its position in operator state, filter, key_by with a
//! built key, a keyed process with keyed state and timers, counters, logs
//! and fail. sdk/rust/sdk_test.go drives it in wazero.
//!
//! `numbers` emits "0".."N-1" (N from `--n`); `drop5` drops multiples of 5;
//! `mod3` keys each by n % 3; `sum` adds n to the key's sum and asks for a
//! timer at now + 10 ms, which emits "key=sum"; `out` collects.

use std::error::Error;

use sluice::{Collector, Emit, Env, KeyedContext, Level, Record, SourceStatus};

fn plan(env: &Env) -> Result<(), Box<dyn Error>> {
    let mut n: u64 = 0;
    let mut fail_at: Option<u64> = None;
    let mut it = env.args().iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{} needs a value", a))?;
        match a.as_str() {
            "--n" => n = v.parse()?,
            "--fail-at" => fail_at = Some(v.parse()?),
            _ => return Err(format!("unknown argument {}", a).into()),
        }
    }
    let pos = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let (p1, p2, p3) = (pos.clone(), pos.clone(), pos);
    env.source("numbers", move |_ctx, max, out| {
        let mut buf = String::new();
        for _ in 0..max {
            let i = p1.get();
            if i == n {
                return SourceStatus::Done;
            }
            buf.clear();
            buf.push_str(&i.to_string());
            out.emit_value(buf.as_bytes());
            p1.set(i + 1);
        }
        SourceStatus::More
    })
    .on_open(move |ctx| {
        if let Some(b) = ctx.operator_state("pos") {
            p2.set(sluice::as_i64(b) as u64);
        }
        sluice::log(Level::Info, &format!("{} opened at {}", ctx.name(), p2.get()));
    })
    .on_barrier(move |ctx, _id| ctx.set_operator_state("pos", &sluice::i64_bytes(p3.get() as i64)))
    .filter("drop5", move |r| {
        let n = number(r);
        if Some(n) == fail_at {
            sluice::fail(format!("drop5: told to fail at {}", n));
        }
        if n % 5 == 0 {
            sluice::count("dropped", 1);
        }
        n % 5 != 0
    })
    .key_by("mod3", |r, buf| {
        buf.extend_from_slice(format!("k{}", number(&r) % 3).as_bytes());
        &buf[..]
    })
    .process("sum", sum)
    .on_timer(fire)
    .collect("out");
    // A second, unused branch, so the plan shows a reduce and a map too.
    env.source("unused", |_, _, _| SourceStatus::Done)
        .key_by("k", |r, _| r.value)
        .reduce("r", |_, _| {}, Emit::EveryUpdate)
        .map("m", |r, _| r)
        .sink("drop", |_, _| {});
    Ok(())
}

sluice::job!(plan);

fn number(r: &Record<'_>) -> u64 {
    std::str::from_utf8(r.value).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn sum(ctx: &mut KeyedContext, r: Record<'_>, _out: &mut Collector<'_>) {
    let s = ctx.get_i64("sum").unwrap_or(0) + number(&r) as i64;
    ctx.put_i64("sum", s);
    ctx.register_timer(ctx.now_ms() + 10);
}

fn fire(ctx: &mut KeyedContext, time: i64, out: &mut Collector<'_>) {
    let s = ctx.get_i64("sum").unwrap_or(0);
    let line = format!("{}={} at {}", String::from_utf8_lossy(ctx.key()), s, time);
    out.emit_value(line.as_bytes());
    ctx.delete("sum");
    sluice::count("timers", 1);
}
