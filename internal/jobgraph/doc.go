// Package jobgraph is the job graph a module declares: operators (vertices)
// with a parallelism, joined by edges that carry a partitioner. The guest SDK
// builds it while the module's plan export runs and hands it to the host as
// JSON; the JobManager validates it, chains it into tasks and schedules it.
//
// It uses the standard library only, so sdk/guest can import it when built
// for wasip1. It must not import anything from the host side.
package jobgraph
