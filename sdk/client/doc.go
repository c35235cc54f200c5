// Package client is the Go client for a Sluice JobManager: upload modules,
// submit jobs, list, inspect, wait for and cancel them. The CLI is built on it.
// StageInputs uploads the local files a job's --input arguments name to the
// cluster's blob store before it is submitted.
// It is one of the RPC adapters that import idl/kitex_gen.
package client
