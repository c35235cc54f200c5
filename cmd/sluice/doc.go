// Command sluice is the one binary: JobManager, TaskManager, embedded local
// cluster and the client commands.
//
// Results go to stdout; progress and logs go to stderr.
package main
