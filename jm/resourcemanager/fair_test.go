package resourcemanager

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestFairOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reqs  []Request
		inUse map[string]int
		want  []int
	}{
		{"empty", nil, nil, []int{}},
		{"one tenant: oldest first", []Request{{"a", 3}, {"a", 1}, {"a", 2}}, map[string]int{"a": 5}, []int{1, 2, 0}},
		{"fewest in use first", []Request{{"a", 1}, {"b", 2}}, map[string]int{"a": 3, "b": 1}, []int{1, 0}},
		{"no slots beats some", []Request{{"a", 1}, {"a", 2}, {"c", 3}}, map[string]int{"a": 1}, []int{2, 0, 1}},
		{"ties by age", []Request{{"b", 2}, {"a", 1}}, map[string]int{"a": 2, "b": 2}, []int{1, 0}},
		{"three tenants", []Request{{"a", 1}, {"b", 2}, {"c", 3}, {"b", 4}}, map[string]int{"a": 4, "b": 2, "c": 0}, []int{2, 1, 3, 0}},
		{"default tenant counts too", []Request{{"", 1}, {"a", 2}}, map[string]int{"": 1}, []int{1, 0}},
	} {
		if got := FairOrder(tc.reqs, tc.inUse); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFreedSlotsGoToTheTenantWithFewest: tenant a holds both slots and
// waits for one more; b asks later. The first freed slot goes to b (0 in
// use), not to a's older request (1 in use after the release).
func TestFreedSlotsGoToTheTenantWithFewest(t *testing.T) {
	rm := New(Config{SlotRequestTimeout: 10 * time.Second})
	defer rm.Close()
	ctx := context.Background()
	rm.RegisterTaskManager(ctx, reg("tm1", 2))
	held, err := rm.RequestTenantSlots(ctx, "a", "a1", 2)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		job string
		err error
	}
	got := make(chan res, 2)
	go func() { _, err := rm.RequestTenantSlots(ctx, "a", "a2", 1); got <- res{"a2", err} }()
	waitWaiters(t, rm, 1)
	go func() { _, err := rm.RequestTenantSlots(ctx, "b", "b1", 1); got <- res{"b1", err} }()
	waitWaiters(t, rm, 2)

	rm.ReleaseSlots(held[0].AllocationID)
	if r := <-got; r.job != "b1" || r.err != nil {
		t.Fatalf("first freed slot went to %s (%v), want b1", r.job, r.err)
	}
	rm.ReleaseSlots(held[1].AllocationID)
	if r := <-got; r.job != "a2" || r.err != nil {
		t.Fatalf("second freed slot: %s %v", r.job, r.err)
	}
}
