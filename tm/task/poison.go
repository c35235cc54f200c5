package task

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/wasmhost"
)

// Poison records (see docs/RATIONALE.md, "How does a task skip a record
// that trapped?")
//
// A trap leaves the guest instance unusable, and the call that trapped may
// have changed host state and guest memory (a Reduce's cached
// accumulators) before it did. So a task that skips or dead-letters keeps
// what it needs to rebuild the instance as it was before the batch:
//
//   - the state at its last checkpoint (its snapshot bytes, handed over by
//     the uploader once encoded) or at its start, with the counters then;
//   - every call since (input batches and timer firings), in order;
//   - the output of each process call, held until the call returned, so a
//     call that trapped sent nothing downstream.
//
// On a trap: drop the held output, rebuild (fresh instance on the
// snapshot, replay the calls since with their output dropped: it went out
// already), then hand the batch's records one at a time. A record that
// traps is poison: counted, dead-lettered, and the instance rebuilt again
// before the next record. The same record traps on every replay of the
// job, so the decision is the same after a restore; the dead-letter
// records go through a transactional file sink, committed with the
// checkpoints like any file sink's parts.
//
// With the policy fail nothing is kept: the task fails, but first finds
// the record to name by handing the batch one record at a time to a fresh
// instance on the state as it is (output dropped).

// maxReplayBytes bounds the input a skipping task keeps since its last
// checkpoint; a trap beyond it fails the task, asking for a shorter
// checkpoint interval.
const maxReplayBytes = 64 << 20

// Accumulator names of the records a task dropped (job result, REST).
const (
	AccPoisonSkipped      = "sluice.poison-records.skipped"
	AccPoisonDeadLettered = "sluice.poison-records.dead-lettered"
)

// poisonEntry names the poison counts in a subtask's state (a host
// entry of the chain's head vertex), so they survive a restore.
const poisonEntry = "poison-"

// poison is a task's poison-record handling; nil fields mean off.
type poison struct {
	policy jobgraph.PoisonPolicy
	conf   jobconfig.Poison
	mod    *wasmhost.Module

	// counts, kept in state at every checkpoint
	skipped, deadLettered, in int64

	// replay (skip and dead-letter only)
	replay   bool
	steps    []replayStep
	logBytes int
	overflow bool             // the steps outgrew maxReplayBytes
	base     []byte           // the state at the last checkpoint or the start; nil: empty
	atBase   map[string]int64 // the counters then, of every instance so far
	carried  map[string]int64 // the counters of the instances replaced
	baseMu   sync.Mutex
	waitID   int64         // the checkpoint whose snapshot is awaited, 0: none
	ready    chan struct{} // closed when it arrived
	pending  []byte        // it, once arrived

	// the guest's output
	dropping bool // replaying: output went out already
	holding  bool // a process call runs: hold its output
	held     []abi.Record
	arena    []byte

	dlq *fileSink
}

// replayStep is one call since the base: a batch (encoded) or a timer
// firing at timersAt.
type replayStep struct {
	batch    []byte
	timersAt int64
}

// newPoison sets up the policy of the task's chain.
func (t *task) newPoison() error {
	conf := t.spec.Config.Poison
	p := &poison{policy: jobgraph.ChainPoisonPolicy(t.guest, conf.Policy), conf: conf,
		atBase: map[string]int64{}, carried: map[string]int64{}}
	t.pz = p
	if len(t.guest) == 0 || p.policy == jobgraph.PoisonFail {
		return nil
	}
	// A guest source's poll runs the whole chain: no record to drop.
	p.replay = !t.guestSource()
	if p.policy == jobgraph.PoisonDeadLetter {
		if conf.DeadLetterPath == "" {
			return fmt.Errorf("the chain dead-letters poison records but the job sets no %s: set it to the directory, under your files, the dead-letter records go to", jobconfig.KeyDeadLetterPath)
		}
		if t.deps.Blob == nil {
			return errors.New("a dead-letter sink needs Deps.Blob")
		}
		head := t.guest[0]
		s, err := openFileSink(t.spec, conf.DeadLetterPath, fmt.Sprintf("dead-letter-%d-%d-a%d", head.ID, t.spec.Subtask, t.spec.Attempt), t.deps.Blob, t.ctl.completedMax)
		if err != nil {
			return fmt.Errorf("dead-letter sink: %w", err)
		}
		p.dlq = s
	}
	return nil
}

// dropsRecords reports whether the task skips or dead-letters.
func (p *poison) dropsRecords() bool {
	return p != nil && p.policy != jobgraph.PoisonFail && p.policy != ""
}

// guestEmit is the guest's Emit: output is dropped while replaying, held
// during a process call that may trap, passed on otherwise.
func (t *task) guestEmit(recs []abi.Record) error {
	p := t.pz
	switch {
	case p.dropping:
		return nil
	case p.holding:
		for _, r := range recs {
			r.Key = p.keep(r.Key)
			r.Value = p.keep(r.Value)
			p.held = append(p.held, r)
		}
		return nil
	}
	return t.emit(recs)
}

func (p *poison) keep(b []byte) []byte {
	if b == nil {
		return nil
	}
	start := len(p.arena)
	p.arena = append(p.arena, b...)
	return p.arena[start:len(p.arena):len(p.arena)]
}

// release passes the held output on (send) or drops it.
func (t *task) release(send bool) error {
	p := t.pz
	held := p.held
	p.held, p.arena = p.held[:0], p.arena[:0]
	if !send || len(held) == 0 {
		return nil
	}
	// The records point into the arena, which is not reused until emit
	// returns.
	err := t.emit(held)
	clear(held)
	return err
}

// logStep keeps a call that succeeded, for a rebuild.
func (p *poison) logStep(s replayStep) {
	if !p.replay || p.overflow {
		return
	}
	p.logBytes += len(s.batch) + 16
	if p.logBytes > maxReplayBytes {
		p.overflow = true
		p.steps = nil
		return
	}
	if s.batch != nil {
		s.batch = bytes.Clone(s.batch)
	}
	p.steps = append(p.steps, s)
}

// poisonous reports whether err is a failure of the guest that the same
// record causes again on every replay: a trap, an exit, a stack overflow
// or an error the guest reported. A wall-clock deadline and a memory or
// state limit depend on more than the record.
func poisonous(err error) (*wasmhost.GuestError, bool) {
	var ge *wasmhost.GuestError
	if !errors.As(err, &ge) {
		return nil, false
	}
	switch {
	case errors.Is(ge.Cause, wasmhost.ErrTrap), errors.Is(ge.Cause, wasmhost.ErrGuestFailed),
		errors.Is(ge.Cause, wasmhost.ErrExit), errors.Is(ge.Cause, wasmhost.ErrStackOverflow):
		return ge, true
	}
	return ge, false
}

// processGuarded is process for a task that drops poison records.
func (t *task) processGuarded(ctx context.Context, recs []abi.Record, enc []byte) error {
	p := t.pz
	if enc == nil {
		enc = abi.AppendBatch(nil, recs)
	}
	p.holding = true
	err := t.inst.ProcessEncoded(ctx, enc)
	p.holding = false
	if err == nil {
		if err := t.release(true); err != nil {
			return err
		}
		p.logStep(replayStep{batch: enc})
		return nil
	}
	if err := t.release(false); err != nil {
		return err
	}
	if _, ok := poisonous(err); !ok || ctx.Err() != nil {
		return err
	}
	if p.overflow {
		return fmt.Errorf("task %s: a record among %s failed the guest, and the task read more than %d MiB since its last checkpoint, which is more than it keeps to find and %s the record: "+
			"set %s shorter (or turn checkpoints on): %w", t.spec.ExecutionID, t.batchRange(len(recs)), maxReplayBytes>>20, p.policy, jobconfig.KeyCheckpointInterval, err)
	}
	t.log.Info("a batch failed the guest: rebuilding the instance to find the poison record", "records", len(recs), "err", oneLine(err))
	if err := t.rebuild(ctx); err != nil {
		return err
	}
	for i := 0; i < len(recs); {
		// One at a time until one fails: that one is poison.
		var ge *wasmhost.GuestError
		for ; i < len(recs); i++ {
			if ge, err = t.guardedCall(ctx, abi.AppendBatch(nil, recs[i:i+1])); err != nil {
				return err
			}
			if ge != nil {
				break
			}
		}
		if ge == nil {
			return nil
		}
		if err := t.dropRecord(ctx, recs[i], t.recordPos(i), ge); err != nil {
			return err
		}
		if err := t.rebuild(ctx); err != nil {
			return err
		}
		i++
		if i == len(recs) {
			return nil
		}
		// The rest in one call, as it would have gone; another poison
		// record in it means one at a time again, from a rebuild.
		if ge, err = t.guardedCall(ctx, abi.AppendBatch(nil, recs[i:])); err != nil || ge == nil {
			return err
		}
		if err := t.rebuild(ctx); err != nil {
			return err
		}
	}
	return nil
}

// guardedCall hands enc to the guest with its output held: passed on and
// the call logged when it succeeded; dropped when it failed, reporting a
// poisonous failure as ge and any other as err.
func (t *task) guardedCall(ctx context.Context, enc []byte) (ge *wasmhost.GuestError, err error) {
	p := t.pz
	p.holding = true
	err = t.inst.ProcessEncoded(ctx, enc)
	p.holding = false
	if err == nil {
		if err := t.release(true); err != nil {
			return nil, err
		}
		p.logStep(replayStep{batch: enc})
		return nil, nil
	}
	if err := t.release(false); err != nil {
		return nil, err
	}
	ge, ok := poisonous(err)
	if !ok || ctx.Err() != nil {
		return nil, err
	}
	return ge, nil
}

// dropRecord counts a poison record, dead-letters it, and fails the task
// when the task dropped more than its config allows.
func (t *task) dropRecord(ctx context.Context, r abi.Record, pos recordPos, ge *wasmhost.GuestError) error {
	p := t.pz
	if p.policy == jobgraph.PoisonDeadLetter {
		p.deadLettered++
		line, err := t.deadLetter(r, pos, ge)
		if err != nil {
			return err
		}
		p.dlq.write([]abi.Record{{Value: line}})
	} else {
		p.skipped++
	}
	dropped := p.skipped + p.deadLettered
	t.log.Warn("poison record dropped", "policy", p.policy, "position", pos.String(), "dropped", dropped, "err", oneLine(ge))
	if !p.conf.Allowed(dropped, p.in) {
		limit := fmt.Sprintf("%s=%d", jobconfig.KeyPoisonMaxPerMillion, max(p.conf.MaxPerMillion, 1))
		if p.conf.MaxCount != nil && dropped > int64(*p.conf.MaxCount) {
			limit = fmt.Sprintf("%s=%d", jobconfig.KeyPoisonMaxCount, *p.conf.MaxCount)
		}
		return fmt.Errorf("task %s: %d poison records among the %d records read are more than %s allows; the last was the record at %s: %w",
			t.spec.ExecutionID, dropped, p.in, limit, pos, ge)
	}
	return nil
}

// deadLetterRecord is one line of the dead-letter files.
type deadLetterRecord struct {
	Job        string   `json:"job"`
	Task       string   `json:"task"`
	Operators  []string `json:"operators"`
	Subtask    int      `json:"subtask"`
	Attempt    int64    `json:"attempt"`
	Module     string   `json:"module"`
	Checkpoint int64    `json:"checkpoint"`
	Position   string   `json:"position"`
	Object     string   `json:"source_object,omitempty"`
	Offset     *int64   `json:"source_offset,omitempty"`
	Input      *int     `json:"input,omitempty"`
	Producer   *int     `json:"producer,omitempty"`
	Record     *int64   `json:"input_record,omitempty"`
	Function   string   `json:"function"`
	Cause      string   `json:"cause"`
	Message    string   `json:"message"`
	Stack      string   `json:"stack,omitempty"`
	Output     string   `json:"output,omitempty"`
	Key        []byte   `json:"key,omitempty"`
	Value      []byte   `json:"value"`
	ValueText  *string  `json:"value_text,omitempty"`
	Time       int64    `json:"time,omitempty"`
}

func (t *task) deadLetter(r abi.Record, pos recordPos, ge *wasmhost.GuestError) ([]byte, error) {
	d := deadLetterRecord{
		Job: t.spec.JobID, Task: t.spec.ExecutionID, Subtask: t.spec.Subtask, Attempt: t.spec.Attempt,
		Module: t.spec.ModuleDigest, Checkpoint: t.lastID, Position: pos.String(),
		Function: ge.Function, Cause: ge.Cause.Error(), Message: ge.Message, Stack: guestStack(ge), Output: ge.Output,
		Key: r.Key, Value: r.Value,
	}
	if r.HasTime {
		d.Time = r.Time
	}
	for _, v := range t.guest {
		d.Operators = append(d.Operators, v.Name)
	}
	if pos.object != "" {
		d.Object, d.Offset = pos.object, &pos.offset
	} else {
		d.Input, d.Producer, d.Record = &pos.gate, &pos.producer, &pos.record
	}
	if utf8.Valid(r.Value) {
		s := string(r.Value)
		d.ValueText = &s
	}
	b, err := sonic.ConfigStd.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("task %s: encode a dead-letter record: %w", t.spec.ExecutionID, err)
	}
	return b, nil
}

// guestStack is the guest's stack at the failure: wazero's Wasm stack of a
// trap, or the stack a guest reported with its error (the Go SDK puts a
// panic's goroutine stack after a blank line).
func guestStack(ge *wasmhost.GuestError) string {
	if ge.Stack != "" {
		return ge.Stack
	}
	if _, after, ok := strings.Cut(ge.Message, "\n\n"); ok {
		return after
	}
	return ""
}

func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// markBase makes the task's state at checkpoint id (just frozen) the base
// of a rebuild: the uploader hands its snapshot over once encoded.
func (t *task) markBase(id int64) {
	p := t.pz
	if !p.replay {
		return
	}
	p.steps, p.logBytes, p.overflow = p.steps[:0], 0, false
	p.atBase = t.counters()
	p.baseMu.Lock()
	p.waitID, p.ready, p.pending = id, make(chan struct{}), nil
	p.baseMu.Unlock()
}

// deliverBase is the uploader's: snap is checkpoint id's encoded state,
// valid only during the call.
func (p *poison) deliverBase(id int64, snap []byte) {
	if p == nil || !p.replay {
		return
	}
	p.baseMu.Lock()
	defer p.baseMu.Unlock()
	if id == p.waitID && p.pending == nil {
		p.pending = bytes.Clone(snap)
		close(p.ready)
	}
}

// baseState returns a fresh State as of the base.
func (t *task) baseState(ctx context.Context) (*wasmhost.State, error) {
	p := t.pz
	p.baseMu.Lock()
	id, ready := p.waitID, p.ready
	p.baseMu.Unlock()
	if id != 0 {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.up.done:
			select {
			case <-ready:
			default:
				return nil, fmt.Errorf("task %s: the snapshot of checkpoint %d was not encoded (checkpoint uploads stopped)", t.spec.ExecutionID, id)
			}
		}
		p.baseMu.Lock()
		p.base, p.waitID = p.pending, 0
		p.baseMu.Unlock()
	}
	maxP := t.spec.MaxParallelism
	if maxP == 0 {
		maxP = jobgraph.DefaultMaxParallelism
	}
	start, end := keygroup.Range(t.spec.Subtask, t.spec.Parallelism, maxP)
	st := wasmhost.NewState(maxP, start, end)
	if p.base != nil {
		if err := st.Restore(bytes.NewReader(p.base)); err != nil {
			return nil, fmt.Errorf("task %s: restore the state of the last checkpoint: %w", t.spec.ExecutionID, err)
		}
	}
	return st, nil
}

// rebuild replaces the failed instance by a fresh one as it was after the
// last call that succeeded: the base state, then the calls since, with
// their output dropped (it went out already).
func (t *task) rebuild(ctx context.Context) error {
	p := t.pz
	if err := t.inst.Close(ctx); err != nil {
		t.log.Debug("closing the failed guest instance", "err", err)
	}
	st, err := t.baseState(ctx)
	if err != nil {
		return err
	}
	p.carried = maps.Clone(p.atBase)
	p.dropping = true
	defer func() { p.dropping = false }()
	inst, err := t.newInstance(ctx, st)
	if inst != nil {
		t.setInstance(inst) // closed by the task's cleanup, even when it failed
	}
	if err != nil {
		return fmt.Errorf("task %s: rebuild the guest instance: %w", t.spec.ExecutionID, err)
	}
	for i, s := range p.steps {
		if s.batch != nil {
			err = inst.ProcessEncoded(ctx, s.batch)
		} else {
			err = inst.FireTimers(ctx, s.timersAt)
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("task %s: rebuilding the guest instance, call %d of the %d since the last checkpoint failed, which succeeded before: "+
				"the guest is not deterministic, so poison records cannot be skipped exactly once (set %s=fail): %w",
				t.spec.ExecutionID, i+1, len(p.steps), jobconfig.KeyPoisonRecords, err)
		}
	}
	return nil
}

// counters are the guest's counters of every instance the task ran.
func (t *task) counters() map[string]int64 {
	out := maps.Clone(t.pz.carried)
	if t.inst != nil {
		for k, v := range t.inst.Counters() {
			out[k] += v
		}
	}
	return out
}

// accumulators are counters plus the poison counts, for the Result.
func (t *task) accumulators() map[string]int64 {
	out := t.counters()
	// The policy's own count is there even when zero, so a user sees it.
	if p := t.pz; p.policy == jobgraph.PoisonSkip || p.skipped > 0 {
		out[AccPoisonSkipped] += p.skipped
	}
	if p := t.pz; p.policy == jobgraph.PoisonDeadLetter || p.deadLettered > 0 {
		out[AccPoisonDeadLettered] += p.deadLettered
	}
	return out
}

// snapshotPoison puts the poison counts into st before a checkpoint.
func (t *task) snapshotPoison(st *wasmhost.State) {
	p := t.pz
	if !p.dropsRecords() {
		return
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(p.skipped))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.deadLettered))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.in))
	st.PutHostEntry(t.guest[0].ID, fmt.Sprintf("%s%d", poisonEntry, t.spec.Subtask), b)
}

// restorePoison takes the poison counts out of restored state (summed,
// after a rescale).
func (t *task) restorePoison(st *wasmhost.State) {
	p := t.pz
	for _, b := range st.TakeHostEntries(t.guest[0].ID, poisonEntry) {
		if len(b) != 24 {
			continue
		}
		p.skipped += int64(binary.LittleEndian.Uint64(b))
		p.deadLettered += int64(binary.LittleEndian.Uint64(b[8:]))
		p.in += int64(binary.LittleEndian.Uint64(b[16:]))
	}
}

// encodeBase makes a restored state the base of a rebuild.
func (t *task) encodeBase(st *wasmhost.State) {
	if !t.pz.replay {
		return
	}
	f := st.Freeze()
	t.pz.base = f.AppendTo(nil)
	f.Release()
}

// recordPos is where a record of the batch being processed came from.
type recordPos struct {
	object   string // text source: the blob object and byte offset
	offset   int64
	gate     int // else: the input, producer subtask and record number
	producer int
	record   int64
	result   string
}

func (p recordPos) String() string {
	if p.object != "" {
		return fmt.Sprintf("byte offset %d of %s", p.offset, p.object)
	}
	return fmt.Sprintf("input %d (%s), record %d from producer subtask %d (counted from the task's start)", p.gate, p.result, p.record, p.producer)
}

// batchPos is where the batch being processed came from: a text source's
// lines or a run of records of one input channel.
type batchPos struct {
	objects []string // per record, for a text source
	offsets []int64
	gate    int
	prod    int
	first   int64
}

func (t *task) recordPos(i int) recordPos {
	b := &t.bpos
	if b.offsets != nil {
		return recordPos{object: b.objects[i], offset: b.offsets[i]}
	}
	r := recordPos{gate: b.gate, producer: b.prod, record: b.first + int64(i)}
	if b.gate < len(t.spec.Inputs) {
		r.result = "result " + t.spec.Inputs[b.gate].ResultID
	}
	return r
}

func (t *task) batchRange(n int) string {
	if n == 1 {
		return "the record at " + t.recordPos(0).String()
	}
	return fmt.Sprintf("the %d records from %s to %s", n, t.recordPos(0), t.recordPos(n-1))
}

// locate finds, for the policy fail, the record of the batch that failed
// the guest: it hands the records one at a time to a fresh instance on the
// task's state as it is (their output dropped: the task fails anyway) and
// returns the error to fail with.
func (t *task) locate(ctx context.Context, recs []abi.Record, err error) error {
	if _, ok := poisonous(err); !ok || ctx.Err() != nil || len(recs) == 0 {
		return err
	}
	hint := fmt.Sprintf("set %s=skip or dead-letter to go on without such records", jobconfig.KeyPoisonRecords)
	if len(recs) == 1 {
		return fmt.Errorf("task %s: the record at %s failed the guest (%s): %w", t.spec.ExecutionID, t.recordPos(0), hint, err)
	}
	p := t.pz
	p.dropping = true
	defer func() { p.dropping = false }()
	probe, perr := t.newInstance(ctx, t.inst.State())
	if perr == nil {
		defer probe.Close(ctx)
		for i := range recs {
			if e := probe.Process(ctx, recs[i:i+1]); e != nil {
				if _, ok := poisonous(e); ok {
					return fmt.Errorf("task %s: the record at %s failed the guest (%s): %w", t.spec.ExecutionID, t.recordPos(i), hint, e)
				}
				break
			}
		}
	}
	return fmt.Errorf("task %s: one of %s failed the guest (%s): %w", t.spec.ExecutionID, t.batchRange(len(recs)), hint, err)
}
