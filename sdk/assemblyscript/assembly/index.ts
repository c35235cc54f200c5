// The Sluice guest SDK for AssemblyScript: declare a job's dataflow with
// plain functions; the SDK implements the guest side of the ABI
// (docs/ABI.md). See sdk/assemblyscript/README.md and docs/assemblyscript.md.
//
//   import { job, Env, Record, Collector, Accumulator, Bytes, Emit } from "sluice";
//   export * from "sluice/abi";
//
//   job((env: Env): void => { ... });

export { Bytes } from "./bytes";
export { Record } from "./record";
export {
  Env, Stream, KeyedStream, Emit, job,
  MapFunc, FlatMapFunc, FilterFunc, KeyFunc, ReduceFunc, ProcessFunc, TimerFunc, SourceFunc, SinkFunc,
  HookFunc, BarrierFunc, PlanFunc,
} from "./plan";
export { Accumulator, Collector, Context, KeyedContext, count, fail, failed } from "./task";
export { log } from "./log";
// The handlers `sluice run` points abort, trace and seed at (see runtime.ts).
export { sluiceAbort, sluiceTrace, sluiceSeed } from "./runtime";
