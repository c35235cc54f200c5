// Package jobconfig is a job's configuration: the keys a client sets when
// it submits a job, parsed and validated once, at the Dispatcher, into a
// Config that the JobMaster, its restart strategy and checkpoint
// coordinator, and every task take their part of.
//
// # The table
//
// Every key is declared once, in the table in table.go: its name, its
// default and its documentation, with the code that parses it into its
// field of Config and writes it back. Parse walks that table, so a key
// cannot be accepted without being documented, and a key that is not in
// the table is an error that names the nearest known one. Keys lists the
// table for documentation and help output. Map writes a Config back in its
// canonical form (the wire form and what a savepoint may store), and
// Parse(c.Map()) gives c again, without its secrets (secret.NAME keys), for
// every c that Parse returned.
//
// The keys are Flink's where Flink has one (restart-strategy.*,
// execution.checkpointing.*, state.checkpoints.num-retained,
// execution.checkpointing.externalized-checkpoint-retention); Sluice's own
// are inputs and sandbox.clock.
//
// # Imports
//
// jobconfig imports only the standard library, sonic (for the inputs
// JSON) and at most internal/jobgraph. It must not import jm, tm,
// wasmhost, sdk/client, internal/rpcerr or Kitex: it is the vocabulary all
// of them share, so its errors are plain and the Dispatcher classifies
// them (ErrInvalidArgument).
package jobconfig
