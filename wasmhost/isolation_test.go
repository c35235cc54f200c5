package wasmhost

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
)

// TestTenantCannotReachAnotherTenantsState: two instances of the same guest,
// as if run by tenants a and b with the same job id, task, vertex ids, state
// names and keys, go through the same host functions. b reads none of a's
// keyed or operator state (every get is absent), and nothing b writes, sets
// as a timer or checkpoints changes a's state: a's snapshot is byte-identical
// before and after b's activity. (A key outside a subtask's key groups
// trapping is TestKeyOutsideTheSubtasksKeyGroupsTraps.)
func TestTenantCannotReachAnotherTenantsState(t *testing.T) {
	ctx := context.Background()
	keyed := func(vals ...string) []abi.Record {
		recs := textRecords(vals...)
		for i := range recs {
			recs[i].Key, recs[i].HasKey = recs[i].Value, true
		}
		return recs
	}
	step := func(tt *testTask, vals ...string) string {
		t.Helper()
		tt.out = nil
		if err := tt.in.Process(ctx, keyed(vals...)); err != nil {
			t.Fatal(err)
		}
		return strings.Join(values(tt.out), ",")
	}
	snap := func(tt *testTask) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := tt.in.State().snapshot(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	// The "count" process (vertex 3) keeps "n" per key in keyed state, a
	// timer per key, and "barriers" and "last" in operator state.
	const vertex = 3
	opState := func(tt *testTask, name string) (string, bool) {
		v, ok := tt.in.State().opGet(appendStateKey(nil, vertex, []byte(name), nil))
		return string(v), ok
	}
	cfg := TaskConfig{JobID: "j", TaskName: "count"}

	// Tenant a: keyed state for a, b and c, two barriers in operator state.
	a := openTask(t, []string{"keyed"}, []int{vertex}, cfg)
	if got := step(a, "a", "b", "a", "c", "a"); got != "a=1,b=1,a=2,c=1,a=3" {
		t.Fatalf("a's first batch: %q", got)
	}
	for _, id := range []int64{1, 2} {
		if err := a.in.Barrier(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := opState(a, "barriers"); !ok || v != "2" {
		t.Fatalf("a's operator state barriers = %q %v, want 2", v, ok)
	}
	before := snap(a)
	aTimer, aHasTimer := a.in.NextTimer()

	// Tenant b: the same job id, task, vertex, state names and keys.
	b := openTask(t, []string{"keyed"}, []int{vertex}, cfg)
	if b.in.State() == a.in.State() {
		t.Fatal("the two instances share one State")
	}
	if _, ok := b.in.NextTimer(); ok {
		t.Error("b sees a timer before registering any")
	}
	// Every key starts at n=1: b's gets of a's keys are absent.
	if got := step(b, "a", "b", "c", "a"); got != "a=1,b=1,c=1,a=2" {
		t.Fatalf("b read a's keyed state: %q", got)
	}
	// b's OnOpen found no "barriers" (a has 2), so its first barrier sets 1,
	// overwriting nothing of a's.
	if err := b.in.Barrier(ctx, 99); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"barriers": "1", "last": "99"} {
		if v, ok := opState(b, name); !ok || v != want {
			t.Errorf("b's operator state %s = %q %v, want %q", name, v, ok, want)
		}
	}
	// b's timers fire only for b's keys, with b's counts.
	b.out = nil
	if err := b.in.FireTimers(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(b.out), ","); got != "timer a@10 n=2,timer b@10 n=1,timer c@10 n=1" {
		t.Errorf("b's timers: %q", got)
	}
	if content(t, snap(b)) == content(t, before) {
		t.Error("b's snapshot equals a's")
	}

	// a is untouched: the same snapshot bytes, operator state and timers.
	if after := snap(a); content(t, after) != content(t, before) {
		t.Fatalf("b's activity changed a's state: snapshot %d bytes before, %d after", len(before), len(after))
	}
	if v, ok := opState(a, "barriers"); !ok || v != "2" {
		t.Errorf("a's operator state barriers = %q %v after b, want 2", v, ok)
	}
	if at, ok := a.in.NextTimer(); at != aTimer || ok != aHasTimer {
		t.Errorf("a's next timer %d %v after b, was %d %v", at, ok, aTimer, aHasTimer)
	}
	// And a carries on from its own counts.
	if got := step(a, "a", "b"); got != "a=4,b=2" {
		t.Errorf("a after b: %q", got)
	}
}
