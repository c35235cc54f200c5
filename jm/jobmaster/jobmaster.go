package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/jobmaster/checkpointing"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// Defaults for Config fields left zero.
const (
	DefaultCancelTimeout = 10 * time.Second
	DefaultRPCTimeout    = 10 * time.Second
)

// Config is one job and the services its JobMaster uses.
type Config struct {
	JobID        string
	Name         string // shown in listings; the graph's name when empty
	Tenant       string
	ModuleDigest string
	Args         []string
	// Graph is the validated job graph (jobgraph.Validate).
	Graph              *jobgraph.Graph
	DefaultParallelism int
	// JobConfig is the job's parsed config (jobconfig.Parse). Its
	// Checkpoints configure periodic checkpoints: the zero value takes
	// none, but savepoints still work; zero Timeout, MaxConcurrent and
	// Retained take jobconfig.DefaultCheckpoints' values; TolerableFailures
	// is used as given (0: the first failed checkpoint fails the job;
	// negative: no limit). It goes to every task (Deployment.Config). Its
	// Restart part is already in Restart.
	JobConfig jobconfig.Config
	// Splits are the input splits of each text source, by vertex id.
	Splits map[int][]checkpoint.Split
	// Discover lists what a text source that follows its paths
	// (jobgraph.ConfigMonitorInterval) reads now, as splits; the JobMaster
	// calls it every monitor interval, off its loop, and keeps the splits
	// of objects it has not seen. Required when the graph has such a
	// source.
	Discover func(ctx context.Context, vertex int) ([]checkpoint.Split, error)
	// Restart is the job's restart strategy (RestartFromConfig).
	Restart RestartStrategy
	// LeaderSession goes into every fencing token.
	LeaderSession string
	// Address is the JobManager's RPC address, told to every task.
	Address string
	Slots   SlotPool
	Gateway TaskExecutorGateway
	// CancelTimeout bounds how long canceling waits for tasks to confirm.
	CancelTimeout time.Duration
	// RPCTimeout bounds each call to a TaskManager.
	RPCTimeout time.Duration
	// Limits go with every deployment (the tenant's sandbox quotas).
	Limits control.TaskLimits
	Logger *slog.Logger
	// Now is the clock for timestamps; nil means time.Now.
	Now func() time.Time

	// Blob is the JobManager's blob store: checkpoints, savepoints and
	// file-sink commits. Required for checkpointing and Restore.
	Blob blob.Store
	// Restore, when set, is where the first attempt starts from: a
	// savepoint or a retained checkpoint of the same tenant, possibly taken
	// at another parallelism. Its max parallelism must be the graph's.
	Restore *checkpoint.Metadata
	// CheckpointStored, when set, is called once a checkpoint's metadata
	// is written and before its file-sink parts are committed or tasks
	// notified: the JobManager's HA job store records it as the job's
	// restore point there. An error fails the checkpoint (nothing of it is
	// committed): a deposed leader's pointer write fails, and so does its
	// commit.
	CheckpointStored func(ctx context.Context, m *checkpoint.Metadata, attempt int64) error
	// Released are the collect-sink records an earlier leader released
	// through Restore (a job a new leader recovers): the job's records
	// start with them. With CheckpointStored, what each checkpoint
	// releases is written to the blob store before its metadata, for the
	// next leader (internal/checkpoint's results layout).
	Released [][]byte
	// FirstAttempt is the number of the job's first attempt: 0 for a new
	// job; for a job a new leader recovers, one past the attempt of its
	// restore point, so executions, results and file-sink parts are named
	// apart from those of the leader before.
	FirstAttempt int64
	// StillLeader, when set, is asked before the JobMaster deletes from
	// the blob store (a restore's sweep, an ended job's cleanup): a
	// deposed leader must not delete what the new one writes.
	StillLeader func(ctx context.Context) error
}

// JobMaster runs one job. Its methods are safe for concurrent use.
type JobMaster struct {
	cfg    Config
	log    *slog.Logger
	events chan any
	done   chan struct{} // closed when the job is in a terminal state
	stopCh chan struct{} // closed by Close
	stop   sync.Once
	bg     sync.WaitGroup // RPCs and timers started by the loop

	mu   sync.Mutex
	snap Result
	// recordsChanged is closed (and replaced) when snap holds more
	// released records than before.
	recordsChanged chan struct{}
	cpSnap         []checkpoint.Stats
	cpCounts       checkpointing.Counts
	// metrics are the latest figures of the executions in snap, by
	// execution id (TaskManager heartbeats and final reports).
	metrics map[string]control.TaskMetrics

	// jobCtx ends when the loop does; it bounds blob work of checkpoints.
	jobCtx    context.Context
	jobCancel context.CancelFunc

	// Owned by the loop goroutine.
	tasks         []*task
	state         JobState
	attempt       int64
	restarts      int
	execs         []*execution
	byID          map[string]*execution
	slots         []resourcemanager.Slot
	attemptCtx    context.Context // ends when the attempt is torn down
	attemptCancel context.CancelFunc
	splits        map[int]int // next split index per source vertex
	failure       string      // root cause of the current failure
	failedAt      time.Time   // when the current failure happened
	// consequence: failure is a task's report of a failure elsewhere (a
	// peer's aborted channel, say); the first cause reported in the same
	// attempt (failedAttempt) replaces it.
	consequence   bool
	failedAttempt int64
	// unreachable holds the TaskManagers a call of this attempt could not
	// reach: their tasks are not waited for when they are canceled.
	unreachable  map[string]bool
	history      []FailureRecord
	restarter    *restarter
	stateTimes   map[JobState]time.Time
	start, end   time.Time
	records      records
	accumulators map[string]int64

	// cp is the checkpoint coordinator; cpWork holds the done channels of
	// its metadata writes and commits in flight, cpExpiry what stops the
	// expiry timer of each checkpoint, waiters the callers of
	// TriggerSavepoint by waiter id.
	cp         *checkpointing.Coordinator
	keys       blob.Keys // valid when the job has a blob store
	cpWork     map[int64]chan struct{}
	cpExpiry   map[int64]chan struct{}
	waiters    map[int64]chan savepointReply
	lastWaiter int64
	// restore is the attempt's restore point (nil: from scratch), base the
	// splits of each text source the attempt starts with.
	restore *checkpoint.Metadata
	base    map[int][]checkpoint.Split
	// follow is the monitor interval of each text source that follows its
	// paths; known the object keys each has found in the attempt (those
	// of the restore point, then those its relists added).
	follow map[int]time.Duration
	known  map[int]map[string]bool
	// handed are the indexes of the splits handed out, per kafka source
	// (each goes to the subtask that owns its partition, not in order).
	handed map[int]map[int]bool
	// awaitWrites: the attempt's restore preparation waits for checkpoint
	// metadata being written (it may become the restore point).
	awaitWrites bool
	// finishing: every task ended; the final sink commit runs (after any
	// checkpoint still writing) before the job is FINISHED.
	finishing    bool
	finalStarted bool
	finalParts   []checkpoint.SinkPart
	finalErr     string
}

// execution is one subtask of one task in one attempt.
type execution struct {
	id          string
	task        *task
	subtask     int
	slot        resourcemanager.Slot
	state       string
	failure     string
	deployAcked bool // the DeployTask call returned (either way)
	cancelSent  bool
}

// Events.
type (
	evSlots struct {
		attempt int64
		slots   []resourcemanager.Slot
		err     error
	}
	evDeployed struct {
		attempt int64
		id      string
		err     error
		skipped bool // the attempt ended before the call was made
	}
	evUpdate struct {
		u     control.TaskUpdate
		reply chan error
	}
	evSplit struct {
		r     control.SplitRequest
		reply chan splitReply
	}
	evLost struct {
		l resourcemanager.Lost
	}
	evCancel struct {
		reply  chan error
		reason string // why, when not the tenant's own request; "" otherwise
	}
	evCancelTimeout struct{ attempt int64 }
	evUnreachable   struct {
		attempt    int64
		resourceID string
	}
	evRestart        struct{ attempt int64 }
	evPrepared       struct{ attempt int64 }
	evFinalCommitted struct {
		attempt int64
		err     error // a failed try; nil: committed
	}
)

type splitReply struct {
	split checkpoint.Split
	done  bool
	err   error
}

// Start validates cfg and starts the job's goroutine; the job moves to
// RUNNING and requests its slots at once (after readying the blob store
// when it starts from cfg.Restore).
//
// # Errors
//
// ErrInvalidArgument for a config that cannot run (no graph, no slot pool,
// a bad restart strategy or checkpoint config, checkpointing or Restore
// without a blob store, a Restore of another tenant or max parallelism).
func Start(cfg Config) (*JobMaster, error) {
	bad := func(format string, args ...any) (*JobMaster, error) {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "job master for job %s: "+format, append([]any{cfg.JobID}, args...)...)
	}
	switch {
	case cfg.JobID == "":
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "job master: no job id")
	case cfg.Graph == nil:
		return bad("no job graph")
	case cfg.Slots == nil || cfg.Gateway == nil:
		return bad("no slot pool or task executor gateway")
	}
	if err := cfg.Restart.Validate(); err != nil {
		return bad("%v", err)
	}
	cc := cfg.JobConfig.Checkpoints
	switch {
	case cc.Interval < 0 || cc.Timeout < 0 || cc.MinPause < 0 || cc.MaxConcurrent < 0 || cc.Retained < 0:
		return bad("checkpointing %+v: negative interval, timeout, min pause, max concurrent or retained", cc)
	case cc.Enabled() && cfg.Blob == nil:
		return bad("checkpointing needs a blob store: configure the JobManager's blob store")
	case cfg.Restore != nil && cfg.Blob == nil:
		return bad("restoring from checkpoint %d needs a blob store", cfg.Restore.ID)
	}
	def := jobconfig.DefaultCheckpoints()
	if cc.Timeout == 0 {
		cc.Timeout = def.Timeout
	}
	if cc.MaxConcurrent == 0 {
		cc.MaxConcurrent = def.MaxConcurrent
	}
	if cc.Retained == 0 {
		cc.Retained = def.Retained
	}
	var keys blob.Keys
	if cfg.Blob != nil {
		var err error
		if keys, err = blob.ForTenant(cfg.Tenant); err != nil {
			return bad("%v", err)
		}
		if _, err := keys.Job(cfg.JobID); err != nil {
			return bad("%v", err)
		}
	}
	if m := cfg.Restore; m != nil {
		if err := checkRestore(m, cfg, keys); err != nil {
			return bad("%v", err)
		}
	}
	if cfg.DefaultParallelism < 1 {
		cfg.DefaultParallelism = 1
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Graph.Name
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = DefaultCancelTimeout
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = DefaultRPCTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.JobConfig.Checkpoints = cc
	follow, err := followers(cfg.Graph)
	if err != nil {
		return bad("%v", err)
	}
	if len(follow) > 0 && cfg.Discover == nil {
		return bad("a text source follows its paths or a kafka source discovers partitions, but nothing relists them (Config.Discover)")
	}
	jobCtx, jobCancel := context.WithCancel(context.Background())
	jm := &JobMaster{
		cfg:            cfg,
		log:            cfg.Logger.With("job", cfg.JobID, "tenant", cfg.Tenant),
		events:         make(chan any),
		done:           make(chan struct{}),
		stopCh:         make(chan struct{}),
		jobCtx:         jobCtx,
		jobCancel:      jobCancel,
		tasks:          buildTasks(cfg.Graph, cfg.DefaultParallelism),
		state:          Created,
		byID:           map[string]*execution{},
		stateTimes:     map[JobState]time.Time{},
		accumulators:   map[string]int64{},
		records:        newRecords(cfg.Released),
		recordsChanged: make(chan struct{}),
		restarter:      newRestarter(cfg.Restart, rand.Float64),
		cp: checkpointing.New(checkpointing.Config{
			JobID: cfg.JobID, Tenant: cfg.Tenant, ModuleDigest: cfg.ModuleDigest,
			MaxParallelism: jobgraph.MaxParallelismOf(cfg.Graph), Keys: keys, Store: cfg.Blob != nil,
			Interval: cc.Interval, Timeout: cc.Timeout, MinPause: cc.MinPause, MaxConcurrent: cc.MaxConcurrent,
			Retained: cc.Retained, TolerableFailures: cc.TolerableFailures,
			Restore: cfg.Restore, Logger: cfg.Logger.With("job", cfg.JobID, "tenant", cfg.Tenant),
		}),
		keys:     keys,
		cpWork:   map[int64]chan struct{}{},
		cpExpiry: map[int64]chan struct{}{},
		waiters:  map[int64]chan savepointReply{},
		metrics:  map[string]control.TaskMetrics{},
		follow:   follow,
	}
	jm.attempt = cfg.FirstAttempt
	jm.setState(Created)
	jm.start = jm.stateTimes[Created]
	jm.publish()
	go jm.run()
	return jm, nil
}

// checkRestore refuses a restore point the job cannot use.
func checkRestore(m *checkpoint.Metadata, cfg Config, keys blob.Keys) error {
	if maxP := jobgraph.MaxParallelismOf(cfg.Graph); m.MaxParallelism != maxP {
		return fmt.Errorf("checkpoint %d of job %s has max parallelism %d, this job %d: restore with the same max parallelism", m.ID, m.JobID, m.MaxParallelism, maxP)
	}
	if m.Tenant != cfg.Tenant {
		return fmt.Errorf("checkpoint %d of job %s belongs to another tenant", m.ID, m.JobID)
	}
	own := keys.Prefix()
	for _, t := range m.Tasks {
		if !strings.HasPrefix(t.State.Key, own) {
			return fmt.Errorf("checkpoint %d: state %q is not the tenant's", m.ID, t.State.Key)
		}
	}
	for _, sp := range m.SinkParts {
		if !strings.HasPrefix(sp.Pending, own) || !strings.HasPrefix(sp.Final, own+"files/") {
			return fmt.Errorf("checkpoint %d: file-sink part %q -> %q is not the tenant's", m.ID, sp.Pending, sp.Final)
		}
	}
	return checkKafkaRescale(m, cfg)
}

// checkKafkaRescale refuses to restore a kafka source at another
// parallelism: each subtask keeps the offsets of the partitions it owns in
// its own state, and a subtask restored at another parallelism would not
// get the states of every partition it owns now.
func checkKafkaRescale(m *checkpoint.Metadata, cfg Config) error {
	for i := range cfg.Graph.Vertices {
		v := &cfg.Graph.Vertices[i]
		if v.Connector != jobgraph.ConnectorKafkaSource {
			continue
		}
		now := jobgraph.ParallelismOf(v, max(cfg.DefaultParallelism, 1))
		for _, t := range m.Tasks {
			if len(t.Vertices) > 0 && t.Vertices[0] == v.ID && t.Parallelism != now {
				return fmt.Errorf("checkpoint %d of job %s ran kafka source %d (%s) at parallelism %d, this job at %d: a kafka source cannot be rescaled (its partitions' offsets are in the state of the subtask that owned them); restore at parallelism %d", m.ID, m.JobID, v.ID, v.Name, t.Parallelism, now, t.Parallelism)
			}
		}
	}
	return nil
}

// JobID returns the job's id.
func (jm *JobMaster) JobID() string { return jm.cfg.JobID }

// Tenant returns the tenant that owns the job.
func (jm *JobMaster) Tenant() string { return jm.cfg.Tenant }

// Spec returns what the job was started as.
func (jm *JobMaster) Spec() Spec {
	return Spec{Graph: jm.cfg.Graph, DefaultParallelism: jm.cfg.DefaultParallelism, Config: jm.cfg.JobConfig, Args: jm.cfg.Args}
}

// Done is closed when the job has reached a terminal state.
func (jm *JobMaster) Done() <-chan struct{} { return jm.done }

// Result returns a snapshot of the job: its details and, once FINISHED,
// its records and accumulators.
func (jm *JobMaster) Result() Result {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	r := jm.snap
	if len(jm.metrics) == 0 {
		return r
	}
	// The snapshot's slices are shared with earlier callers: copy them.
	r.Vertices = slices.Clone(r.Vertices)
	for i := range r.Vertices {
		subs := slices.Clone(r.Vertices[i].Subtasks)
		for k := range subs {
			if m, ok := jm.metrics[subs[k].execID]; ok {
				subs[k].Metrics = m
			}
		}
		r.Vertices[i].Subtasks = subs
	}
	return r
}

// ReportMetrics takes the latest figures of the job's tasks, from a
// TaskManager's heartbeat. Figures of executions the job does not run (an
// older attempt's, say) are dropped, and so are figures older than those
// held (a heartbeat that arrives after the task's final report).
func (jm *JobMaster) ReportMetrics(ms []control.ExecutionMetrics) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	for _, m := range ms {
		if old, ok := jm.metrics[m.ExecutionID]; ok && !m.Metrics.Reported.Before(old.Reported) {
			jm.metrics[m.ExecutionID] = m.Metrics
		}
	}
}

// Details returns a snapshot of the job's state.
func (jm *JobMaster) Details() Details { return jm.Result().Details }

// Wait blocks until the job ends or ctx does, and returns the snapshot then.
func (jm *JobMaster) Wait(ctx context.Context) Result {
	select {
	case <-jm.done:
	case <-ctx.Done():
	}
	return jm.Result()
}

// Close stops the JobMaster: a job still live is told to cancel its tasks
// (best effort, bounded by the RPC timeout), its slots are freed, and it
// ends SUSPENDED. Close returns when the goroutine and every call it
// started have ended.
func (jm *JobMaster) Close() {
	jm.stop.Do(func() { close(jm.stopCh) })
	<-jm.done
	jm.bg.Wait()
}

// send delivers ev to the loop, or returns false when the job has ended.
func (jm *JobMaster) send(ev any) bool {
	select {
	case jm.events <- ev:
		return true
	case <-jm.done:
		return false
	}
}

func (jm *JobMaster) endedError() error {
	return rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "job %s has ended (%s)", jm.cfg.JobID, jm.Details().State)
}

// Cancel asks the job to cancel. It returns once the request is taken; wait
// for CANCELED with Wait. Canceling a job that has ended is not an error.
func (jm *JobMaster) Cancel(ctx context.Context) error { return jm.CancelBecause(ctx, "") }

// CancelBecause is Cancel for a reason that is not the tenant's own
// request (its tenant was removed, say): a live job keeps reason in its
// History, where sluice status and the REST exceptions show it.
func (jm *JobMaster) CancelBecause(ctx context.Context, reason string) error {
	reply := make(chan error, 1)
	if !jm.send(evCancel{reply: reply, reason: reason}) {
		return nil
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// UpdateTaskState applies a task's state report.
//
// # Errors
//
//   - ErrStaleFencingToken: the report is from another attempt or session.
//   - ErrNotFound: no such execution in this attempt.
//   - ErrFailedPrecondition: the job has ended.
func (jm *JobMaster) UpdateTaskState(ctx context.Context, u control.TaskUpdate) error {
	return jm.ask(ctx, func(reply chan error) any { return evUpdate{u: u, reply: reply} })
}

// ask sends the loop the event ev makes around a reply channel and waits
// for the answer, or for ctx; a job that has ended answers endedError.
func (jm *JobMaster) ask(ctx context.Context, ev func(reply chan error) any) error {
	reply := make(chan error, 1)
	if !jm.send(ev(reply)) {
		return jm.endedError()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NextSplit returns the next input split of a text source, in order, to
// whichever subtask asks first; done when every split is handed out. A
// source that follows its paths is never done while the job runs: with
// every split handed out it gets a zero Split and done false, no split
// yet, and asks again later.
//
// # Errors
//
// As UpdateTaskState; ErrInvalidArgument when the vertex is not a text
// source of the execution's task.
func (jm *JobMaster) NextSplit(ctx context.Context, r control.SplitRequest) (checkpoint.Split, bool, error) {
	reply := make(chan splitReply, 1)
	if !jm.send(evSplit{r: r, reply: reply}) {
		return checkpoint.Split{}, false, jm.endedError()
	}
	select {
	case rep := <-reply:
		return rep.split, rep.done, rep.err
	case <-ctx.Done():
		return checkpoint.Split{}, false, ctx.Err()
	}
}

// TaskManagerLost tells the job that a TaskManager holding some of its
// allocations is gone. It never blocks for long.
func (jm *JobMaster) TaskManagerLost(l resourcemanager.Lost) {
	jm.send(evLost{l: l})
}

// run is the loop: one event at a time, then a fresh snapshot.
func (jm *JobMaster) run() {
	jm.log.Info("job starting", "name", jm.cfg.Name, "tasks", len(jm.tasks), "slots", slotsNeeded(jm.tasks))
	jm.setState(Running)
	jm.newAttempt()
	jm.startAttempt()
	jm.startRelists()
	jm.publish()
	for !jm.state.Terminal() {
		select {
		case ev := <-jm.events:
			jm.handle(ev)
		case <-jm.stopCh:
			jm.suspend()
		}
		jm.publish()
	}
	jm.attemptCancel()
	jm.jobCancel()
	// The checkpoints' own blob work returns before the cleanup deletes.
	work := slices.Collect(maps.Values(jm.cpWork))
	jm.checkpointEvent(checkpointing.JobEnded{})
	if jm.cfg.Blob != nil && jm.state != Suspended {
		jm.cleanupJob(work)
	}
	jm.publish()
	jm.log.Info("job ended", "state", jm.state, "restarts", jm.restarts, "failure", jm.failure)
	close(jm.done)
}

// newAttempt gives the attempt its context, ended by teardown.
func (jm *JobMaster) newAttempt() {
	jm.attemptCtx, jm.attemptCancel = context.WithCancel(jm.jobCtx)
}

// startAttempt fixes the attempt's restore point and splits, then readies
// the blob store (a restart, or a start from Config.Restore) and requests
// the slots.
func (jm *JobMaster) startAttempt() {
	if jm.cfg.Blob == nil || (jm.attempt == 0 && jm.cfg.Restore == nil) {
		jm.setRestorePoint()
		jm.requestSlots()
		return
	}
	if jm.cp.Writing() {
		// A checkpoint being written may become the restore point, and the
		// sweep must not delete its directory under it.
		jm.awaitWrites = true
		return
	}
	jm.setRestorePoint()
	meta, keep, attempt, ctx := jm.restore, jm.cp.Completed(), jm.attempt, jm.attemptCtx
	if meta != nil {
		jm.log.Info("restoring", "checkpoint", meta.ID, "from_job", meta.JobID, "savepoint", meta.SavepointID, "attempt", attempt)
	}
	jm.goBG(func() {
		err := jm.retry(ctx, "prepare the blob store for the restore", func(ctx context.Context) error {
			if err := jm.stillLeader(ctx); err != nil {
				return err
			}
			return jm.prepareRestore(ctx, meta, keep)
		})
		if err == nil {
			jm.send(evPrepared{attempt: attempt})
		}
	})
}

func (jm *JobMaster) setRestorePoint() {
	jm.restore = jm.cp.Latest()
	// The records the restore point covers are final even when its
	// completion was not announced (the attempt was ending); the rest the
	// restored tasks collect again.
	if r := jm.restore; r != nil && r.JobID == jm.cfg.JobID {
		jm.records.release(r.ID)
		jm.records.skipTo(r.RecordsReleased)
	}
	jm.records.restart()
	jm.base = map[int][]checkpoint.Split{}
	for _, t := range jm.tasks {
		v, ok := t.textSource()
		if !ok {
			continue
		}
		if jm.restore != nil {
			if rest, ok := jm.restore.Sources[v.ID]; ok {
				jm.base[v.ID] = slices.Clone(rest)
				if known, ok := jm.restore.Discovered[v.ID]; ok && v.Connector == jobgraph.ConnectorKafkaSource {
					jm.base[v.ID] = kafkaBase(rest, jm.cfg.Splits[v.ID], known)
				}
				continue
			}
		}
		jm.base[v.ID] = jm.cfg.Splits[v.ID]
	}
	jm.setKnown()
}

func (jm *JobMaster) onPrepared(attempt int64) {
	if attempt != jm.attempt || jm.state != Running || jm.slots != nil || len(jm.execs) > 0 {
		return
	}
	jm.requestSlots()
}

// maybeProceed continues what waited for checkpoint writes to end: the
// restore preparation of a new attempt, the final commit of a finished job.
func (jm *JobMaster) maybeProceed() {
	if jm.cp.Writing() {
		return
	}
	if jm.awaitWrites && jm.state == Running {
		jm.awaitWrites = false
		jm.startAttempt()
	}
	if jm.finishing && !jm.finalStarted && jm.state == Running {
		jm.startFinalCommit()
	}
}

func (jm *JobMaster) handle(ev any) {
	switch ev := ev.(type) {
	case evSlots:
		jm.onSlots(ev)
	case evDeployed:
		jm.onDeployed(ev)
	case evUpdate:
		ev.reply <- jm.onUpdate(ev.u)
	case evSplit:
		ev.reply <- jm.onSplit(ev.r)
	case evDiscovered:
		jm.onDiscovered(ev)
	case evLost:
		jm.onLost(ev.l)
	case evCancel:
		if ev.reason != "" && !jm.state.Terminal() && jm.state != Cancelling {
			jm.log.Info("canceling", "reason", ev.reason)
			jm.noteFailure(ev.reason)
		}
		jm.onCancel()
		ev.reply <- nil
	case evCancelTimeout:
		jm.onCancelTimeout(ev.attempt)
	case evUnreachable:
		jm.onUnreachable(ev.attempt, ev.resourceID)
	case evRestart:
		jm.onRestart(ev.attempt)
	case evPrepared:
		jm.onPrepared(ev.attempt)
	case evFinalCommitted:
		jm.onFinalCommitted(ev)
	default:
		jm.handleCheckpoint(ev)
	}
}

func (jm *JobMaster) setState(s JobState) {
	now := jm.cfg.Now()
	if jm.state != s {
		jm.log.Info("job state", "from", jm.state, "to", s, "attempt", jm.attempt)
	}
	jm.state = s
	jm.stateTimes[s] = now
	if s == Finished {
		// Nothing is replayed now: what any task collected is final.
		jm.records.release(finalRecords)
	}
	if s.Terminal() {
		jm.end = now
	}
}

func (jm *JobMaster) fencing() control.FencingToken {
	return control.FencingToken{LeaderSession: jm.cfg.LeaderSession, JobID: jm.cfg.JobID, Attempt: jm.attempt}
}

// goBG runs f on its own goroutine, counted for Close.
func (jm *JobMaster) goBG(f func()) {
	jm.bg.Add(1)
	go func() {
		defer jm.bg.Done()
		f()
	}()
}

// after sends ev to the loop once d has passed, unless the job ends first.
func (jm *JobMaster) after(d time.Duration, ev any) {
	jm.goBG(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			jm.send(ev)
		case <-jm.done:
		}
	})
}

// requestSlots asks the slot pool for this attempt's slots.
func (jm *JobMaster) requestSlots() {
	ctx := jm.attemptCtx
	attempt, n := jm.attempt, slotsNeeded(jm.tasks)
	jm.goBG(func() {
		var slots []resourcemanager.Slot
		var err error
		if tp, ok := jm.cfg.Slots.(TenantSlotPool); ok {
			slots, err = tp.RequestTenantSlots(ctx, jm.cfg.Tenant, jm.cfg.JobID, n)
		} else {
			slots, err = jm.cfg.Slots.RequestSlots(ctx, jm.cfg.JobID, n)
		}
		if !jm.send(evSlots{attempt: attempt, slots: slots, err: err}) && err == nil {
			jm.cfg.Slots.ReleaseSlots(allocIDs(slots)...)
		}
	})
}

func (jm *JobMaster) onSlots(ev evSlots) {
	if ev.attempt != jm.attempt || jm.state != Running || jm.slots != nil {
		if ev.err == nil {
			jm.releaseSlots(ev.slots) // the attempt moved on meanwhile
		}
		return
	}
	if ev.err != nil {
		if errors.Is(ev.err, context.Canceled) {
			return
		}
		jm.failure = fmt.Sprintf("could not get %d slots for the job: %v", slotsNeeded(jm.tasks), ev.err)
		jm.log.Error("job failed: no slots", "err", ev.err)
		jm.setState(Failed)
		return
	}
	jm.slots = ev.slots
	jm.execs = nil
	jm.byID = map[string]*execution{}
	for _, t := range jm.tasks {
		for i := range t.parallelism {
			x := &execution{
				id:      fmt.Sprintf("%s.a%d.t%d.s%d", jm.cfg.JobID, jm.attempt, t.index, i),
				task:    t,
				subtask: i,
				slot:    ev.slots[i],
				state:   ExecDeploying,
			}
			jm.execs = append(jm.execs, x)
			jm.byID[x.id] = x
		}
	}
	splits := map[int][]checkpoint.Split{}
	for v, ss := range jm.base {
		splits[v] = slices.Clone(ss)
	}
	jm.checkpointEvent(checkpointing.Deployed{Tasks: jm.cpTasks(), Splits: splits, Discovered: jm.knownKeys()})
	// Consumers before producers: a producer's channels then find their
	// consumer's inputs registered (the exchange also retries, bounded).
	var order []control.Deployment
	var addrs []string
	for ti := len(jm.tasks) - 1; ti >= 0; ti-- {
		for _, x := range jm.execs {
			if x.task.index == ti {
				order = append(order, jm.deployment(x))
				addrs = append(addrs, x.slot.RPCAddress)
			}
		}
	}
	ctx, attempt := jm.attemptCtx, jm.attempt
	jm.goBG(func() {
		for i, d := range order {
			if ctx.Err() != nil {
				jm.send(evDeployed{attempt: attempt, id: d.ExecutionID, skipped: true})
				continue
			}
			cctx, ccancel := context.WithTimeout(ctx, jm.cfg.RPCTimeout)
			err := jm.cfg.Gateway.DeployTask(cctx, addrs[i], d)
			ccancel()
			jm.send(evDeployed{attempt: attempt, id: d.ExecutionID, err: err})
		}
	})
}

// deployment builds what x's TaskManager needs.
func (jm *JobMaster) deployment(x *execution) control.Deployment {
	t := x.task
	d := control.Deployment{
		Fencing:          jm.fencing(),
		ExecutionID:      x.id,
		JobID:            jm.cfg.JobID,
		JobName:          jm.cfg.Name,
		Tenant:           jm.cfg.Tenant,
		Limits:           jm.cfg.Limits,
		ModuleDigest:     jm.cfg.ModuleDigest,
		Args:             slices.Clone(jm.cfg.Args),
		Chain:            slices.Clone(t.vertices),
		Subtask:          x.subtask,
		Parallelism:      t.parallelism,
		MaxParallelism:   jobgraph.MaxParallelismOf(jm.cfg.Graph),
		AllocationID:     x.slot.AllocationID,
		JobMasterAddress: jm.cfg.Address,
		Config:           jm.cfg.JobConfig,
	}
	if jm.restore != nil {
		start, end := keygroup.Range(x.subtask, t.parallelism, d.MaxParallelism)
		d.Restore = checkpoint.RestoreFor(jm.restore, vertexIDs(t), start, end)
	}
	for _, in := range t.inputs {
		d.Inputs = append(d.Inputs, control.InputSpec{ResultID: resultID(jm.cfg.JobID, jm.attempt, in.edge), Producers: producersPerConsumer(in)})
	}
	for _, out := range t.outputs {
		targets := make([]string, out.consumer.parallelism)
		for i := range targets {
			targets[i] = jm.slots[i].DataAddress // consumer subtask i runs in slot i
		}
		d.Outputs = append(d.Outputs, control.OutputSpec{ResultID: resultID(jm.cfg.JobID, jm.attempt, out.edge), Partitioner: out.edge.Partitioner, Targets: targets})
	}
	return d
}

func (jm *JobMaster) onDeployed(ev evDeployed) {
	x := jm.byID[ev.id]
	if ev.attempt != jm.attempt || x == nil {
		return
	}
	x.deployAcked = true
	switch {
	case ev.skipped:
		jm.execEnded(x, ExecCanceled, "")
	case ev.err != nil:
		if execTerminal(x.state) {
			break
		}
		unreachable := jm.noteCallErr(x.slot, ev.err)
		msg := fmt.Sprintf("deploy to task manager %s (%s): %v", x.slot.ResourceID, x.slot.RPCAddress, ev.err)
		if jm.state != Running {
			// The attempt is being torn down (the call was probably cut
			// short by it): nothing to blame, nothing left to cancel.
			jm.execEnded(x, ExecCanceled, "")
		} else {
			jm.execEnded(x, ExecFailed, msg)
			jm.fail(x, msg)
		}
		if unreachable {
			jm.onUnreachable(jm.attempt, x.slot.ResourceID)
		}
	case jm.state == Failing || jm.state == Cancelling:
		jm.cancelExec(x) // deployed while the attempt was being torn down
	}
	jm.settle()
}

func (jm *JobMaster) checkFencing(f control.FencingToken) error {
	if f.JobID != jm.cfg.JobID || f.LeaderSession != jm.cfg.LeaderSession {
		return rpcerr.Errorf(rpcerr.ErrStaleFencingToken, "fencing token of job %s session %q does not match job %s session %q", f.JobID, f.LeaderSession, jm.cfg.JobID, jm.cfg.LeaderSession)
	}
	if f.Attempt != jm.attempt {
		return rpcerr.Errorf(rpcerr.ErrStaleFencingToken, "job %s: attempt %d is stale: the job is at attempt %d", jm.cfg.JobID, f.Attempt, jm.attempt)
	}
	return nil
}

func (jm *JobMaster) onUpdate(u control.TaskUpdate) error {
	if err := jm.checkFencing(u.Fencing); err != nil {
		return err
	}
	x := jm.byID[u.ExecutionID]
	if x == nil {
		return rpcerr.Errorf(rpcerr.ErrNotFound, "job %s has no execution %q in attempt %d", jm.cfg.JobID, u.ExecutionID, jm.attempt)
	}
	if execTerminal(x.state) {
		// E.g. CANCELED after the cancel timeout gave up on it. A cause it
		// reports late still names the attempt's failure.
		if u.State == ExecFailed && u.FailureKind != control.FailureConsequence {
			jm.upgradeFailure(x.failedMessage(u.Failure, false))
		}
		return nil
	}
	log := jm.log.With("task", x.task.name, "subtask", x.subtask, "tm", x.slot.ResourceID)
	if u.Metrics != nil {
		jm.ReportMetrics([]control.ExecutionMetrics{{ExecutionID: x.id, Metrics: *u.Metrics}})
	}
	switch u.State {
	case ExecDeploying, ExecRunning:
		if x.state != ExecCanceling {
			x.state = u.State
		}
		jm.checkpointEvent(checkpointing.TaskStarted{})
	case ExecFinished:
		if jm.cfg.Blob != nil {
			if err := jm.cp.CheckSinkParts(u.SinkParts); err != nil {
				msg := fmt.Sprintf("%s finished with bad file-sink parts: %v", x.describe(), err)
				jm.execEnded(x, ExecFailed, msg)
				jm.fail(x, msg)
				jm.settle()
				return err
			}
		}
		jm.execEnded(x, ExecFinished, "")
		jm.records.add(finalRecords, x.id, u.Collected, u.CollectedFrom)
		for k, v := range u.Accumulators {
			jm.accumulators[k] += v
		}
		for _, sp := range u.SinkParts {
			if !slices.ContainsFunc(jm.finalParts, func(o checkpoint.SinkPart) bool { return o.Pending == sp.Pending }) {
				jm.finalParts = append(jm.finalParts, sp)
			}
		}
		jm.checkpointEvent(checkpointing.TaskFinished{ExecutionID: x.id})
	case ExecFailed:
		consequence := u.FailureKind == control.FailureConsequence
		msg := x.failedMessage(u.Failure, consequence)
		if jm.state == Cancelling {
			// As in Flink: a task that fails while its job is canceled
			// ends CANCELED; the failure is no longer the job's concern.
			log.Info("task failed while the job was canceling; counted as canceled", "failure", u.Failure, "consequence", consequence)
			jm.execEnded(x, ExecCanceled, "")
			if !consequence {
				jm.upgradeFailure(msg)
			}
			break
		}
		log.Warn("task failed", "failure", u.Failure, "consequence", consequence)
		jm.execEnded(x, ExecFailed, msg)
		jm.failWith(msg, consequence)
	case ExecCanceled:
		wanted := x.cancelSent || jm.state != Running
		jm.execEnded(x, ExecCanceled, "")
		if jm.cp.Stopping() {
			// Ended by a stop-with-savepoint: the job FINISHES, with what
			// its tasks counted up to the savepoint (Flink's accumulators
			// after a stop).
			for k, v := range u.Accumulators {
				jm.accumulators[k] += v
			}
		}
		if !wanted {
			jm.fail(x, fmt.Sprintf("task %q subtask %d/%d was canceled on task manager %s", x.task.name, x.subtask+1, x.task.parallelism, x.slot.ResourceID))
		}
	default:
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "unknown task state %q (want DEPLOYING, RUNNING, FINISHED, CANCELED or FAILED)", u.State)
	}
	jm.settle()
	return nil
}

func (jm *JobMaster) execEnded(x *execution, state, failure string) {
	x.state = state
	if failure != "" {
		x.failure = failure
	}
}

func (jm *JobMaster) allFinished() bool {
	for _, x := range jm.execs {
		if x.state != ExecFinished {
			return false
		}
	}
	return len(jm.execs) > 0
}

// failedMessage is the failure of x as the job shows it.
func (x *execution) failedMessage(failure string, consequence bool) string {
	how := "failed"
	if consequence {
		how = "failed as a consequence of another failure"
	}
	return fmt.Sprintf("task %q subtask %d/%d on task manager %s %s: %s", x.task.name, x.subtask+1, x.task.parallelism, x.slot.ResourceID, how, failure)
}

// fail starts failing the attempt because of x (nil: not one task's
// fault); cause is a root cause.
func (jm *JobMaster) fail(_ *execution, cause string) { jm.failWith(cause, false) }

// failWith starts failing the attempt because of cause, a root cause or
// (consequence) a task's report of a failure elsewhere. The first report
// decides when the attempt fails, the first cause what the job shows as
// its failure: a consequence usually arrives first (the peer that caused
// it reports through the same JobManager, but after tearing itself down),
// so a cause reported later in the attempt replaces it (upgradeFailure).
func (jm *JobMaster) failWith(cause string, consequence bool) {
	if jm.state != Running || jm.finishing {
		if !consequence {
			jm.upgradeFailure(cause)
		}
		return
	}
	if jm.cp.Stopping() {
		// The savepoint is taken and the tasks are being canceled anyway.
		jm.log.Info("failure while stopping after the savepoint; ignored", "cause", cause)
		return
	}
	jm.failure = cause
	jm.consequence = consequence
	jm.failedAttempt = jm.attempt
	jm.failedAt = time.Now()
	jm.noteFailure(cause)
	jm.log.Warn("job failing", "attempt", jm.attempt, "cause", cause)
	jm.checkpointEvent(checkpointing.AttemptEnding{Reason: "the job is failing: " + cause})
	jm.setState(Failing)
	jm.teardown()
}

// teardown cancels every live execution of the attempt and arms the cancel
// timeout.
func (jm *JobMaster) teardown() {
	if jm.attemptCancel != nil {
		jm.attemptCancel() // stops deploying and a pending slot request
	}
	for _, x := range jm.execs {
		if !execTerminal(x.state) && x.deployAcked {
			jm.cancelExec(x)
		}
	}
	jm.after(jm.cfg.CancelTimeout, evCancelTimeout{attempt: jm.attempt})
	jm.settle()
}

// upgradeFailure makes cause, a root cause reported in the failing
// attempt, the job's failure when what it shows is a consequence.
func (jm *JobMaster) upgradeFailure(cause string) {
	if !jm.consequence || jm.failedAttempt != jm.attempt || jm.state == Running || jm.state.Terminal() {
		return
	}
	jm.log.Info("root cause of the failure found", "cause", cause, "consequence", jm.failure)
	jm.failure = cause
	jm.consequence = false
	jm.historyCause(cause)
}

func (jm *JobMaster) cancelExec(x *execution) {
	if x.cancelSent || execTerminal(x.state) {
		return
	}
	x.cancelSent = true
	x.state = ExecCanceling
	if jm.unreachable[x.slot.ResourceID] {
		jm.endUnreachable(x) // no confirmation can come
		return
	}
	slot, id, f, attempt := x.slot, x.id, jm.fencing(), jm.attempt
	jm.goBG(func() {
		ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
		defer cancel()
		if err := jm.cfg.Gateway.CancelTask(ctx, slot.RPCAddress, f, id); err != nil {
			jm.log.Warn("cancel task failed", "execution", id, "tm_address", slot.RPCAddress, "err", err)
			if jm.noteCallErr(slot, err) {
				jm.send(evUnreachable{attempt: attempt, resourceID: slot.ResourceID})
			}
		}
	})
}

// onUnreachable notes that a call of the attempt could not reach a
// TaskManager: the tasks on it that are being canceled count as canceled
// at once. Waiting for their confirmation would only run out the cancel
// timeout, and their slots are held back already (SlotPool.
// ReportUnreachable), so the restart cannot land on them; a TaskManager
// that answers, however slowly, is still waited for up to the cancel
// timeout.
func (jm *JobMaster) onUnreachable(attempt int64, resourceID string) {
	if attempt != jm.attempt {
		return
	}
	if jm.unreachable == nil {
		jm.unreachable = map[string]bool{}
	}
	jm.unreachable[resourceID] = true
	var first *execution
	for _, x := range jm.execs {
		if x.slot.ResourceID != resourceID {
			continue
		}
		if first == nil {
			first = x
		}
		if x.cancelSent && !execTerminal(x.state) {
			jm.endUnreachable(x)
		}
	}
	// A peer's broken channel reported first, then its TaskManager gone:
	// the TaskManager is the cause (its "lost" from the ResourceManager
	// usually comes only after the restart, too late to say so).
	if first != nil {
		jm.upgradeFailure(fmt.Sprintf("task %q subtask %d/%d: task manager %s unreachable", first.task.name, first.subtask+1, first.task.parallelism, resourceID))
	}
	jm.settle()
}

func (jm *JobMaster) endUnreachable(x *execution) {
	jm.log.Warn("task manager unreachable; its task counts as canceled", "execution", x.id, "tm", x.slot.ResourceID)
	jm.execEnded(x, ExecCanceled, fmt.Sprintf("task manager %s unreachable: counted as canceled", x.slot.ResourceID))
	x.deployAcked = true
}

// settle moves the job on once every execution ended: a running job
// finishes, a failing one restarts or fails, a cancelling one is canceled.
func (jm *JobMaster) settle() {
	if jm.state == Running {
		jm.maybeFinish()
		return
	}
	if jm.state != Failing && jm.state != Cancelling {
		return
	}
	if !jm.allEnded() {
		return
	}
	jm.releaseSlots(jm.slots)
	jm.slots = nil
	if jm.state == Cancelling {
		jm.setState(Canceled)
		return
	}
	if delay, ok := jm.restarter.failure(jm.failedAt); ok {
		jm.setState(Restarting)
		jm.log.Info("restarting job", "in", delay, "restart", jm.restarts+1, "strategy", jm.cfg.Restart.String())
		jm.after(delay, evRestart{attempt: jm.attempt})
		return
	}
	if reason := jm.cfg.Restart.giveUpReason(); reason != "" {
		jm.failure = fmt.Sprintf("%s (gave up after %d restarts: %s)", jm.failure, jm.restarts, reason)
	}
	jm.setState(Failed)
}

func (jm *JobMaster) allEnded() bool {
	for _, x := range jm.execs {
		if !execTerminal(x.state) {
			return false
		}
	}
	return true
}

// maybeFinish starts finishing a running job once every task FINISHED (or,
// after a stop-with-savepoint, ended): the final sink commit, after any
// checkpoint still being written, then FINISHED.
func (jm *JobMaster) maybeFinish() {
	if jm.finishing || len(jm.execs) == 0 || !(jm.allFinished() || (jm.cp.Stopping() && jm.allEnded())) {
		return
	}
	jm.finishing = true
	jm.releaseSlots(jm.slots)
	jm.slots = nil
	jm.checkpointEvent(checkpointing.AttemptEnding{Reason: "the job finished"})
	jm.maybeProceed()
}

// startFinalCommit commits the parts the FINISHED tasks reported, in the
// background, retrying until it works or the job is canceled.
func (jm *JobMaster) startFinalCommit() {
	jm.finalStarted = true
	parts := jm.finalParts
	if len(parts) == 0 {
		jm.setState(Finished)
		return
	}
	if jm.cfg.Blob == nil {
		jm.failure = fmt.Sprintf("%d file-sink parts to commit but the job master has no blob store", len(parts))
		jm.setState(Failed)
		return
	}
	ctx, attempt := jm.attemptCtx, jm.attempt
	jm.log.Info("committing the job's final file-sink parts", "parts", len(parts))
	jm.goBG(func() {
		wait := retryMin
		for {
			err := checkpoint.Commit(ctx, jm.cfg.Blob, parts)
			if !jm.send(evFinalCommitted{attempt: attempt, err: err}) || err == nil || ctx.Err() != nil {
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			wait = min(2*wait, retryMax)
		}
	})
}

func (jm *JobMaster) onFinalCommitted(ev evFinalCommitted) {
	if ev.attempt != jm.attempt || !jm.finishing || jm.state != Running {
		return
	}
	if ev.err != nil {
		jm.finalErr = ev.err.Error()
		jm.log.Warn("final file-sink commit failed; retrying", "err", ev.err)
		return
	}
	jm.setState(Finished)
}

func (jm *JobMaster) onCancelTimeout(attempt int64) {
	stopping := jm.state == Running && jm.cp.Stopping()
	if attempt != jm.attempt || (jm.state != Failing && jm.state != Cancelling && !stopping) {
		return
	}
	for _, x := range jm.execs {
		if !execTerminal(x.state) {
			jm.log.Warn("task did not confirm cancel in time; freeing its slot", "execution", x.id, "tm", x.slot.ResourceID, "timeout", jm.cfg.CancelTimeout)
			jm.execEnded(x, ExecCanceled, fmt.Sprintf("did not confirm cancel within %v", jm.cfg.CancelTimeout))
		}
	}
	jm.settle()
}

func (jm *JobMaster) onRestart(attempt int64) {
	if attempt != jm.attempt || jm.state != Restarting {
		return
	}
	jm.attempt++
	jm.restarts++
	jm.unreachable = nil // the pool holds their slots back until they heartbeat
	jm.execs = nil
	jm.byID = map[string]*execution{}
	jm.splits, jm.handed = nil, nil
	jm.accumulators = map[string]int64{}
	jm.finalParts, jm.finalErr = nil, ""
	jm.setState(Running)
	jm.checkpointEvent(checkpointing.Restarted{})
	jm.newAttempt()
	jm.startAttempt()
}

func (jm *JobMaster) onLost(l resourcemanager.Lost) {
	lost := map[string]bool{}
	for _, a := range l.Allocations {
		lost[a] = true
	}
	// By allocation: a TaskManager that restarted keeps the allocations its
	// slot report still showed. A Lost without allocations means all of
	// the TaskManager's.
	gone := func(s resourcemanager.Slot) bool {
		return lost[s.AllocationID] || (len(l.Allocations) == 0 && s.ResourceID == l.ResourceID)
	}
	var hit *execution
	for _, x := range jm.execs {
		if gone(x.slot) && !execTerminal(x.state) {
			if jm.state == Cancelling {
				jm.execEnded(x, ExecCanceled, fmt.Sprintf("task manager %s lost (%s) while canceling", l.ResourceID, l.Reason))
			} else {
				jm.execEnded(x, ExecFailed, fmt.Sprintf("task manager %s lost (%s)", l.ResourceID, l.Reason))
			}
			x.deployAcked = true // nothing to cancel on a dead TaskManager
			if hit == nil {
				hit = x
			}
		}
	}
	// The lost slots are gone: do not free them on the TaskManager.
	jm.slots = slices.DeleteFunc(jm.slots, gone)
	if hit != nil {
		jm.fail(hit, fmt.Sprintf("task %q subtask %d/%d: task manager %s lost (%s)", hit.task.name, hit.subtask+1, hit.task.parallelism, l.ResourceID, l.Reason))
	}
	jm.settle()
}

func (jm *JobMaster) onCancel() {
	if jm.state == Running && jm.finishing {
		jm.attemptCancel()
		if n := len(jm.finalParts); n > 0 && jm.state == Running {
			why := jm.finalErr
			if why == "" {
				why = "the commit was still in progress"
			}
			jm.failure = fmt.Sprintf("canceled before the job's final output (%d file-sink parts) was committed: %s", n, why)
			jm.setState(Failed)
			return
		}
		jm.setState(Canceled)
		return
	}
	switch jm.state {
	case Created, Restarting:
		jm.setState(Canceled)
	case Running, Failing:
		jm.checkpointEvent(checkpointing.AttemptEnding{Reason: "the job is being canceled"})
		jm.setState(Cancelling)
		jm.teardown()
	}
}

// suspend ends a live job because the JobManager shuts down.
func (jm *JobMaster) suspend() {
	jm.checkpointEvent(checkpointing.AttemptEnding{Reason: "the job manager is shutting down"})
	if jm.attemptCancel != nil {
		jm.attemptCancel()
	}
	for _, x := range jm.execs {
		if !execTerminal(x.state) && x.deployAcked {
			jm.cancelExec(x)
		}
	}
	jm.releaseSlots(jm.slots)
	jm.slots = nil
	jm.setState(Suspended)
}

func (jm *JobMaster) onSplit(r control.SplitRequest) splitReply {
	if err := jm.checkFencing(r.Fencing); err != nil {
		return splitReply{err: err}
	}
	x := jm.byID[r.ExecutionID]
	if x == nil {
		return splitReply{err: rpcerr.Errorf(rpcerr.ErrNotFound, "job %s has no execution %q in attempt %d", jm.cfg.JobID, r.ExecutionID, jm.attempt)}
	}
	v, ok := x.task.textSource()
	if !ok || v.ID != r.VertexID {
		return splitReply{err: rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d is not the text source of execution %s", r.VertexID, r.ExecutionID)}
	}
	if jm.state != Running {
		return splitReply{done: true} // the attempt is being torn down
	}
	if jm.splits == nil {
		jm.splits = map[int]int{}
	}
	all := jm.base[r.VertexID]
	if v, _ := x.task.textSource(); v.Connector == jobgraph.ConnectorKafkaSource {
		return jm.kafkaSplit(r, x.task.parallelism, all)
	}
	i := jm.splits[r.VertexID]
	if i >= len(all) {
		// A following source waits for its relists, a subtask of an
		// unbounded generator with more subtasks than timelines for ever
		// (as Flink's unbounded readers without a split): no split yet,
		// so the subtask stays, idle, and checkpoints go on.
		_, following := jm.follow[r.VertexID]
		return splitReply{done: !following && !unboundedGenerator(v)}
	}
	jm.splits[r.VertexID] = i + 1
	jm.log.Debug("split assigned", "vertex", r.VertexID, "subtask", r.Subtask, "key", all[i].Key, "offset", all[i].Offset)
	return splitReply{split: all[i]}
}

// unboundedGenerator reports whether v is a nexmark source without an end.
func unboundedGenerator(v jobgraph.Vertex) bool {
	if v.Connector != jobgraph.ConnectorNexmark {
		return false
	}
	set, err := v.Nexmark()
	return err == nil && set.Events == 0
}

// releaseSlots frees slots on their TaskManagers, then returns them to the
// pool, in the background (a dead TaskManager answers slowly).
func (jm *JobMaster) releaseSlots(slots []resourcemanager.Slot) {
	for _, s := range slots {
		jm.goBG(func() {
			ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
			defer cancel()
			if err := jm.cfg.Gateway.FreeSlot(ctx, s.RPCAddress, s.AllocationID); err != nil {
				jm.log.Warn("free slot failed", "allocation", s.AllocationID, "tm", s.ResourceID, "err", err)
				jm.noteCallErr(s, err)
			}
			jm.cfg.Slots.ReleaseSlots(s.AllocationID)
		})
	}
}

// noteCallErr tells the ResourceManager when a call failed because s's
// TaskManager could not be reached, so that a restart does not get its
// slots again before the heartbeat timeout declares it dead. It reports
// whether that was the case.
func (jm *JobMaster) noteCallErr(s resourcemanager.Slot, err error) bool {
	if !errors.Is(err, rpcerr.ErrUnreachable) {
		return false
	}
	jm.cfg.Slots.ReportUnreachable(s.ResourceID)
	return true
}

// publish refreshes the snapshot readers see.
func (jm *JobMaster) publish() {
	r := Result{Details: Details{
		JobID:        jm.cfg.JobID,
		Name:         jm.cfg.Name,
		Tenant:       jm.cfg.Tenant,
		ModuleDigest: jm.cfg.ModuleDigest,
		State:        jm.state,
		Start:        jm.start,
		End:          jm.end,
		Failure:      jm.currentFailure(),
		Restarts:     jm.restarts,
		History:      slices.Clone(jm.history),
		StateTimes:   maps.Clone(jm.stateTimes),
	}}
	r.Records, r.RecordsOffset = jm.records.released, jm.records.offset
	r.RecordsTotal = r.RecordsOffset + int64(len(r.Records))
	if jm.state == Finished {
		r.Accumulators = maps.Clone(jm.accumulators)
	}
	if !jm.end.IsZero() {
		r.Duration = jm.end.Sub(jm.start)
	}
	byTask := map[*task][]*execution{}
	for _, x := range jm.execs {
		byTask[x.task] = append(byTask[x.task], x)
	}
	for _, t := range jm.tasks {
		for _, v := range t.vertices {
			vs := VertexStatus{ID: v.ID, Name: v.Name, Parallelism: t.parallelism}
			for i := range t.parallelism {
				st := SubtaskStatus{Index: i, State: ExecCreated, Attempt: int(jm.attempt)}
				if xs := byTask[t]; i < len(xs) {
					st.State, st.TaskManager, st.Failure = xs[i].state, xs[i].slot.ResourceID, xs[i].failure
					st.execID = xs[i].id
				}
				vs.Subtasks = append(vs.Subtasks, st)
			}
			r.Vertices = append(r.Vertices, vs)
		}
	}
	cps, counts := jm.cp.Stats(), jm.cp.Counts()
	jm.mu.Lock()
	if r.RecordsTotal != jm.snap.RecordsTotal {
		close(jm.recordsChanged)
		jm.recordsChanged = make(chan struct{})
	}
	jm.snap = r
	jm.cpSnap = cps
	jm.cpCounts = counts
	// Keep figures of the executions shown only, and make room for theirs.
	live := make(map[string]control.TaskMetrics, len(jm.execs))
	for _, x := range jm.execs {
		live[x.id] = jm.metrics[x.id]
	}
	jm.metrics = live
	jm.mu.Unlock()
}

func allocIDs(s []resourcemanager.Slot) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].AllocationID
	}
	return out
}
