// Package executor is the TaskManager's domain: the slot table, the life of
// each deployed task (deploy, run, report, cancel), the compiled-module cache
// and the registration and heartbeat loop with the ResourceManager.
//
// It talks to the JobManager only through the small interfaces in
// remote.go, in the vocabulary of internal/control (deployments, fencing
// tokens, task updates, split requests), which tm/rpc implements over
// Kitex; it must not import idl/kitex_gen, Kitex or jm.
//
// # Task states
//
//	    DeployTask
//	        │
//	        ▼
//	   DEPLOYING ──(module fetched, inputs wired)──▶ RUNNING
//	        │                                          │
//	        │          ┌──────────────┬────────────────┤
//	        ▼          ▼              ▼                ▼
//	      FAILED    FAILED        CANCELED          FINISHED
//	(bad module)  (trap, limit)  (CancelTask,      (sources ended,
//	                              FreeSlot, stale   drained; carries
//	                              attempt, JM lost) accumulators and
//	                                                collected records)
//
// Every state is reported to the task's JobMaster in order, with the task's
// fencing token; a JobMaster that answers "stale" or "not found" no longer
// wants the task, and it is canceled.
//
// # Checkpoints
//
// TriggerCheckpoint (source tasks only) and NotifyCheckpoint hand the
// command to the task's task.Control and return at once; the task takes it
// at its next safe point. Its acknowledgements and declines travel through
// the same ordered queue as its state updates, so FINISHED never overtakes
// the task's last answer. A rejected answer is only logged: the task's fate
// is decided by its state updates.
package executor
