// Package internal holds plumbing shared by the JobManager, TaskManager and
// tools that no user imports: the job graph model, the ABI wire format,
// test helpers and the check command.
package internal
