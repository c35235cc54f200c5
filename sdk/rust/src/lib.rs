//! Write [Sluice](../../README.md) jobs in Rust.
//!
//! A job is a `cdylib` crate built for `wasm32-wasi`. It declares its
//! dataflow in a plan function (sources, `map`, `flat_map`, `filter`,
//! `key_by` + `reduce` or keyed `process` with timers, sinks) and names it
//! with [`job!`], which defines the module's exports; the SDK implements the
//! guest side of the ABI (`docs/ABI.md`, `sluice_abi_v1`):
//!
//! ```
//! use sluice::{Collector, Emit, Env, Record};
//!
//! fn plan(env: &Env) -> Result<(), Box<dyn std::error::Error>> {
//!     env.text_source("lines", env.args())
//!         .flat_map("words", |r: Record<'_>, out: &mut Collector<'_>| {
//!             for w in r.value.split(|c| *c == b' ').filter(|w| !w.is_empty()) {
//!                 out.emit_value(w);
//!             }
//!         })
//!         .key_by("word", |r, _| r.value)
//!         .reduce("count", |acc, _| sluice::put_i64(acc, sluice::as_i64(acc) + 1), Emit::Final)
//!         .map("format", |r, buf| {
//!             buf.extend_from_slice(r.key_or_empty());
//!             buf.extend_from_slice(format!("\t{}", sluice::as_i64(r.value)).as_bytes());
//!             Record::new(buf)
//!         })
//!         .collect("out");
//!     Ok(())
//! }
//!
//! sluice::job!(plan);
//! # fn main() {}
//! ```
//!
//! The plan function runs once to declare the job graph (`sluice plan`, and
//! the JobManager when the job is submitted) and again in every task, where
//! the SDK maps the task's operators to the functions given here and runs a
//! whole chain of operators inside one call per input batch, emitting once
//! per call.
//!
//! Keyed state, operator state and timers live on the host, so checkpoints,
//! recovery and rescaling work without the guest's help; operators reach
//! them through [`KeyedContext`] and [`Context`]. A [`Record`] handed to a
//! function borrows an SDK buffer and is valid during the call only.
//!
//! # Failing
//!
//! A plan function fails by returning an error: it is what the user sees.
//! An operator fails the task with [`fail`] and returns; the SDK stops the
//! call and returns ERROR with the message. A panic traps the instance (Rust
//! on wasm32 cannot unwind): the host reports the trap with the panic
//! message, which the standard panic hook writes to stderr.
//!
//! Build with `sluice run DIR` or `sluice plan DIR`, which call Debian's
//! `/usr/bin/cargo build --offline --release --target wasm32-wasi`; see
//! `docs/rust.md`.

#![warn(missing_docs)]

mod batch;
mod host;
mod json;
mod plan;
mod reduce;
#[doc(hidden)]
pub mod rt;
mod task;

pub use batch::{for_each_record, MalformedBatch, Record};
pub use plan::{
    BarrierFn, Emit, Env, FilterFn, FlatMapFn, HookFn, KeyFn, KeyedStream, MapFn, Partitioner, ProcessFn, ReduceFn,
    SinkFn, SourceFn, SourceStatus, Stream, TimerFn,
};
pub use task::{Collector, Context, KeyedContext};

/// Defines the module's exports (docs/ABI.md section 3) for the job whose
/// plan function is `$plan`, a `fn(&Env) -> Result<(), Box<dyn Error>>`.
/// Use it once, in the crate root of a `cdylib`:
///
/// ```ignore
/// sluice::job!(plan);
/// ```
#[macro_export]
macro_rules! job {
    ($plan:path) => {
        #[no_mangle]
        pub extern "C" fn sluice_abi_v1() {}
        #[no_mangle]
        pub extern "C" fn _initialize() {
            $crate::rt::initialize()
        }
        #[no_mangle]
        pub extern "C" fn sluice_alloc(size: u32) -> *mut u8 {
            $crate::rt::sluice_alloc(size)
        }
        #[no_mangle]
        pub extern "C" fn sluice_free(ptr: *mut u8) {
            $crate::rt::sluice_free(ptr)
        }
        #[no_mangle]
        pub extern "C" fn sluice_plan(ptr: *const u8, n: u32) -> i32 {
            $crate::rt::sluice_plan(ptr, n, $plan)
        }
        #[no_mangle]
        pub extern "C" fn sluice_open(ptr: *const u8, n: u32) -> i32 {
            $crate::rt::sluice_open(ptr, n, $plan)
        }
        #[no_mangle]
        pub extern "C" fn sluice_process(ptr: *const u8, n: u32) -> i32 {
            $crate::rt::sluice_process(ptr, n)
        }
        #[no_mangle]
        pub extern "C" fn sluice_source_poll(max: i32) -> i32 {
            $crate::rt::sluice_source_poll(max)
        }
        #[no_mangle]
        pub extern "C" fn sluice_end_input() -> i32 {
            $crate::rt::sluice_end_input()
        }
        #[no_mangle]
        pub extern "C" fn sluice_barrier(checkpoint_id: i64) -> i32 {
            $crate::rt::sluice_barrier(checkpoint_id)
        }
        #[no_mangle]
        pub extern "C" fn sluice_timers(ptr: *const u8, n: u32) -> i32 {
            $crate::rt::sluice_timers(ptr, n)
        }
        #[no_mangle]
        pub extern "C" fn sluice_close() -> i32 {
            $crate::rt::sluice_close()
        }
    };
}

/// Fails the current call with `msg` as the reason: the SDK stops feeding
/// records, and the export returns ERROR with the message, which the host
/// reports with the task's failure. The first reason of a call wins. Return
/// from your function after calling it.
pub fn fail(msg: impl Into<String>) {
    task::set_failure(msg.into())
}

/// Adds `delta` to the job-wide counter `name` (an accumulator, in Flink's
/// terms). Counters are buffered and handed to the host once per call; a task
/// may use at most 1024 names.
pub fn count(name: &str, delta: i64) {
    task::add_count(name, delta)
}

/// A log level, as `log/slog` numbers them on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// −4.
    Debug = -4,
    /// 0.
    Info = 0,
    /// 4.
    Warn = 4,
    /// 8.
    Error = 8,
}

/// Writes one line to the task's log at `level`, with the host's job and
/// task attributes. Each line costs its length plus 266 bytes of the task's
/// log budget (1 MiB by default): log little. Output written to stdout and
/// stderr reaches the task log too.
pub fn log(level: Level, msg: &str) {
    host::log(level as i32, msg)
}

/// `n` as 8 little-endian bytes, the encoding [`as_i64`] reads.
pub fn i64_bytes(n: i64) -> [u8; 8] {
    n.to_le_bytes()
}

/// Decodes 8 little-endian bytes; a shorter slice (an empty accumulator) is 0.
pub fn as_i64(b: &[u8]) -> i64 {
    match <[u8; 8]>::try_from(b.get(..8).unwrap_or(&[])) {
        Ok(a) => i64::from_le_bytes(a),
        Err(_) => 0,
    }
}

/// Sets `buf` to the 8 little-endian bytes of `n`, reusing its memory.
pub fn put_i64(buf: &mut Vec<u8>, n: i64) {
    buf.clear();
    buf.extend_from_slice(&n.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int64_helpers() {
        let mut b = Vec::new();
        assert_eq!(as_i64(&b), 0);
        put_i64(&mut b, -42);
        assert_eq!(as_i64(&b), -42);
        assert_eq!(b, i64_bytes(-42));
    }

    fn sample(env: &Env) -> Result<(), Box<dyn std::error::Error>> {
        let lines = env.text_source("lines", &["a \"b\".txt", "logs/*"]);
        lines
            .flat_map("tok", |_r, _out| {})
            .key_by("k", |r, _| r.value)
            .reduce("n", |_a, _r| {}, Emit::Final)
            .set_parallelism(3)
            .collect("out");
        lines.filter("f", |_| true).rebalance().write_files("files", "out/x");
        Ok(())
    }

    #[test]
    fn plan_json() {
        let env = Env::new(vec![]);
        sample(&env).unwrap();
        let mut g = env.into_graph().unwrap();
        let j = Env::graph_json(&mut g);
        assert_eq!(
            j,
            concat!(
                r#"{"name":"lines","vertices":["#,
                r#"{"id":1,"name":"lines","kind":"source","connector":"text","config":{"paths":"[\"a \\\"b\\\".txt\",\"logs/*\"]"}},"#,
                r#"{"id":2,"name":"tok","kind":"flat_map"},"#,
                r#"{"id":3,"name":"k","kind":"key_by"},"#,
                r#"{"id":4,"name":"n","kind":"reduce","parallelism":3,"config":{"emit":"final"}},"#,
                r#"{"id":5,"name":"out","kind":"sink","connector":"collect"},"#,
                r#"{"id":6,"name":"f","kind":"filter"},"#,
                r#"{"id":7,"name":"files","kind":"sink","connector":"file","config":{"path":"out/x"}}],"#,
                r#""edges":[{"source":1,"target":2,"partitioner":"forward"},"#,
                r#"{"source":2,"target":3,"partitioner":"forward"},"#,
                r#"{"source":3,"target":4,"partitioner":"hash"},"#,
                r#"{"source":4,"target":5,"partitioner":"rebalance"},"#,
                r#"{"source":1,"target":6,"partitioner":"forward"},"#,
                r#"{"source":6,"target":7,"partitioner":"rebalance"}]}"#
            )
        );
    }

    /// A combiner lives inside the key_by's task: the host sees the same graph.
    #[test]
    fn combine_keeps_the_graph() {
        let json = |combine: bool| {
            let env = Env::new(vec![]);
            let mut k = env.text_source("lines", &["in"]).key_by("k", |r, _| r.value);
            if combine {
                k = k.combine(|acc, _| put_i64(acc, as_i64(acc) + 1));
            }
            k.reduce("n", |_a, _r| {}, Emit::Final).collect("out");
            Env::graph_json(&mut env.into_graph().unwrap())
        };
        assert_eq!(json(true), json(false));
    }

    #[test]
    fn plan_errors() {
        for (f, want) in [
            ((|env: &Env| {
                env.text_source::<&str>("", &[]).collect("out");
            }) as fn(&Env), "source operator 1 has no name"),
            (|env: &Env| {
                env.text_source::<&str>("in", &[]).collect("out").collect("again");
            }, "sink \"again\" reads sink \"out\": a sink has no output"),
            (|env: &Env| {
                env.text_source::<&str>("in", &[]).map("m", |r, _| r).on_timer(|_, _, _| {});
            }, "on_timer on \"m\": only process operators have timers"),
            (|env: &Env| {
                env.text_source::<&str>("in", &[]).set_parallelism(0);
            }, "set_parallelism(0) on \"in\": must be at least 1"),
            (|_: &Env| {}, "the job declares no operators"),
        ] {
            let env = Env::new(vec![]);
            f(&env);
            let err = env.into_graph().err().expect("the plan should fail");
            assert!(err.contains(want), "{} does not contain {}", err, want);
        }
    }
}
