package resourcemanager

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
)

// FuzzRegister: a registration from the wire never panics, and one that is
// refused changes nothing.
func FuzzRegister(f *testing.F) {
	f.Add("tm1", "127.0.0.1:1", "127.0.0.1:2", 4, 0, "a")
	f.Add("", "h:0", ":1", -1, 9, "")
	f.Add("x", "[::1]:80", "host:65535", 1024, 1023, "b")
	f.Fuzz(func(t *testing.T, id, rpc, data string, slots, reportIdx int, alloc string) {
		m := NewSlotManager(time.Second, seqIDs())
		r := control.Registration{ResourceID: id, RPCAddress: rpc, DataAddress: data, Slots: slots,
			SlotReport: []control.SlotStatus{{Index: reportIdx, AllocationID: alloc}}}
		_, _, _, err := m.Register(r, t0)
		if err != nil {
			if m.Total() != 0 || len(m.TaskManagers()) != 0 {
				t.Fatal("a refused registration changed the slot manager")
			}
			return
		}
		if m.Total() != slots || m.Free() < 0 || m.Free() > slots {
			t.Fatalf("total %d free %d for %d slots", m.Total(), m.Free(), slots)
		}
	})
}
