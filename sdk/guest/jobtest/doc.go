//go:build !wasip1

// Package jobtest is the job test harness: it runs a Sluice job, or one
// task of it, inside `go test`, with no cluster — Flink's operator test
// harness and MiniCluster in one — and runs the same test against the
// compiled module in wazero, so a test shows that the job behaves the same
// both ways.
//
// # Modes
//
// [Native] runs the job registered with guest.Job in the test binary as Go
// code: the test is a test of the job's package main, whose init
// registers it. [Wasm] builds the job's directory as `sluice run` does
// (internal/guestbuild: Go, C, Rust or AssemblyScript) and runs the module
// in wasmhost, the TaskManager's sandbox. In both, the task's keyed state,
// operator state, timers and snapshots are a wasmhost.State, the
// TaskManager's own store, and every host call follows docs/ABI.md: which
// export may emit, keys only in the task's key groups, the state limit,
// the statuses. A misuse fails the task with the same *wasmhost.GuestError
// cause and message in both modes. [Run] runs a test in both modes as
// subtests; [Identical] runs it in both and fails unless the results are
// equal.
//
// # A task
//
// [Mode.Open] starts a chain of the job's guest operators, by name, as one
// subtask of a parallelism:
//
//	task, err := m.Open(ctx, jobtest.TaskConfig{Args: args, Operators: []string{"count", "format"}})
//	err = task.ProcessKeyed("to", "", "be", "", "to", "")   // one input batch
//	err = task.AdvanceProcessingTime(10)                     // fires the timers due
//	snap, err := task.Barrier(1)                             // the barrier hooks, then the snapshot
//	err = task.EndInput()
//	lines := task.OutputValues()
//	err = task.Close()
//
// TaskConfig.Restore starts a task from snapshots, at the parallelism they
// were taken at or another (keyed state and timers move by key group,
// operator state to the subtask holding the old subtask's first key group);
// a snapshot taken in one mode restores in the other. Processing time is
// the test's: it moves only when the test sets it.
//
// # A job
//
// [Mode.RunJob] runs the whole bounded job: it plans and chains it as the
// JobManager does, runs each task's subtasks one after another in
// topological order, routes records by the edges' partitioners, feeds text
// sources from JobConfig.Inputs or files and polls guest sources to their
// end, and returns what the collect and file sinks received with the
// counters.
//
// # Limits
//
// Checkpoints of a whole job, failures and restarts are the cluster's and
// are tested there (local/localtest); the harness takes snapshots of one
// task. Event time: [Task.SetWatermark] moves a task's watermark as an
// input watermark does (event-time timers fire), and a Go source's own
// watermarks are in [Task.EmittedWatermarks]; RunJob does not generate or
// forward watermarks (a bounded job's end fires every event timer, as
// END_OF_PARTITION does on a cluster).
//
// It must not import the cluster (jm, tm, local, cmd, sdk/client, blob).
package jobtest
