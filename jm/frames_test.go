package jm_test

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rpcserver"
)

// frame is a framed, strict Thrift binary CALL of method whose argument
// struct is body (ending in its STOP byte).
func frame(method string, body []byte) []byte {
	var m []byte
	m = binary.BigEndian.AppendUint32(m, 0x80010001)
	m = binary.BigEndian.AppendUint32(m, uint32(len(method)))
	m = append(m, method...)
	m = binary.BigEndian.AppendUint32(m, 1)
	m = append(m, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(m))), m...)
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHostileFramesOverRawTCP sends the JobManager's port frames no client
// would: a declared length of 2 GiB, a Thrift list of 2^31-1 strings inside
// a well-formed frame, a string of 2^31-1 bytes, random bytes. Each closes
// the connection or answers an error, the heap stays flat, and the server
// keeps serving.
func TestHostileFramesOverRawTCP(t *testing.T) {
	s := startJM(t, nil)
	ctx := context.Background()
	dc, _, _ := clients(t, s.Addr())
	if _, err := dc.Overview(ctx); err != nil {
		t.Fatal(err)
	}
	// SubmitJob(1: SubmitJobRequest{2: list<string> args}) with a huge
	// list header and no elements.
	hugeList := []byte{12, 0, 1, 15, 0, 2, 11}
	hugeList = binary.BigEndian.AppendUint32(hugeList, 0x7fffffff)
	hugeList = append(hugeList, 0, 0)
	// SubmitJob(1: {1: string module_digest}) claiming 2^31-1 bytes.
	hugeString := []byte{12, 0, 1, 11, 0, 1}
	hugeString = binary.BigEndian.AppendUint32(hugeString, 0x7fffffff)
	hugeString = append(hugeString, "sha256-"...)
	// A map of 2^31-1 entries.
	hugeMap := []byte{12, 0, 1, 13, 0, 4, 11, 11}
	hugeMap = binary.BigEndian.AppendUint32(hugeMap, 0x7fffffff)
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	twoGiB := binary.BigEndian.AppendUint32(nil, 0x80000000)
	twoGiB = append(twoGiB, 0x80, 0x01, 0x00, 0x01)

	cases := []struct {
		name string
		data []byte
	}{
		{"declared length 2 GiB", twoGiB},
		{"declared length 4 GiB - 1", []byte{0xff, 0xff, 0xff, 0xff, 0x80, 0x01, 0x00, 0x01}},
		{"list of 2^31-1 strings", frame("SubmitJob", hugeList)},
		{"string of 2^31-1 bytes", frame("SubmitJob", hugeString)},
		{"map of 2^31-1 entries", frame("SubmitJob", hugeMap)},
		{"unknown method", frame("Teleport", []byte{0})},
		{"random bytes", random},
	}
	before := heapAlloc()
	for range 3 {
		for _, tc := range cases {
			c, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write(tc.data)
			// The server closes the connection or answers (an exception);
			// either way it must not hang on us or die.
			n, err := io.Copy(io.Discard, io.LimitReader(c, 1<<20))
			c.Close()
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("%s: connection still open after 10s (read %d bytes)", tc.name, n)
			}
			if _, err := dc.Overview(ctx); err != nil {
				t.Fatalf("after %s: server stopped serving: %v", tc.name, rpcserver.FromCall(err))
			}
		}
	}
	after := heapAlloc()
	if after > before+32<<20 {
		t.Fatalf("heap grew from %d to %d bytes", before, after)
	}
	t.Logf("heap before %d, after %d bytes", before, after)
}
