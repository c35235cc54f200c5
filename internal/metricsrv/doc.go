// Package metricsrv serves a Prometheus registry at /metrics on its own
// HTTP address, for the JobManager and every TaskManager (docs/METRICS.md).
//
// It holds no registry of its own: each process builds one (no global
// DefaultRegisterer) with collectors that read its state at scrape time.
// It must not import jm, tm or wasmhost.
package metricsrv
