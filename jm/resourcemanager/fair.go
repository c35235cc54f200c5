package resourcemanager

import (
	"cmp"
	"slices"
)

// Request is a waiting slot request as the fair-share rule sees it.
type Request struct {
	Tenant string
	Seq    int // arrival order; lower is older
}

// FairOrder returns the indices of reqs in the order their requests should
// be served when slots free up: the tenant with the fewest slots in use
// (inUse) first, so one tenant's queue of jobs cannot starve another's;
// among equals, the oldest request first. It is pure: the ResourceManager
// calls it again after every grant, as inUse changes.
func FairOrder(reqs []Request, inUse map[string]int) []int {
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(inUse[reqs[a].Tenant], inUse[reqs[b].Tenant]); c != 0 {
			return c
		}
		return cmp.Compare(reqs[a].Seq, reqs[b].Seq)
	})
	return idx
}

// Has reports whether allocationID is allocated now.
func (m *SlotManager) Has(allocationID string) bool {
	_, ok := m.byAlloc[allocationID]
	return ok
}
