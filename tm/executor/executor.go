package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/logring"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/tm/exchange"
	"github.com/sluicehq/sluice/tm/task"
	"github.com/sluicehq/sluice/wasmhost"
)

// Config configures an Executor.
type Config struct {
	Slots      int
	Runtime    *wasmhost.Runtime
	Blob       blob.Store
	Exchange   *exchange.Manager
	JobMasters JobMasters
	// CacheDir keeps downloaded module bytes by digest; "" keeps them in
	// memory only (compiled modules are cached by the wasmhost runtime).
	CacheDir string
	// ModuleMemory and ModuleDisk are the module cache's budgets in bytes
	// (compiled modules, and module files under CacheDir); 0 means
	// DefaultModuleMemoryBudget and DefaultModuleDiskBudget.
	ModuleMemory, ModuleDisk int64
	// Limits bound every task's guest; a deployment's own limits can only
	// lower them. Zero fields take wasmhost's defaults.
	Limits wasmhost.Limits
	Logger *slog.Logger
	// ReportTimeout bounds the retries of one task state report; 0 means 30s.
	ReportTimeout time.Duration

	// ResourceID names this TaskManager in the log lines it keeps.
	ResourceID string
	// TaskLogLines and TaskLogBytes bound the kept log of one task, and
	// EndedTaskLogs how many ended tasks' logs stay readable; 0 means
	// DefaultTaskLogLines, DefaultTaskLogBytes, DefaultEndedTaskLogs.
	TaskLogLines  int
	TaskLogBytes  int64
	EndedTaskLogs int
	// OwnLog, when set, is the ring the TaskManager's own log is kept in
	// (TaskManagerLogs reads it).
	OwnLog *logring.Ring
	// Now is the clock of kept host events; nil means time.Now.
	Now func() time.Time
	// DisableMetrics turns the task metrics off: tasks count nothing,
	// heartbeats and final reports carry no figures.
	DisableMetrics bool
}

// Executor owns the slots and tasks of one TaskManager.
//
// Lock order: Executor.mu, then nothing; no RPC or blocking call happens
// while it is held.
type Executor struct {
	cfg     Config
	log     *slog.Logger
	modules *ModuleCache

	ctx    context.Context // canceled by Close: the parent of every task
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu           sync.Mutex
	closed       bool
	registration string // current registration id; "" when not registered
	slots        []slot
	byAlloc      map[string]int                  // allocation id -> slot index
	tasks        map[string]*runningTask         // execution id -> task
	fencing      map[string]control.FencingToken // job id -> newest token seen
	// newestEpoch is the election revision of the newest HA leader
	// session seen (control.SessionEpoch): calls of older sessions come
	// from a deposed JobManager and are refused.
	newestEpoch  int64
	refusedStale int64
	logs         map[string]*taskLog // execution id -> kept log, running and recently ended tasks
	ended        []string            // execution ids of ended tasks with kept logs, oldest first
	// endedStats are the final figures of tasks that ended since the last
	// TaskStats; guestFailures counts traps and deadline hits by tenant.
	endedStats    []endedStat
	guestFailures map[string]GuestFailures
}

type slot struct {
	allocationID string
	jobID        string
}

type runningTask struct {
	d      control.Deployment
	cancel context.CancelFunc
	done   chan struct{}
	ctl    *task.Control // checkpoint triggers and notifications
	log    *taskLog
	inst   atomic.Pointer[wasmhost.Instance] // the guest, once instantiated: for stack samples
	meter  *taskMeter                        // nil with metrics off
}

// New returns an Executor with cfg.Slots free slots.
func New(cfg Config) *Executor {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReportTimeout <= 0 {
		cfg.ReportTimeout = 30 * time.Second
	}
	if cfg.TaskLogLines <= 0 {
		cfg.TaskLogLines = DefaultTaskLogLines
	}
	if cfg.TaskLogBytes <= 0 {
		cfg.TaskLogBytes = DefaultTaskLogBytes
	}
	if cfg.EndedTaskLogs <= 0 {
		cfg.EndedTaskLogs = DefaultEndedTaskLogs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Executor{
		cfg:     cfg,
		log:     cfg.Logger,
		modules: NewModuleCache(cfg.Runtime, cfg.Blob, cfg.CacheDir, cfg.ModuleMemory, cfg.ModuleDisk),
		ctx:     ctx,
		cancel:  cancel,
		slots:   make([]slot, cfg.Slots),
		byAlloc: make(map[string]int),
		tasks:   make(map[string]*runningTask),
		fencing: make(map[string]control.FencingToken),
		logs:    make(map[string]*taskLog),

		guestFailures: make(map[string]GuestFailures),
	}
}

func (e *Executor) now() time.Time { return e.cfg.Now() }

// ModuleCacheStats reports the module cache's figures (ModuleCache.Stats).
func (e *Executor) ModuleCacheStats() CacheStats { return e.modules.Stats() }

// Modules is the executor's module cache (fetch, verify, compile, keep).
func (e *Executor) Modules() *ModuleCache { return e.modules }

// DeployTask checks d against the slot table and the job's fencing token and
// starts the task; it returns once the task is accepted, before the module
// is fetched. Progress is reported to d.JobMasterAddress.
//
// # Errors
//
// ErrInvalidDeployment, ErrStaleFencing, ErrSlotMismatch, ErrNoFreeSlot,
// ErrUnavailable. Deploying an execution id that is already running with the
// same token is a no-op, so a retried RPC does not start a second copy.
func (e *Executor) DeployTask(_ context.Context, d control.Deployment) error {
	if err := validateDeployment(&d); err != nil {
		return err
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrUnavailable
	}
	if t, ok := e.tasks[d.ExecutionID]; ok {
		e.mu.Unlock()
		if t.d.Fencing == d.Fencing {
			return nil
		}
		return fmt.Errorf("%w: execution %s is already running under attempt %d", ErrInvalidDeployment, d.ExecutionID, t.d.Fencing.Attempt)
	}
	if err := e.sessionAllowedLocked(d.Fencing.LeaderSession, "deploy"); err != nil {
		e.mu.Unlock()
		return err
	}
	older := e.observeSessionLocked(d.Fencing.LeaderSession)
	stale, err := e.checkFencingLocked(d.Fencing)
	if err != nil {
		e.mu.Unlock()
		return err
	}
	stale = append(stale, older...)
	idx, ok := e.byAlloc[d.AllocationID]
	if ok {
		if s := e.slots[idx]; s.jobID != d.JobID {
			e.mu.Unlock()
			return fmt.Errorf("%w: allocation %s holds job %s, not %s", ErrSlotMismatch, d.AllocationID, s.jobID, d.JobID)
		}
	} else {
		idx = -1
		for i := range e.slots {
			if e.slots[i].allocationID == "" {
				idx = i
				break
			}
		}
		if idx < 0 {
			e.mu.Unlock()
			return fmt.Errorf("%w: all %d slots are allocated (allocation %s)", ErrNoFreeSlot, len(e.slots), d.AllocationID)
		}
		e.slots[idx] = slot{allocationID: d.AllocationID, jobID: d.JobID}
		e.byAlloc[d.AllocationID] = idx
	}
	ctx, cancel := context.WithCancel(e.ctx)
	t := &runningTask{d: d, cancel: cancel, done: make(chan struct{}), ctl: task.NewControl()}
	if !e.cfg.DisableMetrics {
		t.meter = &taskMeter{m: task.NewMetrics()}
	}
	e.tasks[d.ExecutionID] = t
	e.wg.Add(1)
	e.mu.Unlock()
	t.log = e.newTaskLog(d)
	e.event(t.log, d.ExecutionID, slog.LevelInfo, "task deployed", fmt.Sprintf("attempt=%d allocation=%s", d.Fencing.Attempt, d.AllocationID))

	for _, s := range stale {
		e.log.Info("canceling task of an older attempt", "job", s.d.JobID, "task", s.d.ExecutionID,
			"attempt", s.d.Fencing.Attempt, "new_attempt", d.Fencing.Attempt)
		s.cancel()
	}
	go e.run(ctx, t)
	return nil
}

// checkFencingLocked accepts tok if it is not older than the newest token
// seen for its job, records it, and returns the tasks of older attempts,
// which the caller cancels. A token from another leader session replaces the
// old one: the JobManager that deploys now is the leader.
func (e *Executor) checkFencingLocked(tok control.FencingToken) ([]*runningTask, error) {
	known, ok := e.fencing[tok.JobID]
	if ok && known.LeaderSession == tok.LeaderSession && tok.Attempt < known.Attempt {
		return nil, fmt.Errorf("%w: job %s attempt %d, but attempt %d is current", ErrStaleFencing, tok.JobID, tok.Attempt, known.Attempt)
	}
	if ok && known == tok {
		return nil, nil
	}
	e.fencing[tok.JobID] = tok
	var stale []*runningTask
	for _, t := range e.tasks {
		if t.d.JobID == tok.JobID && t.d.Fencing != tok {
			stale = append(stale, t)
		}
	}
	return stale, nil
}

// sessionAllowedLocked refuses a call of an HA leader session older than
// the newest seen: the JobManager that makes it was deposed.
func (e *Executor) sessionAllowedLocked(session, what string) error {
	if ep, ok := control.SessionEpoch(session); ok && ep < e.newestEpoch {
		e.refusedStale++
		e.log.Warn("refused a call of a deposed JobManager", "call", what, "session", session, "leader", control.HASession(e.newestEpoch))
		return fmt.Errorf("%w: cannot %s: leader session %s is older than %s: that JobManager is no longer the leader",
			ErrStaleFencing, what, session, control.HASession(e.newestEpoch))
	}
	return nil
}

// deposed reports whether session is an HA leader session older than the
// newest seen.
func (e *Executor) deposed(session string) bool {
	ep, ok := control.SessionEpoch(session)
	e.mu.Lock()
	defer e.mu.Unlock()
	return ok && ep < e.newestEpoch
}

// observeSessionLocked records a newer HA leader session and returns the
// tasks of older sessions, which the caller cancels: their JobManager was
// deposed, and the new leader restarts them from its checkpoint.
func (e *Executor) observeSessionLocked(session string) []*runningTask {
	ep, ok := control.SessionEpoch(session)
	if !ok || ep <= e.newestEpoch {
		return nil
	}
	e.newestEpoch = ep
	var stale []*runningTask
	for _, t := range e.tasks {
		if tep, ok := control.SessionEpoch(t.d.Fencing.LeaderSession); ok && tep < ep {
			stale = append(stale, t)
		}
	}
	return stale
}

// ObserveLeaderSession tells the executor the session of the JobManager
// it registered with: from then on it refuses older sessions' calls and
// cancels their tasks.
func (e *Executor) ObserveLeaderSession(session string) {
	e.mu.Lock()
	stale := e.observeSessionLocked(session)
	e.mu.Unlock()
	for _, t := range stale {
		e.log.Info("canceling task of a deposed JobManager", "job", t.d.JobID, "task", t.d.ExecutionID, "session", t.d.Fencing.LeaderSession, "leader", session)
		t.cancel()
	}
}

// RefusedStaleSessions counts the calls refused because their leader
// session was older than the newest seen.
func (e *Executor) RefusedStaleSessions() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refusedStale
}

// CancelTask stops a task: its context is canceled, which ends a guest call
// in progress (wazero closes the module on context done), and the task
// reports CANCELED. Canceling an unknown or already ended execution is not
// an error.
//
// # Errors
//
// ErrStaleFencing when tok is older than the task's.
func (e *Executor) CancelTask(_ context.Context, tok control.FencingToken, executionID string) error {
	e.mu.Lock()
	t, ok := e.tasks[executionID]
	err := e.sessionAllowedLocked(tok.LeaderSession, "cancel")
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if err := fencingAllows(tok, t.d, "cancel"); err != nil {
		return err
	}
	e.log.Info("canceling task", "job", t.d.JobID, "task", executionID)
	t.cancel()
	return nil
}

// fencingAllows refuses a command with a token for another job, or from an
// older attempt of the task's leader session. A newer attempt or another
// leader session may command the task (it is the leader now).
func fencingAllows(tok control.FencingToken, d control.Deployment, what string) error {
	if tok.JobID != d.Fencing.JobID ||
		(tok.LeaderSession == d.Fencing.LeaderSession && tok.Attempt < d.Fencing.Attempt) {
		return fmt.Errorf("%w: cannot %s %s (job %s attempt %d) with job %s attempt %d",
			ErrStaleFencing, what, d.ExecutionID, d.JobID, d.Fencing.Attempt, tok.JobID, tok.Attempt)
	}
	return nil
}

// TriggerCheckpoint hands trigger t to the source task executionID, which
// takes the checkpoint at its next safe point (between batches or polls):
// it returns at once, and the task's Ack or Decline reaches the JobMaster
// later, in order with its state updates.
//
// # Errors
//
// ErrStaleFencing as CancelTask; ErrTaskNotFound for an execution that is
// not running here (or has just ended); ErrNotSource for a task with
// inputs (barriers reach it from upstream); rpcerr.ErrInvalidArgument for
// an id below 1; rpcerr.ErrUnavailable when the task has too many
// commands queued.
func (e *Executor) TriggerCheckpoint(_ context.Context, tok control.FencingToken, executionID string, t checkpoint.Trigger) error {
	if t.ID < 1 {
		return fmt.Errorf("%w: checkpoint id %d (ids start at 1)", rpcerr.ErrInvalidArgument, t.ID)
	}
	rt, err := e.commandTarget(tok, executionID, fmt.Sprintf("trigger checkpoint %d of", t.ID))
	if err != nil {
		return err
	}
	if !isSource(rt.d) {
		return fmt.Errorf("%w: %s reads inputs; checkpoint barriers reach it from its producers", ErrNotSource, executionID)
	}
	return controlErr(executionID, rt.ctl.Trigger(t))
}

// NotifyCheckpoint tells task executionID that checkpoint checkpointID
// completed (the file-sink parts it covers are committed; the task stops
// listing them) or was aborted (a task aligning its barriers gives it up; a
// source stopped by that stop-with-savepoint resumes). It returns at once.
//
// # Errors
//
// ErrStaleFencing as CancelTask; ErrTaskNotFound for an execution that is
// not running here (a task that finished needs no notification);
// rpcerr.ErrInvalidArgument for an id below 1; rpcerr.ErrUnavailable when
// the task has too many commands queued.
func (e *Executor) NotifyCheckpoint(_ context.Context, tok control.FencingToken, executionID string, checkpointID int64, completed bool) error {
	if checkpointID < 1 {
		return fmt.Errorf("%w: checkpoint id %d (ids start at 1)", rpcerr.ErrInvalidArgument, checkpointID)
	}
	rt, err := e.commandTarget(tok, executionID, fmt.Sprintf("notify checkpoint %d to", checkpointID))
	if err != nil {
		return err
	}
	return controlErr(executionID, rt.ctl.Notify(checkpointID, completed))
}

// commandTarget returns the running task executionID if tok may command it.
func (e *Executor) commandTarget(tok control.FencingToken, executionID, what string) (*runningTask, error) {
	e.mu.Lock()
	t, ok := e.tasks[executionID]
	err := e.sessionAllowedLocked(tok.LeaderSession, what)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: execution %s is not running on this task manager", ErrTaskNotFound, executionID)
	}
	if err := fencingAllows(tok, t.d, what); err != nil {
		return nil, err
	}
	return t, nil
}

func controlErr(executionID string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, task.ErrEnded):
		return fmt.Errorf("%w: execution %s has ended", ErrTaskNotFound, executionID)
	case errors.Is(err, task.ErrBusy):
		return fmt.Errorf("execution %s: %w: %w", executionID, rpcerr.ErrUnavailable, err)
	}
	return fmt.Errorf("execution %s: %w", executionID, err)
}

// isSource reports whether d is a source task: its chain starts with a
// source (a text source or a guest source) and it reads no inputs.
func isSource(d control.Deployment) bool {
	return len(d.Inputs) == 0 && len(d.Chain) > 0 && d.Chain[0].Kind == jobgraph.KindSource
}

// FreeSlot returns the allocation's slot to the pool, canceling any task
// still running in it. Freeing an unknown allocation is not an error.
func (e *Executor) FreeSlot(_ context.Context, allocationID string) error {
	e.mu.Lock()
	idx, ok := e.byAlloc[allocationID]
	var victims []*runningTask
	if ok {
		delete(e.byAlloc, allocationID)
		e.slots[idx] = slot{}
		for _, t := range e.tasks {
			if t.d.AllocationID == allocationID {
				victims = append(victims, t)
			}
		}
	}
	e.mu.Unlock()
	for _, t := range victims {
		e.log.Info("slot freed with a task running: canceling it", "job", t.d.JobID, "task", t.d.ExecutionID)
		t.cancel()
	}
	return nil
}

// Reset cancels every task and frees every slot: the JobManager no longer
// knows this TaskManager (it restarted, or declared it dead), so nothing it
// deployed here may go on.
func (e *Executor) Reset(reason string) {
	e.mu.Lock()
	victims := make([]*runningTask, 0, len(e.tasks))
	for _, t := range e.tasks {
		victims = append(victims, t)
	}
	for i := range e.slots {
		e.slots[i] = slot{}
	}
	clear(e.byAlloc)
	clear(e.fencing)
	e.mu.Unlock()
	if len(victims) > 0 {
		e.log.Warn("canceling every task", "reason", reason, "tasks", len(victims))
	}
	for _, t := range victims {
		t.cancel()
	}
}

// SlotReport returns the state of every slot, in slot order.
func (e *Executor) SlotReport() []control.SlotStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]control.SlotStatus, len(e.slots))
	for i, s := range e.slots {
		out[i] = control.SlotStatus{Index: i, AllocationID: s.allocationID, JobID: s.jobID}
	}
	return out
}

// Metrics returns counters for the heartbeat.
func (e *Executor) Metrics() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	free := 0
	for _, s := range e.slots {
		if s.allocationID == "" {
			free++
		}
	}
	return map[string]int64{
		"tasks_running": int64(len(e.tasks)),
		"slots_free":    int64(free),
	}
}

// RunningTasks returns the execution ids of the tasks that have not ended.
func (e *Executor) RunningTasks() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.tasks))
	for id := range e.tasks {
		ids = append(ids, id)
	}
	return ids
}

// Close cancels every task and waits, until ctx ends, for them to stop and
// for their final reports to be sent or given up.
func (e *Executor) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.Reset("task manager shutting down")
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		e.cancel()
		e.modules.Wait() // a background compile ends at its next module
		return nil
	case <-ctx.Done():
		e.cancel() // give up on reports still retrying
		<-done
		e.modules.Wait()
		return fmt.Errorf("close executor: %w", ctx.Err())
	}
}

// WarmModules has the module cache fetch and compile refs in the
// background (ModuleCache.Warm), so a deployment of one of them starts
// without a compile. It returns at once; a closed Executor ignores it.
func (e *Executor) WarmModules(_ context.Context, refs []control.ModuleRef) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil
	}
	if n := e.modules.Warm(e.ctx, refs); n > 0 {
		e.log.Debug("compiling modules ahead of deployment", "modules", n, "asked", len(refs))
	}
	return nil
}

// run is the owner goroutine of one task.
func (e *Executor) run(ctx context.Context, t *runningTask) {
	defer e.wg.Done()
	d := t.d
	defer e.taskEnded(d.ExecutionID)
	log := e.taskLogger(t.log, d.ExecutionID).With("job", d.JobID, "task", d.ExecutionID, "tenant", d.Tenant)
	rep := newReporter(e.ctx, e.cfg.JobMasters, d, e.cfg.ReportTimeout, log, t.cancel, func() bool { return e.deposed(d.Fencing.LeaderSession) })
	// The task leaves the table as soon as it stops running (before its
	// final report, so nothing waits on a slow JobMaster for it).
	var removeOnce sync.Once
	remove := func() {
		removeOnce.Do(func() {
			t.cancel()
			e.mu.Lock()
			delete(e.tasks, d.ExecutionID)
			e.mu.Unlock()
			close(t.done)
		})
	}
	defer remove()

	rep.send(control.TaskUpdate{State: control.TaskDeploying})
	res, err := e.runTask(ctx, t, rep, log)
	metrics := e.finalMetrics(t, err)
	var final control.TaskUpdate
	var failure *task.Failure
	switch {
	case err == nil:
		final = control.TaskUpdate{State: control.TaskFinished, Accumulators: res.Accumulators, Collected: res.Collected, CollectedFrom: res.CollectedFrom, SinkParts: res.SinkParts}
		log.Info("task finished", "collected", len(res.Collected))
	case errors.As(err, &failure):
		// It failed before any cancel: a cancel arriving since (the
		// JobMaster reacting to what this failure caused) does not hide it.
		final = control.TaskUpdate{State: control.TaskFailed, Failure: Describe(err), FailureKind: failure.Kind}
		log.Warn("task failed", "err", err, "kind", failure.Kind)
	case ctx.Err() != nil:
		// Asked to stop: whatever the guest call returned on the way out
		// (wazero closes the module when the context ends) is not a failure.
		final = control.TaskUpdate{State: control.TaskCanceled, Accumulators: res.Accumulators}
		log.Info("task canceled")
	default:
		final = control.TaskUpdate{State: control.TaskFailed, Failure: Describe(err), FailureKind: task.Classify(err)}
		log.Warn("task failed", "err", err)
	}
	final.Metrics = metrics
	remove()
	rep.send(final)
	rep.close()
}

// runTask runs task.Run, turning a panic into a task failure so one task
// never takes the TaskManager down. Checkpoint answers go through rep, in
// order with the state updates.
func (e *Executor) runTask(ctx context.Context, rt *runningTask, rep *reporter, log *slog.Logger) (res task.Result, err error) {
	d := rt.d
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task %s panicked: %v\n%s", d.ExecutionID, r, debug.Stack())
		}
	}()
	spec := task.Spec{
		ExecutionID:    d.ExecutionID,
		JobID:          d.JobID,
		Tenant:         d.Tenant,
		ModuleDigest:   d.ModuleDigest,
		Args:           d.Args,
		Chain:          d.Chain,
		Subtask:        d.Subtask,
		Parallelism:    d.Parallelism,
		MaxParallelism: d.MaxParallelism,
		Inputs:         d.Inputs,
		Outputs:        d.Outputs,
		Config:         d.Config,
		Attempt:        d.Fencing.Attempt,
		Restore:        d.Restore,
	}
	limits := taskLimits(e.cfg.Limits, d.Limits)
	limits.GrantClock = d.Config.Clock == jobconfig.ClockWall
	// The job's own fuel limit may only lower its tenant's.
	if f := d.Config.CallFuel; f > 0 && (limits.CallFuel <= 0 || f < limits.CallFuel) {
		limits.CallFuel = f
	}
	deps := task.Deps{
		Runtime:  e.cfg.Runtime,
		Modules:  e.modules,
		Blob:     e.cfg.Blob,
		Exchange: e.cfg.Exchange,
		Limits:   limits,
		// The task adds its own job, task and tenant attributes: given
		// log, every guest line would carry them twice.
		Logger: e.taskLogger(rt.log, d.ExecutionID),
		OnRunning: func() {
			e.event(rt.log, d.ExecutionID, slog.LevelInfo, "task running", "")
			rep.send(control.TaskUpdate{State: control.TaskRunning})
		},
		Control:     rt.ctl,
		Checkpoints: rep,
		OnInstance:  func(in *wasmhost.Instance) { rt.inst.Store(in) },
	}
	if rt.meter != nil {
		deps.Metrics = rt.meter.m
	}
	if len(d.Chain) > 0 && (d.Chain[0].Connector == jobgraph.ConnectorText || d.Chain[0].Connector == jobgraph.ConnectorNexmark || d.Chain[0].Connector == jobgraph.ConnectorKafkaSource) {
		deps.Splits = &splitSource{jms: e.cfg.JobMasters, d: d, vertexID: d.Chain[0].ID}
	}
	return task.Run(ctx, spec, deps)
}

// Describe renders a task failure for the JobMaster and `sluice status`:
// the error, which for a guest failure carries the function, the Wasm stack
// trace and the guest's stderr, plus the full module digest.
func Describe(err error) string {
	msg := err.Error()
	var ge *wasmhost.GuestError
	if errors.As(err, &ge) && ge.Digest != "" && !strings.Contains(msg, ge.Digest) {
		msg += "\nmodule: " + ge.Digest
	}
	return msg
}

// taskLimits is base with each limit the deployment sets, where it is
// tighter (or base has none).
func taskLimits(base wasmhost.Limits, dep control.TaskLimits) wasmhost.Limits {
	lower := func(b, d int64) int64 {
		if d > 0 && (b <= 0 || d < b) {
			return d
		}
		return b
	}
	l := base
	l.MemoryLimitBytes = uint64(lower(int64(base.MemoryLimitBytes), dep.MemoryBytes))
	l.CallTimeout = time.Duration(lower(int64(base.CallTimeout), int64(dep.CallTimeout)))
	l.MaxStateBytes = lower(base.MaxStateBytes, dep.StateBytes)
	l.CallFuel = lower(base.CallFuel, dep.CallFuel)
	// The share is the tenant's: the TaskManager has none of its own.
	l.CPUWeight, l.FuelPerSecond = max(dep.CPUWeight, 0), max(dep.FuelPerSecond, 0)
	return l
}

func validateDeployment(d *control.Deployment) error {
	var probs []string
	if d.ExecutionID == "" {
		probs = append(probs, "no execution id")
	}
	if d.JobID == "" {
		probs = append(probs, "no job id")
	}
	if d.Fencing.JobID != d.JobID {
		probs = append(probs, fmt.Sprintf("fencing token is for job %q, not %q", d.Fencing.JobID, d.JobID))
	}
	if d.AllocationID == "" {
		probs = append(probs, "no allocation id")
	}
	if d.ModuleDigest == "" {
		probs = append(probs, "no module digest")
	}
	if d.JobMasterAddress == "" {
		probs = append(probs, "no jobmaster address")
	}
	if len(d.Chain) == 0 {
		probs = append(probs, "empty operator chain")
	}
	if d.Parallelism < 1 || d.Subtask < 0 || d.Subtask >= d.Parallelism {
		probs = append(probs, fmt.Sprintf("subtask %d of parallelism %d", d.Subtask, d.Parallelism))
	}
	if d.MaxParallelism < d.Parallelism {
		probs = append(probs, fmt.Sprintf("max parallelism %d below parallelism %d", d.MaxParallelism, d.Parallelism))
	}
	if r := d.Restore; r != nil {
		// A task reads only its own tenant's state.
		own := "tenants/" + d.Tenant + "/"
		for _, h := range r.States {
			if !strings.HasPrefix(h.Key, own) || h.KeyGroupStart > h.KeyGroupEnd {
				probs = append(probs, fmt.Sprintf("restore handle %q (key groups %d..%d) is not a state object of tenant %q",
					h.Key, h.KeyGroupStart, h.KeyGroupEnd, d.Tenant))
			}
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidDeployment, strings.Join(probs, "; "))
}
