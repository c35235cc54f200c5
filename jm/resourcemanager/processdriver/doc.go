// Package processdriver is the ResourceManager's process driver: it starts
// `sluice tm` child processes on this machine that register with this
// JobManager, writes each one's output to a log file, and stops them when
// they are released or the JobManager shuts down. It suits the embedded
// cluster and small setups on one machine.
//
// It must not import idl/kitex_gen or the TaskManager packages: the
// TaskManagers it starts are separate processes.
package processdriver
