// What AssemblyScript's standard library imports from "env" by default,
// satisfied inside the module so that it imports only what docs/ABI.md
// allows. `sluice run` compiles with
//
//   --use abort=~lib/sluice/runtime/sluiceAbort
//   --use trace=~lib/sluice/runtime/sluiceTrace
//   --use seed=~lib/sluice/runtime/sluiceSeed

import * as host from "./host";

/**
 * abort (a failed assert, an index out of range, out of memory) writes its
 * message to stderr and traps: the host fails the task and attaches the
 * head and tail of the call's stderr and the Wasm stack to the error.
 */
export function sluiceAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let s = "abort: " + (message != null ? message : "(no message)");
  if (fileName != null) s += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  const b = String.UTF8.encode(s + "\n");
  const iov = memory.data(8);
  store<u32>(iov, changetype<usize>(b));
  store<u32>(iov, b.byteLength, 4);
  host.fd_write(2, iov, 1, memory.data(4));
  unreachable();
}

/** trace goes to the task log at debug level, with its numbers. */
export function sluiceTrace(message: string, n: i32 = 0, a0: f64 = 0, a1: f64 = 0, a2: f64 = 0, a3: f64 = 0, a4: f64 = 0): void {
  let s = "trace: " + message;
  if (n > 0) s += " " + a0.toString();
  if (n > 1) s += ", " + a1.toString();
  if (n > 2) s += ", " + a2.toString();
  if (n > 3) s += ", " + a3.toString();
  if (n > 4) s += ", " + a4.toString();
  const b = String.UTF8.encode(s);
  host.log(-4, changetype<usize>(b), b.byteLength);
}

/**
 * seed (Math.random's) comes from WASI random_get, which the host makes
 * deterministic per task: a replayed task draws the same numbers.
 */
export function sluiceSeed(): f64 {
  const p = memory.data(8);
  host.random_get(p, 8);
  return <f64>(load<u64>(p) >> 11);
}
