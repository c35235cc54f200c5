// Command kafkasink is a test guest for the Kafka sink written against the
// raw ABI (docs/ABI.md), until the Go SDK has a call for it: its plan is a
// host nexmark source feeding a host kafka-sink, with no guest operator,
// so only sluice_plan ever runs. Its arguments are pairs, in order:
//
//	brokers B  topic T  events N  rate R  delivery D  p P
//
// the sink's brokers, topic (default "out") and delivery, the source's
// event count and rate (events/s, 0: as fast as possible), and both
// operators' parallelism. The sink's transactional-id prefix is
// "kafkasink-test".
package main

import (
	"encoding/binary"
	"encoding/json"
	"unsafe"
)

//go:wasmimport sluice set_plan
func setPlan(ptr unsafe.Pointer, n uint32)

//go:wasmimport sluice fail
func fail(ptr unsafe.Pointer, n uint32)

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

//go:wasmexport sluice_open
func open(_, _ uint32) int32 { return 0 }

//go:wasmexport sluice_process
func process(_, _ uint32) int32 { return 1 }

//go:wasmexport sluice_plan
func plan(ptr, n uint32) int32 {
	b, ok := allocs[ptr] // the host passes a region it got from sluice_alloc
	if !ok || uint64(n) > uint64(len(b)) {
		return 1
	}
	args := decodeValues(b[:n])
	kv := map[string]string{"topic": "out", "events": "1000", "rate": "0", "delivery": "exactly-once", "p": "2"}
	for i := 0; i+1 < len(args); i += 2 {
		kv[args[i]] = args[i+1]
	}
	if len(args)%2 != 0 || kv["brokers"] == "" {
		msg := []byte("usage: brokers B [events N] [rate R] [delivery D] [p P]")
		fail(unsafe.Pointer(&msg[0]), uint32(len(msg)))
		return 1
	}
	p := 0
	for _, c := range kv["p"] {
		p = p*10 + int(c-'0')
	}
	type vertex struct {
		ID          int               `json:"id"`
		Name        string            `json:"name"`
		Kind        string            `json:"kind"`
		Parallelism int               `json:"parallelism"`
		Connector   string            `json:"connector"`
		Config      map[string]string `json:"config"`
	}
	type edge struct {
		Source      int    `json:"source"`
		Target      int    `json:"target"`
		Partitioner string `json:"partitioner"`
	}
	g := struct {
		Name     string   `json:"name"`
		Vertices []vertex `json:"vertices"`
		Edges    []edge   `json:"edges"`
	}{
		Name: "kafkasink",
		Vertices: []vertex{
			{ID: 1, Name: "events", Kind: "source", Parallelism: p, Connector: "nexmark", Config: map[string]string{"events": kv["events"], "rate": kv["rate"]}},
			{ID: 2, Name: "out", Kind: "sink", Parallelism: p, Connector: "kafka-sink", Config: map[string]string{
				"brokers": kv["brokers"], "topic": kv["topic"], "delivery": kv["delivery"], "transactional-id-prefix": "kafkasink-test"}},
		},
		Edges: []edge{{Source: 1, Target: 2, Partitioner: "forward"}},
	}
	js, err := json.Marshal(g)
	if err != nil {
		return 1
	}
	setPlan(unsafe.Pointer(&js[0]), uint32(len(js)))
	return 0
}

// decodeValues returns the values of an ABI batch (docs/ABI.md section 2).
func decodeValues(b []byte) []string {
	if len(b) < 4 {
		return nil
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	var out []string
	for range n {
		flags := b[0]
		b = b[1:]
		if flags&1 != 0 {
			b = b[4+binary.LittleEndian.Uint32(b):]
		}
		if flags&2 != 0 {
			b = b[8:]
		}
		l := binary.LittleEndian.Uint32(b)
		out = append(out, string(b[4:4+l]))
		b = b[4+l:]
	}
	return out
}

func main() {}
