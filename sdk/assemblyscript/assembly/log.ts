// Logging to the task log (docs/ABI.md, log). Each line costs its length
// plus 266 bytes of the task's 1 MiB log budget: log little.

import * as host from "./host";

function write(level: i32, msg: string): void {
  const b = String.UTF8.encode(msg);
  host.log(level, changetype<usize>(b), b.byteLength);
}

export namespace log {
  /** A line at debug level. */
  export function debug(msg: string): void {
    write(-4, msg);
  }
  /** A line at info level. */
  export function info(msg: string): void {
    write(0, msg);
  }
  /** A line at warn level. */
  export function warn(msg: string): void {
    write(4, msg);
  }
  /** A line at error level. */
  export function error(msg: string): void {
    write(8, msg);
  }
}
