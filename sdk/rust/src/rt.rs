//! The bodies of the guest exports of docs/ABI.md section 3. The
//! [`crate::job!`] macro defines the exports and calls these; they are public
//! for it only.

use std::alloc::{alloc, dealloc, Layout};

use crate::batch::for_each_record;
use crate::json::{self, Value};
use crate::plan::Env;
use crate::task::{flush_counters, take_failure, Task, TaskInfo, TASK};
use crate::{host, SourceStatus};

/// A job's plan function, as given to [`crate::job!`].
pub type PlanFn = fn(&Env) -> Result<(), Box<dyn std::error::Error>>;

const OK: i32 = 0;
const ERROR: i32 = 1;
const DONE: i32 = 2;

/// Every region handed to the host starts with a header holding its size,
/// so `sluice_free` can give it back and exports can check lengths.
const HEADER: usize = 8;

/// `_initialize`: runs the static constructors, as wasi-libc's reactor
/// start file would (rustc 1.63 links none into a wasm32-wasi cdylib).
pub fn initialize() {
    #[cfg(target_arch = "wasm32")]
    {
        extern "C" {
            fn __wasm_call_ctors();
        }
        // Called once, by the host, before any other export.
        unsafe { __wasm_call_ctors() }
    }
}

/// `sluice_alloc`: a fresh region of `size` bytes.
pub fn sluice_alloc(size: u32) -> *mut u8 {
    let layout = match Layout::from_size_align(size as usize + HEADER, 8) {
        Ok(l) => l,
        Err(_) => return std::ptr::null_mut(),
    };
    // The layout is never zero-sized; a null result tells the host it failed.
    unsafe {
        let p = alloc(layout);
        if p.is_null() {
            return p;
        }
        (p as *mut u64).write(size as u64);
        p.add(HEADER)
    }
}

/// `sluice_free`: gives back a region from [`sluice_alloc`].
pub fn sluice_free(ptr: *mut u8) {
    if ptr.is_null() {
        return;
    }
    // The host passes back only pointers sluice_alloc returned.
    unsafe {
        let p = ptr.sub(HEADER);
        let size = (p as *const u64).read() as usize;
        dealloc(p, Layout::from_size_align_unchecked(size + HEADER, 8));
    }
}

/// The `n` bytes at `ptr`, a region from [`sluice_alloc`].
fn region<'a>(ptr: *const u8, n: u32) -> Result<&'a [u8], String> {
    if ptr.is_null() {
        return Err("the host passed a null region".into());
    }
    // ptr came from sluice_alloc (docs/ABI.md, memory ownership), so its
    // header is readable and says how long the region is.
    let size = unsafe { (ptr.sub(HEADER) as *const u64).read() };
    if n as u64 > size {
        return Err(format!("the host passed {} bytes in a region of {}", n, size));
    }
    Ok(unsafe { std::slice::from_raw_parts(ptr, n as usize) })
}

/// Runs an export's body: a failure (returned, or recorded with
/// [`crate::fail`]) goes to the host's `fail` and the status is ERROR; the
/// call's output and counters go to the host before it returns.
fn guard(emits: bool, body: impl FnOnce() -> Result<i32, String>) -> i32 {
    let res = body();
    if emits {
        TASK.with(|t| {
            if let Some(t) = t.borrow_mut().as_mut() {
                t.end_call();
                t.out.flush()
            }
        });
    }
    flush_counters();
    let err = match (res, take_failure()) {
        (_, Some(msg)) => msg,
        (Err(msg), None) => msg,
        (Ok(st), None) => return st,
    };
    host::fail(&err);
    ERROR
}

fn with_task<T>(what: &str, f: impl FnOnce(&mut Task) -> Result<T, String>) -> Result<T, String> {
    TASK.with(|t| match t.borrow_mut().as_mut() {
        Some(t) => f(t),
        None => Err(format!("{} before open", what)),
    })
}

fn declare(plan: PlanFn, args: Vec<String>) -> Result<crate::plan::Graph, String> {
    let env = Env::new(args);
    plan(&env).map_err(|e| format!("plan: {}", e))?;
    env.into_graph().map_err(|e| format!("plan: {}", e))
}

/// `sluice_plan`.
pub fn sluice_plan(ptr: *const u8, n: u32, plan: PlanFn) -> i32 {
    guard(false, || {
        let b = region(ptr, n)?;
        let mut args = Vec::new();
        for_each_record(b, |r| {
            args.push(String::from_utf8_lossy(r.value).into_owned());
            true
        })
        .map_err(|e| format!("plan: arguments: {}", e))?;
        let mut g = declare(plan, args)?;
        host::set_plan(&Env::graph_json(&mut g));
        Ok(OK)
    })
}

fn str_field(v: &Value, name: &str) -> Result<String, String> {
    match v.get(name) {
        Some(Value::Str(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Ok(String::new()),
        _ => Err(format!("open: task info: {:?} is not a string", name)),
    }
}

fn num_field(v: &Value, name: &str) -> Result<u32, String> {
    match v.get(name) {
        Some(Value::Number(n)) if *n >= 0.0 && *n <= u32::MAX as f64 => Ok(*n as u32),
        None | Some(Value::Null) => Ok(0),
        _ => Err(format!("open: task info: {:?} is not a count", name)),
    }
}

fn parse_info(b: &[u8]) -> Result<TaskInfo, String> {
    let s = std::str::from_utf8(b).map_err(|e| format!("open: task info: {}", e))?;
    let v = json::parse(s).map_err(|e| format!("open: task info: {}", e))?;
    let list = |name: &str| match v.get(name) {
        Some(Value::Array(a)) => Ok(a.as_slice()),
        None | Some(Value::Null) => Ok(&[][..]),
        _ => Err(format!("open: task info: {:?} is not a list", name)),
    };
    let mut chain = Vec::new();
    for x in list("chain")? {
        match x {
            Value::Number(n) if n.fract() == 0.0 && *n >= 1.0 && *n <= i32::MAX as f64 => chain.push(*n as i32),
            _ => return Err("open: task info: \"chain\" holds a non-id".into()),
        }
    }
    let mut args = Vec::new();
    for x in list("args")? {
        match x {
            Value::Str(s) => args.push(s.clone()),
            _ => return Err("open: task info: \"args\" holds a non-string".into()),
        }
    }
    Ok(TaskInfo {
        job_id: str_field(&v, "job_id")?,
        task: str_field(&v, "task")?,
        chain,
        subtask: num_field(&v, "subtask")?,
        parallelism: num_field(&v, "parallelism")?,
        max_parallelism: num_field(&v, "max_parallelism")?,
        key_group_start: num_field(&v, "key_group_start")?,
        key_group_end: num_field(&v, "key_group_end")?,
        args,
    })
}

/// `sluice_open`: runs the plan again with the job's arguments and builds
/// the chain the task info names, then runs the open hooks.
pub fn sluice_open(ptr: *const u8, n: u32, plan: PlanFn) -> i32 {
    guard(false, || {
        if let Some(name) = TASK.with(|t| t.borrow().as_ref().map(|t| t.info.task.clone())) {
            return Err(format!("open: the instance already runs task {:?}", name));
        }
        let info = parse_info(region(ptr, n)?)?;
        let g = declare(plan, info.args.clone())?;
        let mut task = Task::new(info, g.ops)?;
        task.open();
        TASK.with(|t| *t.borrow_mut() = Some(task));
        Ok(OK)
    })
}

/// `sluice_process`.
pub fn sluice_process(ptr: *const u8, n: u32) -> i32 {
    guard(true, || {
        let b = region(ptr, n)?;
        with_task("process", |t| t.process(b)).map(|_| OK)
    })
}

/// `sluice_source_poll`.
pub fn sluice_source_poll(max: i32) -> i32 {
    guard(true, || {
        with_task("source poll", |t| t.poll(max.max(0) as usize)).map(|s| match s {
            SourceStatus::More => OK,
            SourceStatus::Done => DONE,
        })
    })
}

/// `sluice_end_input`.
pub fn sluice_end_input() -> i32 {
    guard(true, || with_task("end of input", |t| Ok(t.end_input())).map(|_| OK))
}

/// `sluice_barrier`.
pub fn sluice_barrier(checkpoint_id: i64) -> i32 {
    guard(true, || with_task("barrier", |t| Ok(t.barrier(checkpoint_id))).map(|_| OK))
}

/// `sluice_timers`: one record per fired timer, value = the vertex id.
pub fn sluice_timers(ptr: *const u8, n: u32) -> i32 {
    guard(true, || {
        let b = region(ptr, n)?;
        with_task("timers", |t| {
            let mut err = None;
            for_each_record(b, |r| {
                let res = match <[u8; 4]>::try_from(r.value) {
                    Ok(v) => t.timer(u32::from_le_bytes(v) as i32, r.key_or_empty(), r.time.unwrap_or(0)),
                    Err(_) => Err("timers: a timer's value must be its 4-byte vertex id".into()),
                };
                if let Err(e) = res {
                    err = Some(e);
                }
                err.is_none() && !crate::task::failed()
            })
            .map_err(|e| format!("timers: {}", e))?;
            err.map_or(Ok(OK), Err)
        })
    })
}

/// `sluice_close`.
pub fn sluice_close() -> i32 {
    guard(false, || {
        TASK.with(|t| {
            if let Some(t) = t.borrow_mut().as_mut() {
                t.close()
            }
        });
        Ok(OK)
    })
}
