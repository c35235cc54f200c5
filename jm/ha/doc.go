// Package ha is the JobManager's high availability: a leader election and
// a job store, behind the small interfaces Elector, Leadership and
// JobStore, with an etcd implementation (NewEtcd) and an in-memory one for
// tests (NewMemory).
//
// The leader's session (control.HASession of its election revision) is
// the leader-session part of every fencing token it issues. Every write
// to the job store is a transaction conditioned on the leader's election
// key still existing with its revision, so a deposed leader — one whose
// lease expired while it was paused — cannot change the store: its writes
// fail with ErrNotLeader, and the JobManager stops acting.
//
// It must not import the Kitex packages, tm/... or the rest of jm/...:
// the dispatcher and the server use it, not the other way round.
package ha
