// Package task runs one deployed task: a chain of operators executing as
// one unit, from its input (a host text source, a guest source, or the
// exchange's input gates) through one wasmhost instance running the chain's
// guest operators, to its output (the host collect sink, or the exchange's
// result writers).
//
//	inputs ──▶ [host text source] ──▶ guest operators (one instance) ──▶ [host collect or file sink]
//	 (splits, gates, or a guest source)                                   or result writers
//
// Run is the whole life of a task: open (restoring state from a checkpoint
// when Spec.Restore says so), run, end of input, finish, close. It returns
// when the task FINISHED (nil error), was canceled (an error wrapping
// context.Canceled), or FAILED (the error; a guest failure is a
// *wasmhost.GuestError).
//
// Checkpoints: a source takes the triggers that reach it through a Control;
// a task with inputs aligns the barriers of its input channels. Either way
// it calls the guest's barrier hooks, snapshots its State, forwards the
// barrier and uploads in the background, answering through Checkpoints
// (see checkpoint.go). The transactional file sink (filesink.go) writes
// part files that the JobMaster commits; the JetStream sink (jetstream.go)
// and the Kafka sink (kafkasink.go) hold each checkpoint's records in the
// task's state and deliver them when the notification that it completed
// comes.
//
// Host connectors to outside systems: the JetStream source and sink
// (jetstream.go) and the Kafka source (kafka.go), each keeping its
// position in a host entry of the task's state.
//
// Its inputs and outputs are internal/control's specs and its splits are
// checkpoint.Split, as the JobMaster sent them. It must not import jm,
// idl/kitex_gen or Kitex; tm/executor drives it.
package task
