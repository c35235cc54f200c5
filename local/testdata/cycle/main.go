// Command cycle is a test guest written against the raw ABI (docs/ABI.md),
// without the SDK, which cannot express a cycle: its plan declares a graph
// whose map operators feed each other. Submitting it must fail with an
// invalid-graph error that names the cycle.
package main

import "unsafe"

const plan = `{"name":"cycle","vertices":[
 {"id":1,"name":"src","kind":"source","connector":"text","config":{"paths":"[\"x\"]"}},
 {"id":2,"name":"a","kind":"map"},
 {"id":3,"name":"b","kind":"map"},
 {"id":4,"name":"out","kind":"sink","connector":"collect"}],
 "edges":[{"source":1,"target":2,"partitioner":"forward"},
  {"source":2,"target":3,"partitioner":"forward"},
  {"source":3,"target":2,"partitioner":"forward"},
  {"source":3,"target":4,"partitioner":"forward"}]}`

//go:wasmimport sluice set_plan
func setPlan(ptr, n uint32)

var allocs = map[uint32][]byte{}

//go:wasmexport sluice_abi_v1
func abiV1() {}

//go:wasmexport sluice_alloc
func alloc(size uint32) uint32 {
	b := make([]byte, max(size, 1))
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	allocs[p] = b
	return p
}

//go:wasmexport sluice_free
func free(p uint32) { delete(allocs, p) }

//go:wasmexport sluice_plan
func doPlan(_, _ uint32) int32 {
	b := []byte(plan)
	setPlan(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)))
	return 0
}

//go:wasmexport sluice_open
func open(_, _ uint32) int32 { return 0 }

//go:wasmexport sluice_process
func process(_, _ uint32) int32 { return 0 }

//go:wasmexport sluice_source_poll
func sourcePoll(int32) int32 { return 2 }

//go:wasmexport sluice_end_input
func endInput() int32 { return 0 }

//go:wasmexport sluice_barrier
func barrier(int64) int32 { return 0 }

//go:wasmexport sluice_timers
func timers(_, _ uint32) int32 { return 0 }

//go:wasmexport sluice_close
func closeTask() int32 { return 0 }

func main() {}
