package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/wasmhost"
)

// Spec is one deployed task: which chain it runs, as which subtask, and
// where its records come from and go to.
type Spec struct {
	ExecutionID  string
	JobID        string
	Tenant       string
	ModuleDigest string
	Args         []string
	// Chain is the whole chain in order, including host connector vertices:
	// a text source at the head and/or a collect sink at the tail, with the
	// guest operators (possibly none) between.
	Chain []jobgraph.Vertex
	// Subtask of Parallelism; MaxParallelism is the job's number of key
	// groups (0 means jobgraph.DefaultMaxParallelism).
	Subtask, Parallelism, MaxParallelism int
	// Inputs feed the chain's head when it is not a source.
	Inputs []control.InputSpec
	// Outputs receive the chain tail's records (each record goes to every
	// output) when the tail is not a collect sink.
	Outputs []control.OutputSpec
	// Config is the job's parsed config.
	Config jobconfig.Config
	// Attempt is the job attempt (the fencing token's) the task belongs to;
	// it names the file sink's parts, so attempts never share one.
	Attempt int64
	// Restore, when set, is the checkpoint the task's guest state starts
	// from: every snapshot whose key groups overlap the subtask's is merged
	// (several after a rescale). Text sources restore nothing: the
	// JobMaster hands them the splits that were left.
	Restore *checkpoint.TaskRestore
}

// ModuleSource gives the compiled module of a tenant by digest (fetched
// from the blob store, verified, compiled and cached), held for the task
// until it calls release, so the cache never evicts it under the task.
type ModuleSource interface {
	Module(ctx context.Context, tenant, digest string) (mod *wasmhost.Module, release func(), err error)
}

// SplitSource hands a text-source task its input splits, one at a time;
// done reports that there are no more. A zero split with done false is
// "no split yet" (a source that follows its paths): ask again later.
type SplitSource interface {
	NextSplit(ctx context.Context) (split checkpoint.Split, done bool, err error)
}

// Deps are the TaskManager services a task uses.
type Deps struct {
	Runtime *wasmhost.Runtime
	Modules ModuleSource
	// Splits is required when the chain's head is a text source.
	Splits SplitSource
	// Blob holds the objects splits refer to.
	Blob     blob.Store
	Exchange *exchange.Manager
	Logger   *slog.Logger
	// OnRunning, when set, is called once the task is open: inputs
	// registered, guest instance open, outputs connected.
	OnRunning func()
	// Limits bound the guest instance; zero fields take wasmhost's
	// defaults.
	Limits wasmhost.Limits
	// Control delivers the JobMaster's checkpoint triggers and
	// notifications to the running task; nil means none arrive (barriers
	// from inputs are still aligned, snapshotted and forwarded).
	Control *Control
	// Checkpoints receives the task's acknowledgements and declines; nil
	// drops them.
	Checkpoints Checkpoints
	// OnInstance, when set, is handed the task's guest instance once it
	// exists, so its stacks can be sampled from another goroutine.
	OnInstance func(*wasmhost.Instance)
	// Metrics, when set, counts what the task does (see Metrics); nil
	// counts nothing.
	Metrics *Metrics
	// KafkaGiveUp is how long a kafka source goes on without an answer
	// from any broker before it fails; zero means DefaultKafkaGiveUp.
	KafkaGiveUp time.Duration
}

// Result is what a FINISHED task hands back.
type Result struct {
	// Accumulators are the guest's counters, also when the task was
	// canceled.
	Accumulators map[string]int64
	// Collected are the values of the records that reached a collect sink
	// and that no checkpoint acknowledgement carried, copied, in the order
	// they arrived; CollectedFrom is the task's index of the first.
	Collected     [][]byte
	CollectedFrom int64
	// SinkParts are the file-sink parts (uploaded under their pending keys)
	// that no completed checkpoint covered: the JobMaster commits them when
	// the whole job has finished.
	SinkParts []checkpoint.SinkPart
}

const (
	// batchRecords and batchBytes bound one batch of source lines handed
	// to the guest.
	batchRecords = 1024
	batchBytes   = 32 << 10
	// sourcePollMax is how many records a guest source may produce per
	// poll.
	sourcePollMax = 1024
	// MaxCollectBytes bounds what one task's collect sink keeps: the
	// collect sink is for small results that travel back with the job
	// result; large outputs belong in a file sink.
	MaxCollectBytes = 64 << 20
	// closeTimeout bounds the cleanup calls made after the task's context
	// ended.
	closeTimeout = 5 * time.Second
)

// ErrCollectTooLarge is the failure of a task whose collect sink received
// more than MaxCollectBytes.
var ErrCollectTooLarge = errors.New("collected results too large")

// task is the state of one Run.
type task struct {
	spec Spec
	deps Deps
	log  *slog.Logger
	// releaseModule gives the module back to the cache when the task ends.
	releaseModule func()

	textHead bool
	// followEvery is the monitor interval of a text source that follows
	// its paths (0: it does not); it asks again that often while the
	// JobMaster has no split for it.
	followEvery  time.Duration
	nexmarkHead  bool // the head is a nexmark source (nexmark.go)
	collectEnd   bool
	fileEnd      bool
	blackholeEnd bool // the tail is a blackhole sink: records are counted, nothing kept
	jsHead       bool // the head is a jetstream source (jetstream.go)
	jsSinkEnd    *jobgraph.Vertex
	jsSink       *jetStreamSink
	kafkaSinkEnd *jobgraph.Vertex // the tail is a kafka sink (kafkasink.go)
	kafkaSink    *kafkaSink
	jsNext       uint64          // the jetstream source's next stream sequence; 0: its start
	hostState    *wasmhost.State // a chain without guest operators: the connectors' state
	kafka        *kafkaSource    // the head is a kafka source (kafka.go)
	guest        []jobgraph.Vertex

	mod     *wasmhost.Module
	inst    *wasmhost.Instance
	pz      *poison  // the poison-record policy (poison.go)
	bpos    batchPos // where the batch being processed came from
	chanRec map[chanKey]int64
	gates   []*exchange.InputGate
	writers []*exchange.ResultWriter

	collected collector
	emitted   int64 // records the chain's tail emitted
	emitCtx   context.Context
	met       *Metrics // nil: metrics off

	// checkpoints (see checkpoint.go)
	ctl    *Control
	acks   Checkpoints
	up     *uploader
	sink   *fileSink
	lastID int64 // the newest checkpoint taken or given up
	stopID int64 // a source stopped by this stop-with-savepoint

	// barrier alignment (tasks with inputs)
	channels    int // input channels of all gates
	singleGate  bool
	alignID     int64
	alignStart  time.Time            // when the first barrier of alignID arrived
	seen        map[chanKey]struct{} // delivered barrier alignID
	superseded  map[int64]struct{}   // older checkpoints declined while aligning
	ended       map[chanKey]struct{} // delivered END_OF_PARTITION
	alignCtx    context.Context
	alignCancel context.CancelFunc

	et eventTime // watermarks (watermark.go)

	// text source position
	split          checkpoint.Split
	inSplit        bool
	nextOffset     int64
	finishedSplits []string
}

// Run runs the task spec describes until it finishes, fails or ctx ends.
// Checkpoint answers go to deps.Checkpoints before it returns, and no
// upload goes on after it returns; deps.Control refuses commands from then
// on (a trigger still queued when the task finished is declined).
//
// # Errors
//
// A *Failure when the task failed while ctx was live, with its kind
// (Classify), wrapping a *wasmhost.GuestError as the guest failed, or
// otherwise what went wrong, wrapped with the task's execution id (a
// module that cannot be fetched, an input or output that cannot be opened,
// a split that cannot be read, a peer's failure). An error wrapping
// context.Canceled (or the context's other error) when ctx ended first. An
// invalid spec is reported as such, unclassified.
func Run(ctx context.Context, spec Spec, deps Deps) (res Result, err error) {
	t := &task{spec: spec, deps: deps, emitCtx: ctx, ctl: deps.Control, acks: deps.Checkpoints, met: deps.Metrics,
		seen: map[chanKey]struct{}{}, ended: map[chanKey]struct{}{}, superseded: map[int64]struct{}{}, chanRec: map[chanKey]int64{}}
	if t.ctl == nil {
		t.ctl = NewControl()
	}
	if t.acks == nil {
		t.acks = noCheckpoints{}
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	t.log = log.With("job", spec.JobID, "task", spec.ExecutionID, "tenant", spec.Tenant, "subtask", spec.Subtask)
	defer func() {
		var f *Failure
		if err != nil && ctx.Err() != nil && !errors.As(err, &f) {
			// Whatever broke first, the task was canceled.
			if !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("task %s: %w (while: %v)", spec.ExecutionID, ctx.Err(), err)
			}
		}
	}()
	if err := t.validate(); err != nil {
		t.ctl.close()
		return Result{}, fmt.Errorf("task %s: %w", spec.ExecutionID, err)
	}
	t.startUploader(ctx)
	defer t.cleanup(ctx)
	// Each failure is classified here, before the deferred cleanup aborts
	// the outputs and so causes consequences elsewhere.
	if err := t.open(ctx); err != nil {
		return Result{}, failed(ctx, err)
	}
	if deps.OnRunning != nil {
		deps.OnRunning()
	}
	if err := t.run(ctx); err != nil {
		// A task canceled while it ran (as a stop-with-savepoint ends the
		// tasks once the savepoint completed) reports what it counted.
		return Result{Accumulators: t.accumulators()}, failed(ctx, err)
	}
	if err := t.finish(ctx); err != nil {
		return Result{}, failed(ctx, err)
	}
	if res.SinkParts, err = t.finishCheckpoints(ctx); err != nil {
		return Result{}, failed(ctx, err)
	}
	res.Collected, res.CollectedFrom = t.collected.all()
	res.Accumulators = t.accumulators()
	return res, nil
}

func (t *task) validate() error {
	s := t.spec
	if len(s.Chain) == 0 {
		return errors.New("empty chain")
	}
	for i, v := range s.Chain {
		switch {
		case v.Connector == "":
			t.guest = append(t.guest, v)
		case v.Connector == jobgraph.ConnectorText && i == 0:
			t.textHead = true
			every, _, err := v.MonitorInterval()
			if err != nil {
				return fmt.Errorf("text source %q: %w", v.Name, err)
			}
			t.followEvery = every
		case v.Connector == jobgraph.ConnectorNexmark && i == 0:
			t.nexmarkHead = true
		case v.Connector == jobgraph.ConnectorJetStreamSource && i == 0:
			t.jsHead = true
		case v.Connector == jobgraph.ConnectorKafkaSource && i == 0:
			if err := t.newKafkaSource(v); err != nil {
				return err
			}
		case v.Connector == jobgraph.ConnectorJetStreamSink && i == len(s.Chain)-1:
			t.jsSinkEnd = &s.Chain[i]
		case v.Connector == jobgraph.ConnectorKafkaSink && i == len(s.Chain)-1:
			t.kafkaSinkEnd = &s.Chain[i]
		case v.Connector == jobgraph.ConnectorCollect && i == len(s.Chain)-1:
			t.collectEnd = true
		case v.Connector == jobgraph.ConnectorBlackhole && i == len(s.Chain)-1:
			t.blackholeEnd = true
		case v.Connector == jobgraph.ConnectorFile && i == len(s.Chain)-1:
			t.fileEnd = true
			sink, err := newFileSink(s, v, t.deps.Blob, t.ctl.completedMax)
			if err != nil {
				return err
			}
			t.sink = sink
		default:
			return fmt.Errorf("vertex %d (%s): connector %q is not supported at position %d of the chain by this task runtime", v.ID, v.Name, v.Connector, i)
		}
	}
	switch {
	case s.Parallelism < 1 || s.Subtask < 0 || s.Subtask >= s.Parallelism:
		return fmt.Errorf("subtask %d of parallelism %d", s.Subtask, s.Parallelism)
	case t.textHead && (t.deps.Splits == nil || t.deps.Blob == nil):
		return errors.New("a text source needs Deps.Splits and Deps.Blob")
	case t.textHead && len(s.Inputs) > 0:
		return errors.New("a text source task has inputs")
	case t.nexmarkHead && t.deps.Splits == nil:
		return errors.New("a nexmark source needs Deps.Splits")
	case t.nexmarkHead && len(s.Inputs) > 0:
		return errors.New("a nexmark source task has inputs")
	case t.jsHead && len(s.Inputs) > 0:
		return errors.New("a jetstream source task has inputs")
	case t.kafka != nil && (len(s.Inputs) > 0 || t.deps.Splits == nil):
		return errors.New("a kafka source task has inputs or no Deps.Splits")
	case t.jsSinkEnd != nil && len(s.Outputs) > 0:
		return errors.New("a jetstream sink task has outputs")
	case t.kafkaSinkEnd != nil && len(s.Outputs) > 0:
		return errors.New("a kafka sink task has outputs")
	case !t.textHead && !t.nexmarkHead && !t.jsHead && t.kafka == nil && !t.guestSource() && len(s.Inputs) == 0:
		return errors.New("the chain's head is not a source and the task has no inputs")
	case t.collectEnd && len(s.Outputs) > 0:
		return errors.New("a collect sink task has outputs")
	case t.fileEnd && len(s.Outputs) > 0:
		return errors.New("a file sink task has outputs")
	case t.blackholeEnd && len(s.Outputs) > 0:
		return errors.New("a blackhole sink task has outputs")
	case t.fileEnd && t.deps.Blob == nil:
		return errors.New("a file sink needs Deps.Blob")
	case s.Restore != nil && len(t.guest) > 0 && t.deps.Blob == nil:
		return errors.New("restoring state needs Deps.Blob")
	case len(s.Inputs)+len(s.Outputs) > 0 && t.deps.Exchange == nil:
		return errors.New("inputs or outputs need Deps.Exchange")
	case len(t.guest) > 0 && t.deps.Modules == nil:
		return errors.New("guest operators need Deps.Modules")
	case len(t.guest) == 0 && !t.collectEnd && !t.fileEnd && !t.blackholeEnd && t.jsSinkEnd == nil && t.kafkaSinkEnd == nil && len(s.Outputs) == 0:
		return errors.New("the chain has no guest operators and nowhere to send records")
	}
	if !t.collectEnd && !t.fileEnd && !t.blackholeEnd && t.jsSinkEnd == nil && t.kafkaSinkEnd == nil && len(s.Outputs) == 0 && len(t.guest) > 0 {
		if tail := t.guest[len(t.guest)-1]; tail.Kind != jobgraph.KindSink {
			return fmt.Errorf("vertex %d (%s) ends the chain but the task has no outputs", tail.ID, tail.Name)
		}
	}
	return t.newPoison()
}

func (t *task) guestSource() bool {
	return !t.textHead && !t.nexmarkHead && !t.jsHead && t.kafka == nil && len(t.guest) > 0 && t.guest[0].Kind == jobgraph.KindSource
}

func (t *task) name() string {
	names := make([]string, len(t.spec.Chain))
	for i, v := range t.spec.Chain {
		names[i] = v.Name
	}
	return fmt.Sprintf("%s (%d/%d)", strings.Join(names, " -> "), t.spec.Subtask+1, t.spec.Parallelism)
}

// open registers the inputs (first, so upstream producers can connect),
// starts the guest and connects the outputs.
func (t *task) open(ctx context.Context) error {
	id := t.spec.ExecutionID
	for _, in := range t.spec.Inputs {
		g, err := t.deps.Exchange.OpenInput(ctx, in, t.spec.Subtask)
		if err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		t.gates = append(t.gates, g)
		t.channels += in.Producers
	}
	t.singleGate = len(t.gates) == 1
	if err := t.initEventTime(); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if t.jsSinkEnd != nil {
		if err := t.newJetStreamSink(ctx, *t.jsSinkEnd); err != nil {
			return err
		}
	}
	if t.kafkaSinkEnd != nil {
		if err := t.newKafkaSink(ctx, *t.kafkaSinkEnd); err != nil {
			return err
		}
	}
	if len(t.guest) == 0 && (t.jsHead || t.jsSinkEnd != nil || t.kafka != nil || t.kafkaSinkEnd != nil) {
		if err := t.openHostState(ctx); err != nil {
			return err
		}
	}
	if len(t.guest) > 0 {
		mod, release, err := t.deps.Modules.Module(ctx, t.spec.Tenant, t.spec.ModuleDigest)
		if err != nil {
			return fmt.Errorf("task %s: module %s: %w", id, t.spec.ModuleDigest, err)
		}
		t.mod = mod
		t.releaseModule = release
		var state *wasmhost.State
		if t.spec.Restore != nil {
			if state, err = t.restoreState(ctx); err != nil {
				return err
			}
			if err := t.restoreCollected(state); err != nil {
				return err
			}
			t.restorePoison(state)
			if err := t.restoreJetStream(state); err != nil {
				return err
			}
			if err := t.restoreKafka(state); err != nil {
				return err
			}
			if err := t.restoreKafkaSink(state); err != nil {
				return err
			}
			t.encodeBase(state)
		}
		inst, err := t.newInstance(ctx, state)
		if inst != nil {
			t.setInstance(inst)
		}
		if err != nil {
			return err
		}
	}
	for _, out := range t.spec.Outputs {
		w, err := t.deps.Exchange.OpenOutput(ctx, out, t.spec.Subtask, t.spec.MaxParallelism)
		if err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		t.writers = append(t.writers, w)
	}
	t.met.attach(t.writers, t.inst)
	return nil
}

// newInstance instantiates the chain's guest operators on state (nil: a
// fresh one) and opens them. On an open that failed it returns the
// instance too, for its stacks and its Close.
func (t *task) newInstance(ctx context.Context, state *wasmhost.State) (*wasmhost.Instance, error) {
	var emit func([]abi.Record) error
	if t.collectEnd || t.fileEnd || t.blackholeEnd || t.jsSinkEnd != nil || t.kafkaSinkEnd != nil || len(t.spec.Outputs) > 0 {
		emit = t.guestEmit
	}
	var emitWM func(int64) error
	if t.et.strategy.Kind == jobgraph.WatermarkGuest && t.guestSource() {
		emitWM = t.guestWatermark
	}
	inst, err := t.mod.Instantiate(ctx, wasmhost.TaskConfig{
		JobID:          t.spec.JobID,
		TaskName:       t.name(),
		Tenant:         t.spec.Tenant,
		Chain:          t.guest,
		Subtask:        t.spec.Subtask,
		Parallelism:    t.spec.Parallelism,
		MaxParallelism: t.spec.MaxParallelism,
		Args:           t.spec.Args,
		Emit:           emit,
		EmitWatermark:  emitWM,
		Logger:         t.log,
		Limits:         t.deps.Limits,
		State:          state,
	})
	if err != nil {
		return nil, err
	}
	return inst, inst.Open(ctx)
}

// setInstance makes inst the task's guest instance.
func (t *task) setInstance(inst *wasmhost.Instance) {
	t.inst = inst
	if t.deps.OnInstance != nil {
		t.deps.OnInstance(inst)
	}
	t.met.attach(t.writers, inst)
}

// emit takes the chain tail's output: into the collect sink, or to every
// output. recs are valid only during the call.
func (t *task) emit(recs []abi.Record) error {
	t.emitted += int64(len(recs))
	if t.hostGenerated() {
		t.observeEmitted(recs)
	}
	t.met.addOut(len(recs), 0) // bytes: the writers count their own
	if t.sink != nil {
		if t.sink.write(recs) {
			// A part rolled over: upload it now, so memory stays bounded.
			if err := t.sink.unuploadedErr(); err != nil {
				return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
			}
			return t.up.submit(t.emitCtx, &uploadJob{sinkUpto: t.sink.seq})
		}
		return nil
	}
	if t.jsSink != nil {
		return t.jsSink.write(t.emitCtx, recs)
	}
	if t.kafkaSink != nil {
		return t.kafkaSink.write(t.emitCtx, recs)
	}
	if t.blackholeEnd {
		n := 0
		for i := range recs {
			n += len(recs[i].Value)
		}
		t.met.addOut(0, n)
		return nil
	}
	if t.collectEnd {
		n, err := t.collected.add(t.spec.ExecutionID, recs)
		t.met.addOut(0, n)
		return err
	}
	for _, w := range t.writers {
		if err := w.Write(t.emitCtx, recs); err != nil {
			return err
		}
	}
	return nil
}

// process hands one batch to the chain's head. enc, when not nil, is recs
// in the ABI's encoding, which the guest gets as it is.
func (t *task) process(ctx context.Context, recs []abi.Record, enc []byte) error {
	if len(recs) == 0 {
		return nil
	}
	t.met.addIn(len(recs), 0)
	if t.inst == nil {
		return t.emit(recs)
	}
	t.pz.in += int64(len(recs))
	var err error
	switch {
	case t.pz.replay:
		err = t.processGuarded(ctx, recs, enc)
	case enc != nil:
		err = t.inst.ProcessEncoded(ctx, enc)
	default:
		err = t.inst.Process(ctx, recs)
	}
	if err != nil {
		if !t.pz.replay {
			err = t.locate(ctx, recs, err)
		}
		return err
	}
	return t.fireDueTimers(ctx)
}

func (t *task) fireDueTimers(ctx context.Context) error {
	if t.inst == nil {
		return nil
	}
	at, ok := t.inst.NextTimer()
	if !ok {
		return nil
	}
	if now := time.Now().UnixMilli(); now >= at {
		if err := t.inst.FireTimers(ctx, now); err != nil {
			return err
		}
		t.pz.logStep(replayStep{timersAt: now})
	}
	return nil
}

// timerWait returns how long until the next timer is due, or false.
func (t *task) timerWait() (time.Duration, bool) {
	if t.inst == nil {
		return 0, false
	}
	at, ok := t.inst.NextTimer()
	if !ok {
		return 0, false
	}
	return max(time.Until(time.UnixMilli(at)), 0), true
}

func (t *task) run(ctx context.Context) error {
	switch {
	case t.textHead:
		return t.runText(ctx)
	case t.nexmarkHead:
		return t.runNexmark(ctx)
	case t.jsHead:
		return t.runJetStream(ctx)
	case t.kafka != nil:
		return t.runKafka(ctx)
	case t.guestSource():
		return t.runGuestSource(ctx)
	case len(t.gates) == 1:
		return t.runGate(ctx, t.gates[0])
	default:
		return t.runGates(ctx)
	}
}

// runText reads the splits the JobMaster hands out, line by line, in
// batches. Commands are taken after every line (the partial batch goes to
// the guest first) and between splits.
func (t *task) runText(ctx context.Context) error {
	var b lineBatch
	flush := func() error {
		t.met.addIn(0, b.lineBytes)
		t.bpos = batchPos{objects: b.objects, offsets: b.offsets}
		err := t.process(ctx, b.recs, b.encoded())
		b.reset()
		if err == nil {
			err = t.sourceTick(ctx, false)
		}
		return err
	}
	src := &source{flush: flush, position: t.textPosition}
	for {
		if err := t.serveControl(ctx, src); err != nil {
			return err
		}
		waited := t.met.waitStart()
		sp, done, err := t.nextSplit(ctx, src)
		t.met.idleSince(waited)
		if err != nil {
			return err
		}
		if done {
			return flush()
		}
		if sp == (checkpoint.Split{}) {
			if err := t.awaitSplit(ctx, src, flush); err != nil {
				return err
			}
			continue
		}
		t.split, t.inSplit, t.nextOffset = sp, true, sp.Offset
		if t.et.splits != nil {
			t.et.split = sp.ID()
			t.et.splits.Add(t.et.split, time.Now())
		}
		err = readSplit(ctx, t.deps.Blob, sp, func(line []byte, next int64) error {
			b.add(line)
			b.objects = append(b.objects, sp.Key)
			b.offsets = append(b.offsets, t.nextOffset)
			t.nextOffset = next
			if len(b.recs) >= batchRecords || b.lineBytes >= batchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			if t.ctl.pending() {
				return t.serveControl(ctx, src)
			}
			return nil
		})
		if err != nil && t.followEvery > 0 && errors.Is(err, blob.ErrNotFound) {
			// Listed, then deleted before it was read to the end.
			t.log.Warn("input object deleted before it was read: its unread lines are skipped", "key", sp.Key, "offset", t.nextOffset)
			err = nil
		}
		if err != nil {
			return fmt.Errorf("task %s: split %s@%d+%d: %w", t.spec.ExecutionID, sp.Key, sp.Offset, sp.Length, err)
		}
		// Its last lines may still wait in b; a position taken now flushes
		// them first.
		t.finishedSplits = append(t.finishedSplits, sp.ID())
		t.inSplit = false
		if t.et.splits != nil {
			// The split's times must count before it stops holding the
			// watermark back.
			if err := flush(); err != nil {
				return err
			}
			t.et.splits.Remove(sp.ID())
		}
	}
}

// nextSplit asks for the next split, taking commands while the JobMaster
// answers: a checkpoint taken then is consistent, because a split handed
// out after it is not among the finished ones, so a restore reads it again.
func (t *task) nextSplit(ctx context.Context, src *source) (checkpoint.Split, bool, error) {
	type answer struct {
		sp   checkpoint.Split
		done bool
		err  error
	}
	nctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan answer, 1)
	go func() {
		sp, done, err := t.deps.Splits.NextSplit(nctx)
		ch <- answer{sp, done, err}
	}()
	var tick <-chan time.Time
	if t.et.splits != nil {
		// Idleness goes on while the JobMaster answers.
		tk := time.NewTicker(t.et.strategy.Interval)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-tick:
			if err := t.sourceTick(ctx, false); err != nil {
				cancel()
				<-ch
				return checkpoint.Split{}, false, err
			}
		case a := <-ch:
			if a.err != nil {
				return checkpoint.Split{}, false, fmt.Errorf("task %s: next split: %w", t.spec.ExecutionID, a.err)
			}
			return a.sp, a.done, nil
		case <-t.ctl.wake:
			if err := t.serveControl(ctx, src); err != nil {
				cancel()
				<-ch
				return checkpoint.Split{}, false, err
			}
		}
	}
}

// lineBatch gathers lines in the ABI's batch encoding (docs/ABI.md section
// 2: a record count, then each line as a record with neither key nor time),
// which the guest gets as it is, and as records that alias it, until reset.
type lineBatch struct {
	enc       []byte // the count (set by encoded), then the records
	recs      []abi.Record
	lineBytes int // the lines' bytes, without the encoding's
	// objects and offsets are where each line starts, to name a record
	// that fails the guest.
	objects []string
	offsets []int64
}

func (b *lineBatch) add(line []byte) {
	if len(b.enc) == 0 {
		b.enc = append(b.enc, 0, 0, 0, 0)
	}
	// A line is at most maxLineBytes, far below the 4 GiB a length holds.
	b.enc = binary.LittleEndian.AppendUint32(append(b.enc, 0), uint32(len(line)))
	start := len(b.enc)
	b.enc = append(b.enc, line...)
	b.recs = append(b.recs, abi.Record{})
	// Set after appending: enc may have moved.
	b.recs[len(b.recs)-1].Value = b.enc[start:len(b.enc):len(b.enc)]
	b.lineBytes += len(line)
}

// encoded returns the batch's encoding, nil when it is empty.
func (b *lineBatch) encoded() []byte {
	if len(b.recs) == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(b.enc, uint32(len(b.recs)))
	return b.enc
}

func (b *lineBatch) reset() {
	// Records handed out earlier may still point into an old array; they
	// were consumed synchronously, so reusing it is safe.
	b.enc = b.enc[:0]
	clear(b.recs)
	b.recs = b.recs[:0]
	b.lineBytes = 0
	clear(b.objects)
	b.objects, b.offsets = b.objects[:0], b.offsets[:0]
}

// runGuestSource polls the guest source; commands are taken between polls.
func (t *task) runGuestSource(ctx context.Context) error {
	src := &source{flush: func() error { return nil }}
	var idle time.Duration
	for {
		if t.ctl.pending() {
			if err := t.serveControl(ctx, src); err != nil {
				return err
			}
		}
		before := t.emitted
		done, err := t.inst.SourcePoll(ctx, sourcePollMax)
		if err != nil {
			return err
		}
		if err := t.sourceTick(ctx, false); err != nil {
			return err
		}
		if done {
			return nil
		}
		if t.emitted > before {
			idle = 0
		} else if err := t.idleWait(ctx, &idle); err != nil {
			return err
		}
		if err := t.fireDueTimers(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Bounds of the pause after a poll in which a guest source emitted nothing.
const (
	minSourceIdle = 100 * time.Microsecond
	maxSourceIdle = 10 * time.Millisecond
)

// idleWait pauses a guest source that had nothing to emit, so an idle
// source does not spin a core: each empty poll in a row doubles the pause,
// up to maxSourceIdle; a command (a checkpoint trigger) ends it early.
func (t *task) idleWait(ctx context.Context, idle *time.Duration) error {
	*idle = min(max(*idle*2, minSourceIdle), maxSourceIdle)
	timer := time.NewTimer(*idle)
	defer timer.Stop()
	defer t.met.idleSince(t.met.waitStart())
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.ctl.wake:
		select { // leave the signal for whoever takes the commands
		case t.ctl.wake <- struct{}{}:
		default:
		}
	case <-timer.C:
	}
	return nil
}

// next reads g, waking up for due timers. It waits with wctx (which a
// command may end early) and calls the guest with ctx.
func (t *task) next(ctx, wctx context.Context, g *exchange.InputGate) (exchange.Batch, error) {
	for {
		wait, ok := t.timerWait()
		if !ok {
			return g.Next(wctx)
		}
		if wait == 0 {
			if err := t.fireDueTimers(ctx); err != nil {
				return exchange.Batch{}, err
			}
			continue
		}
		tctx, cancel := context.WithTimeout(wctx, wait)
		b, err := g.Next(tctx)
		cancel()
		if err != nil && errors.Is(err, context.DeadlineExceeded) && wctx.Err() == nil {
			continue // a timer is due
		}
		return b, err
	}
}

func (t *task) runGate(ctx context.Context, g *exchange.InputGate) error {
	for {
		if t.ctl.pending() {
			if err := t.serveControl(ctx, nil); err != nil {
				return err
			}
		}
		wctx := t.waitCtx(ctx)
		waited := t.met.waitStart()
		b, err := t.next(ctx, wctx, g)
		t.met.idleSince(waited)
		if err == io.EOF {
			return nil
		}
		if err != nil && wctx != ctx && wctx.Err() != nil && ctx.Err() == nil {
			continue // a command arrived while aligning barriers
		}
		if err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
		if err := t.handle(ctx, 0, b); err != nil {
			return err
		}
	}
}

func (t *task) handle(ctx context.Context, gate int, b exchange.Batch) error {
	if b.IsEvent() {
		return t.onEvent(ctx, gate, b.Producer, b.Event)
	}
	t.met.addIn(0, len(b.Encoded))
	key := chanKey{gate, b.Producer}
	t.bpos = batchPos{gate: gate, prod: b.Producer, first: t.chanRec[key]}
	t.chanRec[key] += int64(len(b.Records))
	return t.process(ctx, b.Records, b.Encoded)
}

// inputMsg is one element of one of several gates. The gate's reader waits
// for ack before reading on, because the records alias the gate's buffer
// (and so that a barrier's channel is blocked before the gate reads on).
type inputMsg struct {
	gate int
	b    exchange.Batch
	err  error
	ack  chan struct{}
}

// runGates merges several inputs: one reader goroutine per gate hands
// elements to this goroutine, which runs the guest.
func (t *task) runGates(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	msgs := make(chan inputMsg)
	for gi, g := range t.gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Buffered: the task acknowledges even when this reader has
			// left on the context's end (it never blocks on one gone).
			ack := make(chan struct{}, 1)
			for {
				b, err := g.Next(rctx)
				select {
				case msgs <- inputMsg{gate: gi, b: b, err: err, ack: ack}:
				case <-rctx.Done():
					return
				}
				if err != nil {
					return
				}
				select {
				case <-ack:
				case <-rctx.Done():
					return
				}
			}
		}()
	}
	open := len(t.gates)
	var timer *time.Timer
	for open > 0 {
		var fire <-chan time.Time
		if wait, ok := t.timerWait(); ok {
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		}
		waited := t.met.waitStart()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-fire:
			t.met.idleSince(waited)
			if err := t.fireDueTimers(ctx); err != nil {
				return err
			}
		case <-t.ctl.wake:
			t.met.idleSince(waited)
			if err := t.serveControl(ctx, nil); err != nil {
				return err
			}
		case m := <-msgs:
			t.met.idleSince(waited)
			if m.err == io.EOF {
				open--
				continue
			}
			if m.err != nil {
				return fmt.Errorf("task %s: %w", t.spec.ExecutionID, m.err)
			}
			if err := t.handle(ctx, m.gate, m.b); err != nil {
				return err
			}
			m.ack <- struct{}{}
		}
	}
	return nil
}

// finish ends the input, then flushes the outputs and sends
// END_OF_PARTITION on them.
func (t *task) finish(ctx context.Context) error {
	if t.inst != nil {
		if err := t.inst.EndInput(ctx); err != nil {
			return err
		}
	}
	for _, w := range t.writers {
		if err := w.Finish(ctx); err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
	}
	if t.inst != nil {
		err := t.inst.Close(ctx)
		if err != nil {
			return err
		}
	}
	if t.jsSink != nil {
		if err := t.jsSink.finish(ctx, t.lastID+1); err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
	}
	if t.kafkaSink != nil {
		if err := t.kafkaSink.finish(ctx, t.lastID+1); err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
	}
	return nil
}

// finishCheckpoints ends checkpointing after the input ended: triggers
// that arrive too late are declined, the file sink's last part is closed,
// the queued uploads and answers finish, and the parts no completed
// checkpoint covered are returned for the JobMaster's final commit.
func (t *task) finishCheckpoints(ctx context.Context) ([]checkpoint.SinkPart, error) {
	if t.alignID != 0 {
		id := t.alignID
		t.abandonAlignment()
		if err := t.declineLater(ctx, id, fmt.Sprintf("task %s finished before barrier %d was aligned", t.spec.ExecutionID, id)); err != nil {
			return nil, err
		}
	}
	for _, tr := range t.ctl.close() {
		if err := t.declineLater(ctx, tr.ID, fmt.Sprintf("task %s finished before it could take checkpoint %d", t.spec.ExecutionID, tr.ID)); err != nil {
			return nil, err
		}
	}
	upto, dlqUpto := 0, 0
	if t.sink != nil {
		upto = t.sink.closePart()
	}
	dlq := t.pz.dlq
	if dlq != nil {
		dlqUpto = dlq.closePart()
	}
	t.up.drain()
	var parts []checkpoint.SinkPart
	if t.sink != nil {
		if err := t.sink.upload(ctx, upto); err != nil {
			return nil, fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
		parts = t.sink.remaining()
	}
	if dlq != nil {
		if err := dlq.upload(ctx, dlqUpto); err != nil {
			return nil, fmt.Errorf("task %s: dead-letter records: %w", t.spec.ExecutionID, err)
		}
		parts = append(parts, dlq.remaining()...)
	}
	return parts, nil
}

// cleanup releases everything, on every path. Writers that did not finish
// abort their channels, so downstream tasks fail rather than wait.
func (t *task) cleanup(ctx context.Context) {
	// No upload may go on after Run returns.
	t.up.abort()
	t.ctl.close()
	if t.alignCancel != nil {
		t.alignCancel()
	}
	for _, w := range t.writers {
		w.Close()
	}
	for _, g := range t.gates {
		g.Close()
	}
	if t.inst != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if err := t.inst.Close(cctx); err != nil {
			t.log.Debug("closing the guest instance", "err", err)
		}
	}
	if t.releaseModule != nil {
		t.releaseModule()
	}
	if t.jsSink != nil {
		t.jsSink.close()
	}
	if t.kafkaSink != nil {
		t.kafkaSink.close()
	}
}
