// The host functions of docs/ABI.md, section 4, and the few WASI functions
// the SDK uses (section 6). Pointers and lengths are i32 offsets into linear
// memory; the host reads them during the call only.

// @ts-ignore: decorator
@external("sluice", "emit")
export declare function emit(ptr: usize, len: u32): void;

// @ts-ignore: decorator
@external("sluice", "set_plan")
export declare function set_plan(ptr: usize, len: u32): void;

// @ts-ignore: decorator
@external("sluice", "fail")
export declare function fail(ptr: usize, len: u32): void;

// @ts-ignore: decorator
@external("sluice", "log")
export declare function log(level: i32, ptr: usize, len: u32): void;

// @ts-ignore: decorator
@external("sluice", "counter_add")
export declare function counter_add(ptr: usize, len: u32, delta: i64): void;

// @ts-ignore: decorator
@external("sluice", "now_ms")
export declare function now_ms(): i64;

// @ts-ignore: decorator
@external("sluice", "state_get")
export declare function state_get(vertex: i32, name: usize, nameLen: u32, key: usize, keyLen: u32, buf: usize, cap: u32): i32;

// @ts-ignore: decorator
@external("sluice", "state_put")
export declare function state_put(vertex: i32, name: usize, nameLen: u32, key: usize, keyLen: u32, val: usize, valLen: u32): void;

// @ts-ignore: decorator
@external("sluice", "state_put_batch")
export declare function state_put_batch(vertex: i32, name: usize, nameLen: u32, batch: usize, batchLen: u32): void;

// @ts-ignore: decorator
@external("sluice", "state_delete")
export declare function state_delete(vertex: i32, name: usize, nameLen: u32, key: usize, keyLen: u32): void;

// @ts-ignore: decorator
@external("sluice", "state_scan")
export declare function state_scan(vertex: i32, name: usize, nameLen: u32, buf: usize, cap: u32): i32;

// @ts-ignore: decorator
@external("sluice", "op_state_get")
export declare function op_state_get(vertex: i32, name: usize, nameLen: u32, buf: usize, cap: u32): i32;

// @ts-ignore: decorator
@external("sluice", "op_state_put")
export declare function op_state_put(vertex: i32, name: usize, nameLen: u32, val: usize, valLen: u32): void;

// @ts-ignore: decorator
@external("sluice", "op_state_delete")
export declare function op_state_delete(vertex: i32, name: usize, nameLen: u32): void;

// @ts-ignore: decorator
@external("sluice", "timer_register")
export declare function timer_register(vertex: i32, key: usize, keyLen: u32, timeMs: i64): void;

// @ts-ignore: decorator
@external("sluice", "timer_delete")
export declare function timer_delete(vertex: i32, key: usize, keyLen: u32, timeMs: i64): void;

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_write")
export declare function fd_write(fd: u32, iovs: usize, iovsLen: u32, written: usize): u32;

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "random_get")
export declare function random_get(buf: usize, len: u32): u32;

// The statuses of docs/ABI.md, section 3.
export const STATUS_OK: i32 = 0;
export const STATUS_ERROR: i32 = 1;
export const STATUS_DONE: i32 = 2;

// ABSENT is what the "get" imports return for a missing value.
export const ABSENT: i32 = -1;
