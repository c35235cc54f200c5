// Package proctest runs a Sluice cluster as real processes for the
// process-level tests of cmd/sluice: the sluice binary, built once per test
// binary, started as a JobManager and TaskManagers on loopback port 0 and
// driven by the same binary's client commands. Its Cluster is a
// localtest.Cluster, so these tests wait with the same helpers as the
// in-process ones.
//
// Only cmd/sluice's tests import it (nothing in jm, tm or internal may:
// internal/check's layers keep them from reaching local/ and cmd/). It
// imports local/localtest, sdk/client, blob and internal/testutil, never
// jm, tm or the RPC packages directly: it drives the cluster as a user
// does, and a test that needs a raw RPC client makes it itself.
package proctest
