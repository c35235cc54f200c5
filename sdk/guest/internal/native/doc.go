// Package native is the boundary between the Go SDK and a host that runs
// the SDK's code natively, outside Wasm: sdk/guest/jobtest, the job test
// harness. Host is the ABI's imports (docs/ABI.md section 4) as Go calls
// and Module its exports; sdk/guest implements Module over the same code a
// wasip1 build exports, and sends its host calls to a Host.
//
// It uses the standard library only and holds no state.
package native
