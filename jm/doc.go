// Package jm is the JobManager: the Dispatcher (the front door for clients),
// the ResourceManager with its SlotManager (TaskManagers, slots, heartbeats)
// and one JobMaster per job (execution graph, scheduling, restarts).
//
// Subpackages hold each part; package jm wires them into one process that
// serves every service on one Kitex port. Only the rpc adapters import
// idl/kitex_gen. It must not import tm.
package jm
