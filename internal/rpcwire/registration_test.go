package rpcwire

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
)

func TestRegistrationRoundTrip(t *testing.T) {
	slots := []control.SlotStatus{{Index: 0}, {Index: 1, AllocationID: "a", JobID: "j"}}
	r := control.Registration{ResourceID: "tm", RPCAddress: "h:1", DataAddress: "h:2", Slots: 2, CPUCores: 4, MemoryBytes: 1 << 30, SlotReport: slots}
	if got := RegistrationFromWire(RegistrationToWire(r)); !reflect.DeepEqual(got, r) {
		t.Errorf("registration: %+v", got)
	}
	ok := control.Registered{LeaderSession: control.HASession(7), RegistrationID: "r1", HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second}
	if got := RegisteredFromWire(RegisteredToWire(ok)); got != ok {
		t.Errorf("registered: %+v", got)
	}
	h := control.Heartbeat{ResourceID: "tm", RegistrationID: "r1", SlotReport: slots, Metrics: map[string]int64{"m": 1},
		Tasks: []control.ExecutionMetrics{{ExecutionID: "e1", JobID: "j1", Metrics: control.TaskMetrics{RecordsIn: 4, Fuel: 9,
			OutputBufferUsage: 0.25, Reported: time.UnixMilli(1700000000456), AccumulatedIdleMs: 3}}}}
	if got := HeartbeatFromWire(HeartbeatToWire(h)); !reflect.DeepEqual(got, h) {
		t.Errorf("heartbeat: %+v", got)
	}
	w := HeartbeatToWire(h)
	w.SlotReport = append(w.SlotReport, nil)
	w.Tasks = append(w.Tasks, nil)
	if got := HeartbeatFromWire(w); len(got.SlotReport) != 2 || len(got.Tasks) != 1 {
		t.Errorf("a nil slot or task entry was kept: %+v %+v", got.SlotReport, got.Tasks)
	}
}
