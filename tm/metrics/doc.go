// Package metrics exports a TaskManager's figures to Prometheus: a
// collector that reads the executor's task metrics, guest failures and slot
// table at scrape time (docs/METRICS.md), so nothing on the hot path calls
// into Prometheus.
//
// It must not import jm.
package metrics
