// Package jobmaster runs one job: it expands the job graph into tasks
// (chains × subtasks), gets slots from the ResourceManager, deploys the
// tasks to TaskManagers, follows their state reports, coordinates
// checkpoints and savepoints, restarts the job on failure from its latest
// completed checkpoint as its restart strategy allows, hands out input
// splits, commits the transactional file sink, and collects the job's
// result.
//
// Each JobMaster is one goroutine that owns all of the job's state; every
// input (task reports, checkpoint acks, split requests, lost TaskManagers,
// cancel, savepoint requests, the results of its own RPCs, blob work and
// timers) reaches it as an event on one channel, so the state machine has
// no locks. Blob IO never runs on that goroutine. Readers get a snapshot
// published after every event. It speaks to TaskManagers in the vocabulary
// of internal/control and internal/checkpoint, through TaskExecutorGateway;
// it must not import idl/kitex_gen or Kitex (jm/rpc adapts it).
//
// # Job states
//
//	CREATED ──start──► RUNNING ── every task FINISHED, final sink commit ──► FINISHED
//	                    │  ▲  │ ╲
//	a task FAILED, a    │  │  │  ╲ stop-with-savepoint completed: tasks canceled ──► FINISHED
//	TaskManager lost,   │  │  │
//	a deploy failed,    │  │  └──── Cancel ───► CANCELLING ── every task ended ──► CANCELED
//	too many failed     │  │ delay passed,          ▲          (or cancel timeout)
//	checkpoints         ▼  │ attempt+1, restore     │ Cancel
//	                 FAILING ──── every task ended ──┼──► RESTARTING ── Cancel ──► CANCELED
//	                    │   (or cancel timeout)      │    (strategy allows)
//	                    │                            │
//	                    └── strategy gives up ───────┴──► FAILED (root cause kept)
//	a task failing while CANCELLING ends CANCELED, not FAILED
//	slots not to be had (RUNNING, before deployment) ────► FAILED
//	canceled while the final sink commit cannot finish ──► FAILED
//	JobManager shutting down (any live state) ───────────► SUSPENDED
//
// # Restarts
//
// The first failure reported fails the attempt; the first cause reported
// in it is the job's failure (control.FailureKind: a task's report of a
// failure elsewhere, such as an aborted channel, is a consequence, which a
// later cause replaces). Tasks on a TaskManager a cancel call cannot reach
// count as canceled at once; the cancel timeout bounds the wait for the
// others.
//
// On failure every task of the attempt is canceled and every slot freed;
// the restart strategy (none, fixed-delay, exponential-delay, failure-rate;
// see RestartStrategy) decides whether and when the next attempt runs. The
// next attempt gets a fencing token with attempt+1, so reports of the old
// attempt are refused as stale. Before it is deployed the JobMaster
// prepares the blob store in the background (retrying while the store is
// down): it commits the restore point's file-sink parts again, deletes the
// job's uncommitted parts and every checkpoint directory that is not a
// completed checkpoint. Every task is then deployed with the state of the
// latest completed checkpoint (or of Config.Restore, possibly taken at
// another parallelism: key groups are redistributed) and text sources
// resume from the checkpoint's remaining splits. Without a checkpoint the
// attempt starts from scratch.
//
// A text source that follows its paths (jobgraph.ConfigMonitorInterval)
// is relisted every monitor interval by a goroutine of its own calling
// Config.Discover (follow.go); the loop appends the splits of objects not
// seen before and tells the coordinator in the same step, which keeps the
// keys found in each checkpoint (checkpoint.Metadata.Discovered). Such a
// source is never done while the job runs: NextSplit answers "no split
// yet" once its splits are handed out.
//
// A kafka source's splits are its partitions, relisted the same way every
// discovery interval; NextSplit hands each to the subtask that owns it
// (jobgraph.KafkaPartitionOwner), and a checkpoint of a kafka source is
// not restored at another parallelism (checkKafkaRescale).
//
// # Checkpoints
//
// The checkpoint coordinator is checkpointing.Coordinator, a state machine
// this goroutine feeds and whose commands it carries out (checkpoint.go):
// periodic checkpoints while every task runs,
// savepoints on request, metadata written last, file-sink parts committed
// only once a checkpoint's metadata exists, the job's checkpoints deleted
// when it ends FINISHED or CANCELED and kept when it ends FAILED or
// SUSPENDED (to resume from).
//
// # Slots
//
// Flink's slot sharing: subtask i of every task runs in slot i, so a job
// needs as many slots as its largest parallelism, and a slot holds one
// pipeline of the job end to end.
package jobmaster
