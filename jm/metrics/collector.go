package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/jobmaster/checkpointing"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// Job is what the collector reads of one job; *jobmaster.JobMaster is one.
type Job interface {
	Details() jobmaster.Details
	Checkpoints() []checkpoint.Stats
	CheckpointCounts() checkpointing.Counts
}

// Source is what the collector reads.
type Source struct {
	// Jobs returns every job the JobManager holds, of every tenant.
	Jobs func() []Job
	// Overview is the cluster's TaskManagers and slots.
	Overview func() resourcemanager.Overview
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// states are the job states, each exported (as 0 when no job is in it) for
// every tenant with jobs, so a series does not vanish when a job moves on.
var states = []jobmaster.JobState{
	jobmaster.Created, jobmaster.Running, jobmaster.Failing, jobmaster.Restarting, jobmaster.Cancelling,
	jobmaster.Canceled, jobmaster.Finished, jobmaster.Failed, jobmaster.Suspended,
}

var jobLabels = []string{"job_id", "job_name", "tenant"}

func jobDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("sluice_job_"+name, help, jobLabels, nil)
}

// Collector is the JobManager's Prometheus collector.
type Collector struct {
	src Source

	jobs, uptime, restarts, fuel                      *prometheus.Desc
	cpCompleted, cpFailed, cpDuration, cpSize, cpAlig *prometheus.Desc
	tms, slotsTotal, slotsFree                        *prometheus.Desc
}

// NewCollector returns the collector reading src.
func NewCollector(src Source) *Collector {
	if src.Now == nil {
		src.Now = time.Now
	}
	return &Collector{
		src:         src,
		jobs:        prometheus.NewDesc("sluice_jobs", "Jobs the JobManager holds, by tenant and state.", []string{"tenant", "state"}, nil),
		uptime:      jobDesc("uptime_seconds", "Seconds since a job that has not ended started."),
		restarts:    jobDesc("restarts_total", "Times a job restarted after a failure."),
		fuel:        jobDesc("fuel_total", "Guest fuel of the job's current attempts, each task's latest report once (a restart starts a subtask from 0)."),
		cpCompleted: jobDesc("checkpoints_completed_total", "Checkpoints and savepoints of a job that completed."),
		cpFailed:    jobDesc("checkpoints_failed_total", "Checkpoints and savepoints of a job that failed (aborted)."),
		cpDuration:  jobDesc("last_checkpoint_duration_ms", "How long the job's last completed checkpoint took, trigger to completion."),
		cpSize:      jobDesc("last_checkpoint_size_bytes", "The state size of the job's last completed checkpoint."),
		cpAlig:      jobDesc("last_checkpoint_alignment_ms", "The longest barrier alignment of the job's tasks at their last checkpoint, as they reported it."),
		tms:         prometheus.NewDesc("sluice_taskmanagers", "TaskManagers registered with the ResourceManager.", nil, nil),
		slotsTotal:  prometheus.NewDesc("sluice_slots_total", "Task slots of every registered TaskManager.", nil, nil),
		slotsFree:   prometheus.NewDesc("sluice_slots_free", "Task slots that hold no allocation.", nil, nil),
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.uptime, c.restarts, c.fuel, c.cpCompleted, c.cpFailed, c.cpDuration, c.cpSize, c.cpAlig, c.tms, c.slotsTotal, c.slotsFree} {
		ch <- d
	}
}

// Collect reads the current figures.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.src.Now()
	byTenant := map[string]map[jobmaster.JobState]int{}
	for _, j := range c.src.Jobs() {
		d := j.Details()
		if byTenant[d.Tenant] == nil {
			byTenant[d.Tenant] = map[jobmaster.JobState]int{}
		}
		byTenant[d.Tenant][d.State]++
		lv := []string{d.JobID, d.Name, d.Tenant}
		if !d.State.Terminal() {
			ch <- prometheus.MustNewConstMetric(c.uptime, prometheus.GaugeValue, max(now.Sub(d.Start).Seconds(), 0), lv...)
		}
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(d.Restarts), lv...)
		counts := j.CheckpointCounts()
		ch <- prometheus.MustNewConstMetric(c.cpCompleted, prometheus.CounterValue, float64(counts.Completed), lv...)
		ch <- prometheus.MustNewConstMetric(c.cpFailed, prometheus.CounterValue, float64(counts.Failed), lv...)
		for _, s := range j.Checkpoints() { // newest first
			if s.Status == checkpoint.StatusCompleted {
				ch <- prometheus.MustNewConstMetric(c.cpDuration, prometheus.GaugeValue, float64(s.Duration.Milliseconds()), lv...)
				ch <- prometheus.MustNewConstMetric(c.cpSize, prometheus.GaugeValue, float64(s.Size), lv...)
				break
			}
		}
		var align int64 = -1
		for _, v := range d.Vertices {
			for _, st := range v.Subtasks {
				align = max(align, st.Metrics.LastAlignmentMs)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.fuel, prometheus.CounterValue, float64(d.Fuel()), lv...)
		if align >= 0 {
			ch <- prometheus.MustNewConstMetric(c.cpAlig, prometheus.GaugeValue, float64(align), lv...)
		}
	}
	for tenant, n := range byTenant {
		for _, s := range states {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n[s]), tenant, string(s))
		}
	}
	o := c.src.Overview()
	ch <- prometheus.MustNewConstMetric(c.tms, prometheus.GaugeValue, float64(len(o.TaskManagers)))
	ch <- prometheus.MustNewConstMetric(c.slotsTotal, prometheus.GaugeValue, float64(o.SlotsTotal))
	ch <- prometheus.MustNewConstMetric(c.slotsFree, prometheus.GaugeValue, float64(o.SlotsFree))
}
