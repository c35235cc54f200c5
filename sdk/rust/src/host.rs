//! The host imports of docs/ABI.md section 4, behind safe wrappers. Outside
//! wasm32 (the crate's own unit tests) they panic: there is no host.

/// What the "get" imports return when the value is absent.
pub(crate) const ABSENT: i32 = -1;

#[cfg(target_arch = "wasm32")]
mod imp {
    #[link(wasm_import_module = "sluice")]
    extern "C" {
        pub fn emit(p: *const u8, n: u32);
        pub fn set_plan(p: *const u8, n: u32);
        pub fn fail(p: *const u8, n: u32);
        pub fn log(level: i32, p: *const u8, n: u32);
        pub fn counter_add(p: *const u8, n: u32, delta: i64);
        pub fn now_ms() -> i64;
        pub fn state_get(v: i32, np: *const u8, nn: u32, kp: *const u8, kn: u32, bp: *mut u8, bc: u32) -> i32;
        pub fn state_put(v: i32, np: *const u8, nn: u32, kp: *const u8, kn: u32, vp: *const u8, vn: u32);
        pub fn state_put_batch(v: i32, np: *const u8, nn: u32, bp: *const u8, bn: u32);
        pub fn state_delete(v: i32, np: *const u8, nn: u32, kp: *const u8, kn: u32);
        pub fn state_scan(v: i32, np: *const u8, nn: u32, bp: *mut u8, bc: u32) -> i32;
        pub fn op_state_get(v: i32, np: *const u8, nn: u32, bp: *mut u8, bc: u32) -> i32;
        pub fn op_state_put(v: i32, np: *const u8, nn: u32, vp: *const u8, vn: u32);
        pub fn op_state_delete(v: i32, np: *const u8, nn: u32);
        pub fn timer_register(v: i32, kp: *const u8, kn: u32, t: i64);
        pub fn timer_delete(v: i32, kp: *const u8, kn: u32, t: i64);
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::missing_safety_doc)]
mod imp {
    macro_rules! absent {
        ($($name:ident($($a:ident: $t:ty),*) $(-> $r:ty)?;)*) => {$(
            pub unsafe fn $name($(_: $t),*) $(-> $r)? {
                panic!(concat!("sluice.", stringify!($name), ": host functions exist only in a wasm32 guest"))
            }
        )*};
    }
    absent! {
        emit(p: *const u8, n: u32);
        set_plan(p: *const u8, n: u32);
        fail(p: *const u8, n: u32);
        log(level: i32, p: *const u8, n: u32);
        counter_add(p: *const u8, n: u32, delta: i64);
        now_ms() -> i64;
        state_get(v: i32, np: *const u8, nn: u32, kp: *const u8, kn: u32, bp: *mut u8, bc: u32) -> i32;
        state_put(v: i32, np: *const u8, nn: u32, kp: *const u8, kn: u32, vp: *const u8, vn: u32);
        state_put_batch(v: i32, np: *const u8, nn: u32, bp: *const u8, bn: u32);
        state_delete(v: i32, np: *const u8, nn: u32, kp: *const u8, kn: u32);
        state_scan(v: i32, np: *const u8, nn: u32, bp: *mut u8, bc: u32) -> i32;
        op_state_get(v: i32, np: *const u8, nn: u32, bp: *mut u8, bc: u32) -> i32;
        op_state_put(v: i32, np: *const u8, nn: u32, vp: *const u8, vn: u32);
        op_state_delete(v: i32, np: *const u8, nn: u32);
        timer_register(v: i32, kp: *const u8, kn: u32, t: i64);
        timer_delete(v: i32, kp: *const u8, kn: u32, t: i64);
    }
}

// Each wrapper passes pointers and lengths of live Rust slices, which is all
// the host reads (or, for the get imports, writes within buf's length).

pub(crate) fn emit(b: &[u8]) {
    unsafe { imp::emit(b.as_ptr(), b.len() as u32) }
}

pub(crate) fn set_plan(json: &str) {
    unsafe { imp::set_plan(json.as_ptr(), json.len() as u32) }
}

pub(crate) fn fail(msg: &str) {
    unsafe { imp::fail(msg.as_ptr(), msg.len() as u32) }
}

pub(crate) fn log(level: i32, msg: &str) {
    unsafe { imp::log(level, msg.as_ptr(), msg.len() as u32) }
}

pub(crate) fn counter_add(name: &str, delta: i64) {
    unsafe { imp::counter_add(name.as_ptr(), name.len() as u32, delta) }
}

pub(crate) fn now_ms() -> i64 {
    unsafe { imp::now_ms() }
}

pub(crate) fn state_get(vertex: i32, name: &str, key: &[u8], buf: &mut [u8]) -> i32 {
    unsafe {
        imp::state_get(vertex, name.as_ptr(), name.len() as u32, key.as_ptr(), key.len() as u32, buf.as_mut_ptr(), buf.len() as u32)
    }
}

pub(crate) fn state_put(vertex: i32, name: &str, key: &[u8], val: &[u8]) {
    unsafe {
        imp::state_put(vertex, name.as_ptr(), name.len() as u32, key.as_ptr(), key.len() as u32, val.as_ptr(), val.len() as u32)
    }
}

pub(crate) fn state_put_batch(vertex: i32, name: &str, batch: &[u8]) {
    unsafe { imp::state_put_batch(vertex, name.as_ptr(), name.len() as u32, batch.as_ptr(), batch.len() as u32) }
}

pub(crate) fn state_delete(vertex: i32, name: &str, key: &[u8]) {
    unsafe { imp::state_delete(vertex, name.as_ptr(), name.len() as u32, key.as_ptr(), key.len() as u32) }
}

pub(crate) fn state_scan(vertex: i32, name: &str, buf: &mut [u8]) -> i32 {
    unsafe { imp::state_scan(vertex, name.as_ptr(), name.len() as u32, buf.as_mut_ptr(), buf.len() as u32) }
}

pub(crate) fn op_state_get(vertex: i32, name: &str, buf: &mut [u8]) -> i32 {
    unsafe { imp::op_state_get(vertex, name.as_ptr(), name.len() as u32, buf.as_mut_ptr(), buf.len() as u32) }
}

pub(crate) fn op_state_put(vertex: i32, name: &str, val: &[u8]) {
    unsafe { imp::op_state_put(vertex, name.as_ptr(), name.len() as u32, val.as_ptr(), val.len() as u32) }
}

pub(crate) fn op_state_delete(vertex: i32, name: &str) {
    unsafe { imp::op_state_delete(vertex, name.as_ptr(), name.len() as u32) }
}

pub(crate) fn timer_register(vertex: i32, key: &[u8], time_ms: i64) {
    unsafe { imp::timer_register(vertex, key.as_ptr(), key.len() as u32, time_ms) }
}

pub(crate) fn timer_delete(vertex: i32, key: &[u8], time_ms: i64) {
    unsafe { imp::timer_delete(vertex, key.as_ptr(), key.len() as u32, time_ms) }
}

/// Reads a value with one of the "get" imports into `buf`, growing it and
/// asking again when it is too small; `None` when absent.
pub(crate) fn get_into(buf: &mut Vec<u8>, mut get: impl FnMut(&mut [u8]) -> i32) -> Option<usize> {
    loop {
        let cap = buf.capacity().max(64);
        buf.resize(cap, 0);
        let n = get(&mut buf[..]);
        if n == ABSENT {
            return None;
        }
        let n = n as usize;
        if n <= buf.len() {
            buf.truncate(n);
            return Some(n);
        }
        buf.reserve(n - buf.len());
    }
}
