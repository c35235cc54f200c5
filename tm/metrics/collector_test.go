package metrics

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/tm/executor"
	"github.com/sluicehq/sluice/wasmhost"
)

type fakeSource struct {
	stats    []executor.TaskStat
	failures map[string]executor.GuestFailures
	slots    []control.SlotStatus
	fuel     map[string]int64
	cache    executor.CacheStats
}

func (f fakeSource) TaskStats() []executor.TaskStat                   { return f.stats }
func (f fakeSource) GuestFailures() map[string]executor.GuestFailures { return f.failures }
func (f fakeSource) SlotReport() []control.SlotStatus                 { return f.slots }
func (f fakeSource) TenantFuel() map[string]int64                     { return f.fuel }
func (f fakeSource) ModuleCacheStats() executor.CacheStats            { return f.cache }

func TestCollectorExportsTasksFailuresAndSlots(t *testing.T) {
	src := fakeSource{
		stats: []executor.TaskStat{
			{ExecutionID: "e1", JobID: "j1", JobName: "wc", Tenant: "acme", Task: "lines -> split", Operators: []string{"lines", "split"},
				SourceHead: true, Subtask: 0, Metrics: control.TaskMetrics{RecordsIn: 10, RecordsOut: 42, BytesIn: 300, BytesOut: 900,
					BusyMsPerSecond: 600, IdleMsPerSecond: 300, BackPressuredMsPerSecond: 100, OutputBufferUsage: 0.5,
					MemoryPages: 17, Fuel: 12345, AccumulatedBusyMs: 6, AccumulatedIdleMs: 3, AccumulatedBackPressuredMs: 1, LastAlignmentMs: 4}},
			// An older attempt that ended, under the same labels as a running
			// one: the running one wins.
			{ExecutionID: "e2-old", JobID: "j1", JobName: "wc", Tenant: "acme", Task: "count -> out", Operators: []string{"count", "out"},
				SinkTail: true, Subtask: 1, Ended: true, Metrics: control.TaskMetrics{RecordsIn: 1, RecordsOut: 1}},
			{ExecutionID: "e2", JobID: "j1", JobName: "wc", Tenant: "acme", Task: "count -> out", Operators: []string{"count", "out"},
				SinkTail: true, Subtask: 1, Metrics: control.TaskMetrics{RecordsIn: 42, RecordsOut: 7}},
		},
		failures: map[string]executor.GuestFailures{"acme": {Traps: 2, Deadlines: 1, FuelLimits: 3}},
		fuel:     map[string]int64{"acme": 99999, "beta": 5},
		slots:    []control.SlotStatus{{Index: 0, AllocationID: "a"}, {Index: 1}, {Index: 2}},
		cache: executor.CacheStats{MemoryEntries: 3, MemoryBytes: 300, MemoryEvictions: 4, DiskEntries: 5, DiskBytes: 500,
			DiskEvictions: 6, Compiled: wasmhost.CacheDirStats{Entries: 7, Bytes: 700, Evictions: 8}},
	}
	got := promtest.Gather(t, NewCollector("tm1", src))
	src1 := "job_id=j1,job_name=wc,subtask=0,task=lines -> split,tenant=acme,tm=tm1"
	cnt1 := "job_id=j1,job_name=wc,subtask=1,task=count -> out,tenant=acme,tm=tm1"
	op := func(labels, op string) string {
		return strings.Replace(labels, "subtask=", "operator="+op+",subtask=", 1)
	}
	want := map[string]float64{
		"sluice_task_records_in_total{" + src1 + "}":                   10,
		"sluice_task_records_out_total{" + src1 + "}":                  42,
		"sluice_task_bytes_in_total{" + src1 + "}":                     300,
		"sluice_task_bytes_out_total{" + src1 + "}":                    900,
		"sluice_task_busy_ms_per_second{" + src1 + "}":                 600,
		"sluice_task_idle_ms_per_second{" + src1 + "}":                 300,
		"sluice_task_back_pressured_ms_per_second{" + src1 + "}":       100,
		"sluice_task_busy_time_ms_total{" + src1 + "}":                 6,
		"sluice_task_idle_time_ms_total{" + src1 + "}":                 3,
		"sluice_task_back_pressured_time_ms_total{" + src1 + "}":       1,
		"sluice_task_output_buffer_usage{" + src1 + "}":                0.5,
		"sluice_task_guest_memory_pages{" + src1 + "}":                 17,
		"sluice_task_guest_fuel_total{" + src1 + "}":                   12345,
		"sluice_task_checkpoint_alignment_ms{" + src1 + "}":            4,
		"sluice_operator_records_out_total{" + op(src1, "lines") + "}": 10,
		"sluice_operator_records_in_total{" + op(src1, "split") + "}":  10,
		"sluice_operator_records_out_total{" + op(src1, "split") + "}": 42,
		"sluice_task_records_in_total{" + cnt1 + "}":                   42,
		"sluice_task_records_out_total{" + cnt1 + "}":                  7,
		"sluice_operator_records_in_total{" + op(cnt1, "count") + "}":  42,
		"sluice_operator_records_out_total{" + op(cnt1, "count") + "}": 7,
		"sluice_operator_records_in_total{" + op(cnt1, "out") + "}":    7,
		"sluice_guest_traps_total{tenant=acme,tm=tm1}":                 2,
		"sluice_guest_deadline_hits_total{tenant=acme,tm=tm1}":         1,
		"sluice_guest_fuel_limit_hits_total{tenant=acme,tm=tm1}":       3,
		"sluice_tenant_fuel_total{tenant=acme,tm=tm1}":                 99999,
		"sluice_tenant_fuel_total{tenant=beta,tm=tm1}":                 5,
		"sluice_taskmanager_slots_total{tm=tm1}":                       3,
		"sluice_taskmanager_slots_free{tm=tm1}":                        2,
		"sluice_taskmanager_tasks_running{tm=tm1}":                     2,
		"sluice_module_cache_entries{layer=memory,tm=tm1}":             3,
		"sluice_module_cache_bytes{layer=memory,tm=tm1}":               300,
		"sluice_module_cache_evictions_total{layer=memory,tm=tm1}":     4,
		"sluice_module_cache_entries{layer=disk,tm=tm1}":               5,
		"sluice_module_cache_bytes{layer=disk,tm=tm1}":                 500,
		"sluice_module_cache_evictions_total{layer=disk,tm=tm1}":       6,
		"sluice_module_cache_entries{layer=compiled,tm=tm1}":           7,
		"sluice_module_cache_bytes{layer=compiled,tm=tm1}":             700,
		"sluice_module_cache_evictions_total{layer=compiled,tm=tm1}":   8,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.Contains(k, "{job=") || strings.Contains(k, ",job=") {
			t.Errorf("series %s uses the label job, which Prometheus keeps for itself", k)
		}
	}
	// Every task series but the ended attempt's, and nothing more.
	taskSeries := 0
	for k := range got {
		if strings.HasPrefix(k, "sluice_task_") {
			taskSeries++
		}
	}
	if taskSeries != 14+14 {
		t.Errorf("%d task series, want 14 for each of the 2 tasks", taskSeries)
	}
}

func TestOperatorRecords(t *testing.T) {
	m := control.TaskMetrics{RecordsIn: 5, RecordsOut: 9}
	for _, tc := range []struct {
		name string
		st   executor.TaskStat
		want []OperatorFigures
	}{
		{"guest chain", executor.TaskStat{Operators: []string{"a", "b", "c"}, Metrics: m}, []OperatorFigures{
			{Name: "a", In: 5, HasIn: true}, {Name: "b"}, {Name: "c", Out: 9, HasOut: true}}},
		{"text source to collect", executor.TaskStat{Operators: []string{"lines", "out"}, SourceHead: true, SinkTail: true, Metrics: control.TaskMetrics{RecordsIn: 5, RecordsOut: 5}},
			[]OperatorFigures{{Name: "lines", Out: 5, HasOut: true}, {Name: "out", In: 5, HasIn: true}}},
		{"one operator", executor.TaskStat{Operators: []string{"map"}, Metrics: m}, []OperatorFigures{{Name: "map", In: 5, Out: 9, HasIn: true, HasOut: true}}},
		{"repeated names", executor.TaskStat{Operators: []string{"map", "map"}, Metrics: m}, []OperatorFigures{
			{Name: "map (1)", In: 5, HasIn: true}, {Name: "map (2)", Out: 9, HasOut: true}}},
		{"empty", executor.TaskStat{}, nil},
	} {
		if got := OperatorRecords(tc.st); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
