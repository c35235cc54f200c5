// Package local starts a whole Sluice cluster in one process: a JobManager
// and K TaskManagers talking real Kitex over loopback, with a file-system
// blob store. `sluice local`, `sluice run --local` and the tests use it, so
// the embedded code path is the cluster's code path.
//
// It stands above jm and tm (it assembles them); nothing in jm, tm or
// internal imports it. Test helpers that run jobs on it are in localtest.
package local
