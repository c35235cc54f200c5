// The guest exports of docs/ABI.md, section 3. Re-export them from your
// entry file with
//
//   export * from "sluice/abi";
//
// (only an entry file's exports become the module's exports).

import { doAlloc, doBarrier, doClose, doEndInput, doFree, doOpen, doPlan, doProcess, doSourcePoll, doTimers } from "./task";

/** Declares the ABI version; the host checks it exists and never calls it. */
export function sluice_abi_v1(): void {}

export function sluice_alloc(size: u32): usize {
  return doAlloc(size);
}

export function sluice_free(ptr: usize): void {
  doFree(ptr);
}

export function sluice_plan(ptr: usize, len: u32): i32 {
  return doPlan(ptr, len);
}

export function sluice_open(ptr: usize, len: u32): i32 {
  return doOpen(ptr, len);
}

export function sluice_process(ptr: usize, len: u32): i32 {
  return doProcess(ptr, len);
}

export function sluice_source_poll(max: i32): i32 {
  return doSourcePoll(max);
}

export function sluice_end_input(): i32 {
  return doEndInput();
}

export function sluice_barrier(checkpointId: i64): i32 {
  return doBarrier(checkpointId);
}

export function sluice_timers(ptr: usize, len: u32): i32 {
  return doTimers(ptr, len);
}

export function sluice_close(): i32 {
  return doClose();
}
