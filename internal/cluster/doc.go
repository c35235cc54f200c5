// Package cluster starts a whole Sluice cluster in one process: a JobManager
// and K TaskManagers talking real Kitex over loopback, with a file-system
// blob store. `sluice local`, `sluice run --local` and the tests use it, so
// the embedded code path is the cluster's code path.
//
// It also stages local input files in the blob store for a job
// (StageInputs), which `sluice run` does for any cluster.
package cluster
