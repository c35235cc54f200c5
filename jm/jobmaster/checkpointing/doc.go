// Package checkpointing is the checkpoint coordinator of one job: which
// checkpoints and savepoints are in flight, which task still owes an
// acknowledgement, when a checkpoint is complete, aborted or expired, what
// its metadata says, which completed checkpoint is the restore point and
// which are subsumed.
//
// It is a state machine and nothing else: events in (Coordinator.Handle:
// the periodic timer fired, task X acknowledged or declined, a task
// finished, the metadata was written, a savepoint was asked for, the
// attempt ends, …), commands out (send a trigger to task X, write this
// metadata, commit these file-sink parts, tell the tasks, answer the
// savepoint's caller, fail the job, …). It does no IO, starts no goroutine
// and reads no clock: the JobMaster's owner goroutine feeds it each event
// with a View of the job at that moment, carries out the commands (RPCs,
// blob work, timers) and feeds their outcomes back as events. Its tests
// are therefore tables of events and the commands they must give.
//
// Why a package of its own, and why this name: the coordinator is the
// JobMaster's (one per job, driven by its goroutine), so it lives under
// jm/jobmaster; "checkpointing" names the job it does and reads well as
// checkpointing.Coordinator, where a package "coordinator" would stutter;
// internal/checkpoint stays what both it and the TaskManager share (the
// wire vocabulary, the metadata format and the blob operations on it).
//
// It must not import jm/jobmaster, idl/kitex_gen or anything that does
// IO on its behalf: it uses blob only for blob.Keys (key names) and
// internal/checkpoint for its types.
//
// # A checkpoint's states
//
//	               Tick (periodic, ≤ MaxConcurrent, MinPause kept)
//	               SavepointRequested (any time every task runs)
//	                 │  SendTrigger to every source, ArmExpiry
//	                 ▼
//	              ACKING ── Acked by every task of the attempt ──► WRITING ── Written ──► COMMITTING ── Committed ──► COMPLETED
//	                 │        (WriteMetadata: savepoint copies,      │  (restore point     │  (CommitSinkParts:             (Notify completed,
//	                 │         then the metadata, last)              │   from now on)      │   only if it has parts and     subsumed ones deleted,
//	Declined, Expired, TriggerFailed, a bad ack,                     │                     │   its attempt still runs)      savepoint answered,
//	TaskFinished (it owed an ack), AttemptEnding                     │ Written with        │                                StopTasks after a stop)
//	                 │                                               │ an error            │
//	                 ▼                                               ▼                     │
//	              ABORTED ◄──────────────────────────────────────────┘                     │
//	   (Notify aborted, DeleteDirs, savepoint answered with the reason,                    │
//	    FailJob once more than TolerableFailures periodic ones failed in a row)            │
//	                                                                                       │
//	JobEnded, in any stage: the checkpoint ends ABORTED ("the job ended …") ◄──────────────┘
//	          without deleting anything (the JobMaster's cleanup does that).
//
// Periodic checkpoints start only while every task of the attempt runs
// (View.AllRunning): the first an interval after the last task reported
// RUNNING, none after a task FINISHED; a checkpoint in ACKING whose task
// finishes is aborted (no checkpoints after tasks finish, as Flink before
// FLIP-147). Acknowledgements from older attempts never reach an ACKING
// checkpoint: the JobMaster refuses them by their fencing token and hands
// them in as LateAck, whose state object is deleted unless a checkpoint
// still uses it.
package checkpointing
