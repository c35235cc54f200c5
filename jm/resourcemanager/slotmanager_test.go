package resourcemanager

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

func seqIDs() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("id%d", n) }
}

func reg(id string, slots int) control.Registration {
	return control.Registration{ResourceID: id, RPCAddress: "127.0.0.1:1000", DataAddress: "127.0.0.1:2000", Slots: slots}
}

var t0 = time.Unix(1000, 0)

func TestValidateRegistration(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*control.Registration)
		want string // "" = valid
	}{
		{"valid", func(*control.Registration) {}, ""},
		{"empty id", func(r *control.Registration) { r.ResourceID = "" }, "empty resource id"},
		{"zero slots", func(r *control.Registration) { r.Slots = 0 }, "slots 0: must be in [1, 1024]"},
		{"negative slots", func(r *control.Registration) { r.Slots = -3 }, "slots -3"},
		{"absurd slots", func(r *control.Registration) { r.Slots = 1025 }, "slots 1025"},
		{"no port", func(r *control.Registration) { r.RPCAddress = "localhost" }, `rpc address "localhost" is not host:port`},
		{"bad port", func(r *control.Registration) { r.DataAddress = "h:99999" }, `data address "h:99999" has no valid port`},
		{"empty host", func(r *control.Registration) { r.DataAddress = ":80" }, `has no host`},
		{"empty address", func(r *control.Registration) { r.RPCAddress = "" }, "rpc address is empty"},
		{"report out of range", func(r *control.Registration) { r.SlotReport = []control.SlotStatus{{Index: 4}} }, "slot report names slot 4 of 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reg("tm1", 2)
			tt.mod(&r)
			m := NewSlotManager(time.Second, seqIDs())
			id, _, _, err := m.Register(r, t0)
			if tt.want == "" {
				if err != nil || id == "" {
					t.Fatalf("Register = %q, %v", id, err)
				}
				return
			}
			if !errors.Is(err, rpcerr.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want INVALID_ARGUMENT containing %q", err, tt.want)
			}
			if m.Total() != 0 || len(m.TaskManagers()) != 0 {
				t.Fatal("a malformed registration changed the slot manager")
			}
		})
	}
}

func TestAllocateSpreadsAndMatches(t *testing.T) {
	tests := []struct {
		name   string
		tms    []int // slots per TaskManager
		taken  int   // allocated first by another job
		need   int
		perTM  []int // expected slots of the job per TaskManager; nil = error
		errMsg string
	}{
		{"one tm", []int{4}, 0, 3, []int{3}, ""},
		{"spread evenly", []int{4, 4, 4}, 0, 3, []int{1, 1, 1}, ""},
		{"most free slots left first", []int{4, 2}, 0, 4, []int{3, 1}, ""},
		{"all slots", []int{2, 2}, 0, 4, []int{2, 2}, ""},
		{"after another job", []int{2, 2}, 2, 2, []int{1, 1}, ""},
		{"not enough", []int{2, 1}, 0, 4, nil, "not enough slots: need 4, free 3"},
		{"not enough after another job", []int{2, 2}, 3, 2, nil, "not enough slots: need 2, free 1"},
		{"no task managers", nil, 0, 1, nil, "not enough slots: need 1, free 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewSlotManager(time.Second, seqIDs())
			for i, n := range tt.tms {
				if _, _, _, err := m.Register(reg(fmt.Sprintf("tm%d", i), n), t0); err != nil {
					t.Fatal(err)
				}
			}
			if tt.taken > 0 {
				if _, err := m.Allocate("other", tt.taken); err != nil {
					t.Fatal(err)
				}
			}
			free := m.Free()
			slots, err := m.Allocate("job", tt.need)
			if tt.perTM == nil {
				if !errors.Is(err, rpcerr.ErrNotEnoughSlots) || err.Error() != tt.errMsg {
					t.Fatalf("err = %v, want %q", err, tt.errMsg)
				}
				if m.Free() != free {
					t.Fatal("a failed allocation took slots")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]int, len(tt.tms))
			ids := map[string]bool{}
			for _, s := range slots {
				var i int
				fmt.Sscanf(s.ResourceID, "tm%d", &i)
				got[i]++
				if ids[s.AllocationID] {
					t.Fatalf("allocation id %s twice", s.AllocationID)
				}
				ids[s.AllocationID] = true
				if s.RPCAddress == "" || s.DataAddress == "" {
					t.Fatalf("slot without addresses: %+v", s)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.perTM) {
				t.Fatalf("slots per tm = %v, want %v", got, tt.perTM)
			}
			m.Release(ids2(slots)...)
			if m.Free() != free {
				t.Fatalf("free after release = %d, want %d", m.Free(), free)
			}
		})
	}
}

func ids2(s []Slot) []string { return allocationIDs(s) }

func TestAllocateRejectsBadRequests(t *testing.T) {
	m := NewSlotManager(time.Second, seqIDs())
	for _, n := range []int{0, -1} {
		if _, err := m.Allocate("j", n); !errors.Is(err, rpcerr.ErrInvalidArgument) {
			t.Fatalf("Allocate(%d) = %v", n, err)
		}
	}
}

func TestHeartbeatTimeoutReleasesSlots(t *testing.T) {
	m := NewSlotManager(10*time.Second, seqIDs())
	id1, _, _, _ := m.Register(reg("tm1", 2), t0)
	id2, _, _, _ := m.Register(reg("tm2", 2), t0)
	slots, err := m.Allocate("job", 4)
	if err != nil {
		t.Fatal(err)
	}
	// tm2 keeps heartbeating; tm1 goes silent.
	for s := 1; s <= 10; s++ {
		if known, _ := m.Heartbeat(control.Heartbeat{ResourceID: "tm2", RegistrationID: id2}, t0.Add(time.Duration(s)*time.Second)); !known {
			t.Fatal("tm2 unknown")
		}
	}
	if dead, _ := m.Expire(t0.Add(10 * time.Second)); len(dead) != 0 {
		t.Fatalf("dead at exactly the timeout: %v", dead)
	}
	dead, lost := m.Expire(t0.Add(10*time.Second + time.Millisecond))
	if fmt.Sprint(dead) != "[tm1]" {
		t.Fatalf("dead = %v", dead)
	}
	var want []string
	for _, s := range slots {
		if s.ResourceID == "tm1" {
			want = append(want, s.AllocationID)
		}
	}
	if len(lost) != 1 || lost[0].JobID != "job" || lost[0].ResourceID != "tm1" || fmt.Sprint(lost[0].Allocations) != fmt.Sprint(want) || lost[0].Reason != "heartbeat timeout" {
		t.Fatalf("lost = %+v, want allocations %v", lost, want)
	}
	if m.Total() != 2 || m.Free() != 0 {
		t.Fatalf("total %d free %d", m.Total(), m.Free())
	}
	// The dead TaskManager's next heartbeat is refused; it registers again.
	if known, _ := m.Heartbeat(control.Heartbeat{ResourceID: "tm1", RegistrationID: id1}, t0.Add(11*time.Second)); known {
		t.Fatal("heartbeat of a dead registration accepted")
	}
	if _, _, _, err := m.Register(reg("tm1", 2), t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	if m.Free() != 2 || m.Total() != 4 {
		t.Fatalf("after re-register: total %d free %d", m.Total(), m.Free())
	}
	if next, ok := m.NextExpiry(); !ok || !next.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("NextExpiry = %v %v", next, ok)
	}
}

func TestReRegisterAfterJobManagerRestart(t *testing.T) {
	// A new JobManager knows nothing: the TaskManager's heartbeat with its
	// old registration id is refused, it registers again with a slot report
	// that still shows an allocation of the old JobManager's job.
	m := NewSlotManager(time.Second, seqIDs())
	if known, _ := m.Heartbeat(control.Heartbeat{ResourceID: "tm1", RegistrationID: "old"}, t0); known {
		t.Fatal("unknown registration accepted")
	}
	r := reg("tm1", 2)
	r.SlotReport = []control.SlotStatus{{Index: 0, AllocationID: "a-old", JobID: "j-old"}, {Index: 1}}
	id, lost, stale, err := m.Register(r, t0)
	if err != nil || id == "" || len(lost) != 0 {
		t.Fatalf("Register = %q %v %v", id, lost, err)
	}
	if len(stale) != 1 || stale[0].AllocationID != "a-old" || stale[0].RPCAddress != r.RPCAddress {
		t.Fatalf("stale = %+v", stale)
	}
	if m.Free() != 1 {
		t.Fatalf("free = %d: the stale allocation still occupies its slot", m.Free())
	}
	// Once the TaskManager reports it gone, the slot is free again.
	known, stale := m.Heartbeat(control.Heartbeat{ResourceID: "tm1", RegistrationID: id, SlotReport: []control.SlotStatus{{Index: 0}, {Index: 1}}}, t0)
	if !known || len(stale) != 0 || m.Free() != 2 {
		t.Fatalf("known %v stale %v free %d", known, stale, m.Free())
	}
}

func TestReRegisterOfLiveTaskManager(t *testing.T) {
	// The TaskManager restarted before its heartbeats timed out: the
	// allocations it no longer holds are lost; ones it still reports stay.
	m := NewSlotManager(time.Minute, seqIDs())
	old, _, _, _ := m.Register(reg("tm1", 3), t0)
	a, _ := m.Allocate("ja", 1)
	b, _ := m.Allocate("jb", 2)
	r := reg("tm1", 3)
	r.SlotReport = []control.SlotStatus{{Index: 0, AllocationID: a[0].AllocationID, JobID: "ja"}}
	id, lost, stale, err := m.Register(r, t0.Add(time.Second))
	if err != nil || id == old || len(stale) != 0 {
		t.Fatalf("Register = %q %v %v", id, stale, err)
	}
	if len(lost) != 1 || lost[0].JobID != "jb" || len(lost[0].Allocations) != 2 || lost[0].Reason != "re-registered" {
		t.Fatalf("lost = %+v (b = %v)", lost, b)
	}
	if m.Free() != 2 {
		t.Fatalf("free = %d", m.Free())
	}
	if known, _ := m.Heartbeat(control.Heartbeat{ResourceID: "tm1", RegistrationID: old}, t0); known {
		t.Fatal("old registration id still accepted")
	}
	m.Release(a[0].AllocationID)
	if m.Free() != 3 {
		t.Fatalf("free = %d", m.Free())
	}
}

// A TaskManager a JobMaster could not reach offers no slots until it
// heartbeats again; released allocations on it stay unused meanwhile.
func TestUnreachableHoldsSlotsUntilHeartbeat(t *testing.T) {
	m := NewSlotManager(10*time.Second, seqIDs())
	id1, _, _, _ := m.Register(reg("tm1", 2), t0)
	m.Register(reg("tm2", 2), t0)
	slots, err := m.Allocate("job", 4)
	if err != nil {
		t.Fatal(err)
	}
	if m.MarkUnreachable("nope", t0) {
		t.Error("an unknown TaskManager was marked")
	}
	if !m.MarkUnreachable("tm1", t0.Add(time.Second)) {
		t.Fatal("tm1 unknown")
	}
	m.Release(allocationIDs(slots)...)
	if m.Free() != 2 {
		t.Fatalf("free = %d, want tm2's 2", m.Free())
	}
	if _, err := m.Allocate("job", 3); err == nil || err.Error() != "not enough slots: need 3, free 2" {
		t.Fatalf("allocate 3 = %v", err)
	}
	got, err := m.Allocate("job", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if s.ResourceID != "tm1" {
			continue
		}
		t.Fatalf("allocated %v on the unreachable tm1", s)
	}
	// A heartbeat from the moment of the report does not clear it; a later one does.
	m.Heartbeat(control.Heartbeat{ResourceID: "tm1", RegistrationID: id1}, t0.Add(time.Second))
	if m.Free() != 0 {
		t.Fatalf("free = %d before a later heartbeat", m.Free())
	}
	m.Heartbeat(control.Heartbeat{ResourceID: "tm1", RegistrationID: id1}, t0.Add(2*time.Second))
	if m.Free() != 2 {
		t.Fatalf("free = %d after tm1 heartbeated again, want 2", m.Free())
	}
}
