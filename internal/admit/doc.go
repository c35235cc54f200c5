// Package admit bounds how much work runs at once, per key (a tenant) and in
// all: the JobManager's plans and both processes' module compiles go through
// a Gate, so one tenant's uploads and plans cannot take every worker and
// delay another tenant's.
//
// It uses the standard library only and knows nothing of the cluster.
package admit
