// Package control is the vocabulary the JobManager and its TaskManagers
// speak on the control plane, declared once: a task's deployment and the
// fencing token that guards it, its sandbox limits, its inputs and outputs,
// its state reports and its requests for input splits (control.go), and a
// TaskManager's registration and heartbeats with the ResourceManager
// (registration.go).
//
// The checkpoint messages (checkpoint.Trigger, Ack, Decline, TaskRestore)
// and the input split (checkpoint.Split, which checkpoints record) are
// declared in internal/checkpoint and used here as they are.
//
// jm/jobmaster and jm/resourcemanager build or take these values and
// tm/executor, tm/task and tm/exchange consume or send them; the RPC
// adapters convert them to and from Thrift in one place, internal/rpcwire.
//
// This package holds plain data only: it imports the standard library,
// internal/jobgraph, internal/checkpoint and internal/jobconfig, and must
// not import idl/kitex_gen, Kitex, jm, tm or wasmhost.
package control
