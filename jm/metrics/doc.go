// Package metrics exports a JobManager's figures to Prometheus: a
// collector that reads the jobs (state, uptime, restarts, checkpoints) and
// the ResourceManager's slots at scrape time (docs/METRICS.md). The tasks'
// own figures are the TaskManagers' to export.
//
// It must not import tm.
package metrics
