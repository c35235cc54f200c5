// Package leader finds the leader JobManager of a highly available cluster
// in etcd: the etcd:// URL that names the cluster, the key layout every
// process shares, a connection that retries an unreachable etcd with
// backoff, and the lookup of the elected leader's address and session.
// The election and the job store themselves are jm/ha's.
//
// It must not import jm/..., tm/... or the Kitex packages: TaskManagers,
// the client and the CLI all use it.
package leader
