// A module built with the SDK that declares an ABI version the host does
// not speak: sdk_test.go checks the host refuses it.

import { job, Env, Record } from "sluice";
export {
  sluice_abi_v1 as sluice_abi_v2,
  sluice_alloc, sluice_free, sluice_plan, sluice_open, sluice_process,
} from "sluice/abi";

function upper(r: Record): Record {
  return r;
}

function plan(env: Env): void {
  env.textSource("lines", ["in.txt"]).map("upper", upper).collect("out");
}

job(plan);
