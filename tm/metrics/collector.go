package metrics

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/tm/executor"
)

// Source is what the collector reads; *executor.Executor is one.
type Source interface {
	TaskStats() []executor.TaskStat
	GuestFailures() map[string]executor.GuestFailures
	TenantFuel() map[string]int64
	SlotReport() []control.SlotStatus
	ModuleCacheStats() executor.CacheStats
}

var (
	taskLabels = []string{"job_id", "job_name", "task", "subtask", "tenant", "tm"}
	opLabels   = []string{"job_id", "job_name", "task", "subtask", "operator", "tenant", "tm"}
)

func taskDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("sluice_task_"+name, help, taskLabels, nil)
}

// Collector is the TaskManager's Prometheus collector.
type Collector struct {
	src Source
	tm  string

	recordsIn, recordsOut, bytesIn, bytesOut     *prometheus.Desc
	busyRate, idleRate, bpRate                   *prometheus.Desc
	busyTotal, idleTotal, bpTotal                *prometheus.Desc
	bufferUsage, memoryPages, fuel, alignment    *prometheus.Desc
	opRecordsIn, opRecordsOut                    *prometheus.Desc
	traps, deadlines, slotsTotal, slotsFree, run *prometheus.Desc
	fuelLimits, tenantFuel                       *prometheus.Desc
	cacheEntries, cacheBytes, cacheEvictions     *prometheus.Desc
}

// NewCollector returns the collector of TaskManager tm (its resource id,
// the tm label).
func NewCollector(tm string, src Source) *Collector {
	return &Collector{
		src: src, tm: tm,
		recordsIn:      taskDesc("records_in_total", "Records handed to the task's chain (a text source's lines)."),
		recordsOut:     taskDesc("records_out_total", "Records the task's chain emitted."),
		bytesIn:        taskDesc("bytes_in_total", "Bytes of the task's input buffers (a text source's line bytes)."),
		bytesOut:       taskDesc("bytes_out_total", "Bytes of the task's output buffers (a collect sink's value bytes)."),
		busyRate:       taskDesc("busy_ms_per_second", "Milliseconds per second the task was busy, over the last heartbeat interval."),
		idleRate:       taskDesc("idle_ms_per_second", "Milliseconds per second the task waited for input, over the last heartbeat interval."),
		bpRate:         taskDesc("back_pressured_ms_per_second", "Milliseconds per second the task waited for output credit, over the last heartbeat interval."),
		busyTotal:      taskDesc("busy_time_ms_total", "Milliseconds the task was busy since it started."),
		idleTotal:      taskDesc("idle_time_ms_total", "Milliseconds the task waited for input since it started."),
		bpTotal:        taskDesc("back_pressured_time_ms_total", "Milliseconds the task waited for output credit since it started."),
		bufferUsage:    taskDesc("output_buffer_usage", "Share of the task's output credit in use, 0 to 1 (the highest over its outputs)."),
		memoryPages:    taskDesc("guest_memory_pages", "The guest's linear memory, in 64 KiB pages."),
		fuel:           taskDesc("guest_fuel_total", "The guest's fuel consumed: checks run at function entries and loop headers."),
		alignment:      taskDesc("checkpoint_alignment_ms", "How long the task's last checkpoint waited for its barriers to align."),
		opRecordsIn:    prometheus.NewDesc("sluice_operator_records_in_total", "Records into an operator, where the chain shows them: its head and its host sink.", opLabels, nil),
		opRecordsOut:   prometheus.NewDesc("sluice_operator_records_out_total", "Records out of an operator, where the chain shows them: its host source and its tail.", opLabels, nil),
		traps:          prometheus.NewDesc("sluice_guest_traps_total", "Tasks whose guest trapped (a trap, stack overflow, memory cap or exit).", []string{"tenant", "tm"}, nil),
		deadlines:      prometheus.NewDesc("sluice_guest_deadline_hits_total", "Tasks whose guest call ran past its deadline.", []string{"tenant", "tm"}, nil),
		fuelLimits:     prometheus.NewDesc("sluice_guest_fuel_limit_hits_total", "Tasks whose guest call used its fuel limit (sandbox.call-fuel, the call_fuel quota).", []string{"tenant", "tm"}, nil),
		tenantFuel:     prometheus.NewDesc("sluice_tenant_fuel_total", "Fuel the tenant's guests spent on the TaskManager, over all its tasks: what its CPU share (cpu_weight) divides.", []string{"tenant", "tm"}, nil),
		slotsTotal:     prometheus.NewDesc("sluice_taskmanager_slots_total", "Task slots of the TaskManager.", []string{"tm"}, nil),
		slotsFree:      prometheus.NewDesc("sluice_taskmanager_slots_free", "Task slots of the TaskManager that hold no allocation.", []string{"tm"}, nil),
		run:            prometheus.NewDesc("sluice_taskmanager_tasks_running", "Tasks running on the TaskManager.", []string{"tm"}, nil),
		cacheEntries:   prometheus.NewDesc("sluice_module_cache_entries", "Modules held by a layer of the module cache: memory (compiled), disk (module files), compiled (the compile cache's files).", []string{"layer", "tm"}, nil),
		cacheBytes:     prometheus.NewDesc("sluice_module_cache_bytes", "Bytes held by a layer of the module cache (memory: the compiled modules' estimated size).", []string{"layer", "tm"}, nil),
		cacheEvictions: prometheus.NewDesc("sluice_module_cache_evictions_total", "Entries a layer of the module cache evicted to stay within its budget.", []string{"layer", "tm"}, nil),
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.recordsIn, c.recordsOut, c.bytesIn, c.bytesOut, c.busyRate, c.idleRate, c.bpRate,
		c.busyTotal, c.idleTotal, c.bpTotal, c.bufferUsage, c.memoryPages, c.fuel, c.alignment,
		c.opRecordsIn, c.opRecordsOut, c.traps, c.deadlines, c.slotsTotal, c.slotsFree, c.run,
		c.fuelLimits, c.tenantFuel,
		c.cacheEntries, c.cacheBytes, c.cacheEvictions,
	} {
		ch <- d
	}
}

// Collect reads the current figures. A task that ended lately is
// collected by the next two scrapes, with its final figures (see
// executor.TaskStats); a task running under the same labels (its next
// attempt) wins over them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	stats := c.src.TaskStats()
	type key struct {
		job, task string
		subtask   int
	}
	chosen := map[key]int{}
	running := 0
	for i, st := range stats {
		if !st.Ended {
			running++
		}
		k := key{st.JobID, st.Task, st.Subtask}
		if j, ok := chosen[k]; !ok || (stats[j].Ended && !st.Ended) {
			chosen[k] = i
		}
	}
	for _, i := range chosen {
		c.collectTask(ch, stats[i])
	}
	for tenant, f := range c.src.GuestFailures() {
		ch <- prometheus.MustNewConstMetric(c.traps, prometheus.CounterValue, float64(f.Traps), tenant, c.tm)
		ch <- prometheus.MustNewConstMetric(c.deadlines, prometheus.CounterValue, float64(f.Deadlines), tenant, c.tm)
		ch <- prometheus.MustNewConstMetric(c.fuelLimits, prometheus.CounterValue, float64(f.FuelLimits), tenant, c.tm)
	}
	for tenant, n := range c.src.TenantFuel() {
		ch <- prometheus.MustNewConstMetric(c.tenantFuel, prometheus.CounterValue, float64(n), tenant, c.tm)
	}
	slots := c.src.SlotReport()
	free := 0
	for _, s := range slots {
		if s.AllocationID == "" {
			free++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.slotsTotal, prometheus.GaugeValue, float64(len(slots)), c.tm)
	ch <- prometheus.MustNewConstMetric(c.slotsFree, prometheus.GaugeValue, float64(free), c.tm)
	ch <- prometheus.MustNewConstMetric(c.run, prometheus.GaugeValue, float64(running), c.tm)
	cs := c.src.ModuleCacheStats()
	for _, l := range []struct {
		layer     string
		entries   int
		bytes     int64
		evictions uint64
	}{
		{"memory", cs.MemoryEntries, cs.MemoryBytes, cs.MemoryEvictions},
		{"disk", cs.DiskEntries, cs.DiskBytes, cs.DiskEvictions},
		{"compiled", cs.Compiled.Entries, cs.Compiled.Bytes, cs.Compiled.Evictions},
	} {
		ch <- prometheus.MustNewConstMetric(c.cacheEntries, prometheus.GaugeValue, float64(l.entries), l.layer, c.tm)
		ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(l.bytes), l.layer, c.tm)
		ch <- prometheus.MustNewConstMetric(c.cacheEvictions, prometheus.CounterValue, float64(l.evictions), l.layer, c.tm)
	}
}

func (c *Collector) collectTask(ch chan<- prometheus.Metric, st executor.TaskStat) {
	m := st.Metrics
	lv := []string{st.JobID, st.JobName, st.Task, strconv.Itoa(st.Subtask), st.Tenant, c.tm}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter(c.recordsIn, m.RecordsIn)
	counter(c.recordsOut, m.RecordsOut)
	counter(c.bytesIn, m.BytesIn)
	counter(c.bytesOut, m.BytesOut)
	gauge(c.busyRate, float64(m.BusyMsPerSecond))
	gauge(c.idleRate, float64(m.IdleMsPerSecond))
	gauge(c.bpRate, float64(m.BackPressuredMsPerSecond))
	counter(c.busyTotal, m.AccumulatedBusyMs)
	counter(c.idleTotal, m.AccumulatedIdleMs)
	counter(c.bpTotal, m.AccumulatedBackPressuredMs)
	gauge(c.bufferUsage, m.OutputBufferUsage)
	gauge(c.memoryPages, float64(m.MemoryPages))
	counter(c.fuel, m.Fuel)
	gauge(c.alignment, float64(m.LastAlignmentMs))

	for _, op := range OperatorRecords(st) {
		olv := []string{st.JobID, st.JobName, st.Task, strconv.Itoa(st.Subtask), op.Name, st.Tenant, c.tm}
		if op.HasIn {
			ch <- prometheus.MustNewConstMetric(c.opRecordsIn, prometheus.CounterValue, float64(op.In), olv...)
		}
		if op.HasOut {
			ch <- prometheus.MustNewConstMetric(c.opRecordsOut, prometheus.CounterValue, float64(op.Out), olv...)
		}
	}
}

// OperatorFigures are the records of one operator of a chain that the
// task's own counts show.
type OperatorFigures struct {
	Name          string
	In, Out       int64
	HasIn, HasOut bool
}

// OperatorRecords derives per-operator records from a task's: the chain's
// operators between run fused inside one guest, so only its ends are seen.
// The head takes the task's records in (a host text source emits them:
// its records out, and the next operator's in); the tail gives the task's
// records out (a host sink receives them: its records in, and the previous
// operator's out). A name repeated in the chain gets its position added,
// so every operator has its own series.
func OperatorRecords(st executor.TaskStat) []OperatorFigures {
	n := len(st.Operators)
	if n == 0 {
		return nil
	}
	ops := make([]OperatorFigures, n)
	count := map[string]int{}
	for _, name := range st.Operators {
		count[name]++
	}
	for i, name := range st.Operators {
		if count[name] > 1 {
			name = fmt.Sprintf("%s (%d)", name, i+1)
		}
		ops[i].Name = name
	}
	in, out := st.Metrics.RecordsIn, st.Metrics.RecordsOut
	if st.SourceHead {
		ops[0].Out, ops[0].HasOut = in, true
		if n > 1 {
			ops[1].In, ops[1].HasIn = in, true
		}
	} else {
		ops[0].In, ops[0].HasIn = in, true
	}
	if st.SinkTail {
		ops[n-1].In, ops[n-1].HasIn = out, true
		if n > 1 && !(st.SourceHead && n == 2) {
			ops[n-2].Out, ops[n-2].HasOut = out, true
		}
	} else {
		ops[n-1].Out, ops[n-1].HasOut = out, true
	}
	return ops
}
