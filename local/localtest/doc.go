// Package localtest holds helpers for tests that run jobs on a real
// cluster: the Cluster interface and its embedded implementation bound to
// a test, the wait helpers every test tier shares (a job's state, slots,
// TaskManagers, a result), guests built from source, a deterministic text
// generator and the coreutils word-count oracle. Only tests import it;
// nothing in jm, tm or internal does.
package localtest
