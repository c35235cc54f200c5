// Package exchange moves records between tasks: the TaskManager's data plane.
//
// A Manager owns one data port. Producers write through a ResultWriter, which
// partitions records (forward, hash by key group, rebalance, broadcast) into
// per-channel buffers of serialized records (internal/abi encoding, about
// 32 KiB each). A consumer subtask reads through an InputGate that merges the
// channels of all producer subtasks feeding it. A channel is identified by
// (result id, producer subtask, consumer subtask).
//
// When producer and consumer live in the same Manager (the target address is
// the Manager's own address) buffers pass through a bounded in-memory queue.
// Otherwise they travel over one TCP connection per pair of Managers (per
// direction), with the logical channels multiplexed over it. Both paths use
// the same credit-based flow control, as Flink's network stack: the consumer
// grants each channel a number of buffers it can accept, the producer sends
// only with credit, and the consumer returns a credit when it has consumed a
// buffer. Memory stays bounded per channel and a slow consumer back-pressures
// its producers; nothing is dropped.
//
// Events (END_OF_PARTITION, CHECKPOINT_BARRIER) travel in-band, after the
// records written before them. For barrier alignment a consumer can hold
// back a channel that delivered a barrier (InputGate.Block): its elements
// stay queued and its credits are not returned, so that producer stops
// while the others catch up; UnblockAll lets it go on.
//
// Control messages never travel here: they stay on Kitex. Inputs and outputs
// are opened from the control.InputSpec and control.OutputSpec of a task's
// deployment, plus the subtask that opens them. This package must not import
// jm, wasmhost, idl/kitex_gen, Kitex or other tm packages.
//
// # Wire format
//
// Every frame is a 9-byte header followed by a payload:
//
//	u8  type
//	u32 channel id (little-endian; 0 for connection-level frames)
//	u32 payload length (little-endian; at most the receiver's max buffer size)
//
// The producer dials and sends HELLO (magic "SLXC", u16 protocol version,
// u16 token length, token); the consumer answers HELLO_OK (u16 version,
// u32 max frame size) or ERROR and closes. Then, per channel: the producer
// sends OPEN (u32 producer subtask, u32 consumer subtask, result id); the
// consumer answers CREDIT (u32 count) to accept or REJECT (u8 code, message;
// code 1 "not registered yet" is retried by the producer until
// Config.RegistrationTimeout). Data flows as BUFFER (an abi batch: u32 record
// count, then records as abi.AppendRecord writes them) and EVENT (u8 type,
// i64 checkpoint id), each consuming one credit; the consumer returns credits
// with CREDIT frames. CLOSE (u8 code, message) ends a channel early from
// either side: code 1 aborts it (a producer that went away without
// END_OF_PARTITION, a consumer that stopped reading), code 2 withdraws an
// OPEN the producer gave up waiting for, so the consumer forgets the channel. ERROR (message) reports a fatal connection error, e.g. a frame
// longer than the limit, just before the sender closes the connection.
package exchange
