package executor

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/wasmhost"
)

func TestTaskLimitsOnlyTighten(t *testing.T) {
	base := wasmhost.Limits{MemoryLimitBytes: 64 << 20, CallTimeout: 5 * time.Second, MaxLogBytes: 1 << 20}
	for _, tc := range []struct {
		name string
		base wasmhost.Limits
		dep  control.TaskLimits
		want wasmhost.Limits
	}{
		{"no quotas", base, control.TaskLimits{}, base},
		{"tighter", base, control.TaskLimits{MemoryBytes: 16 << 20, CallTimeout: time.Second, StateBytes: 1 << 20},
			wasmhost.Limits{MemoryLimitBytes: 16 << 20, CallTimeout: time.Second, MaxStateBytes: 1 << 20, MaxLogBytes: 1 << 20}},
		{"looser is ignored", base, control.TaskLimits{MemoryBytes: 1 << 30, CallTimeout: time.Hour}, base},
		{"negative is ignored", base, control.TaskLimits{MemoryBytes: -1, CallTimeout: -time.Second, StateBytes: -1}, base},
		{"no base", wasmhost.Limits{}, control.TaskLimits{MemoryBytes: 8 << 20}, wasmhost.Limits{MemoryLimitBytes: 8 << 20}},
		{"the tenant's share and fuel limit", base, control.TaskLimits{CPUWeight: 3, FuelPerSecond: 1e9, CallFuel: 5e6},
			wasmhost.Limits{MemoryLimitBytes: 64 << 20, CallTimeout: 5 * time.Second, MaxLogBytes: 1 << 20, CPUWeight: 3, FuelPerSecond: 1e9, CallFuel: 5e6}},
		{"a looser fuel limit is ignored", wasmhost.Limits{CallFuel: 100}, control.TaskLimits{CallFuel: 1000}, wasmhost.Limits{CallFuel: 100}},
		{"a negative share is ignored", base, control.TaskLimits{CPUWeight: -2, FuelPerSecond: -1, CallFuel: -1}, base},
	} {
		if got := taskLimits(tc.base, tc.dep); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
