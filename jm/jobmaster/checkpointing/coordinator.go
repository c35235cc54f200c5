package checkpointing

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

const (
	// maxHistory bounds the ended checkpoints Stats returns.
	maxHistory = 100
	// maxMissingNamed bounds the tasks an expiry message names.
	maxMissingNamed = 8
)

// Config is the coordinator's job and its checkpoint settings, fixed for
// the job's life.
type Config struct {
	JobID          string
	Tenant         string
	ModuleDigest   string
	MaxParallelism int
	// Keys names the tenant's objects; used when Store.
	Keys blob.Keys
	// Store says the job has a blob store: savepoints need one, and only
	// then are the directories of aborted checkpoints deleted.
	Store bool

	// Interval between periodic checkpoints; zero: none (savepoints still
	// work).
	Interval time.Duration
	// Timeout after which a checkpoint still collecting acks expires; it
	// must be positive.
	Timeout time.Duration
	// MinPause between the end of one checkpoint and the next periodic one.
	MinPause time.Duration
	// MaxConcurrent periodic checkpoints in flight; at least 1.
	MaxConcurrent int
	// Retained completed checkpoints; at least 1.
	Retained int
	// TolerableFailures periodic checkpoints may fail in a row before the
	// job fails; negative: no limit.
	TolerableFailures int

	// Restore is the restore point the job starts from (nil: none).
	Restore *checkpoint.Metadata
	// Logger; nil means slog.Default.
	Logger *slog.Logger
	// NewSavepointID names a new savepoint; nil means "sp-" and 16 random
	// hex digits.
	NewSavepointID func() string
}

// Task is one execution (a subtask of a chain) of the attempt.
type Task struct {
	ExecutionID string
	Name        string // the chain's "source -> map -> sink"
	Subtask     int
	Parallelism int
	Vertices    []int // the chain's vertex ids, head first
	// Source: the chain has no inputs; triggers go to it.
	Source bool
	// TextSource: the chain's head is a text source; its acks carry the
	// source position.
	TextSource bool
}

func (t *Task) describe() string {
	if t == nil {
		return "an unknown task"
	}
	return fmt.Sprintf("task %q subtask %d/%d", t.Name, t.Subtask+1, t.Parallelism)
}

// View is what the coordinator sees of the job at an event.
type View struct {
	Attempt int64
	// Running: the job is RUNNING (possibly finishing).
	Running bool
	// AllRunning: every execution of the attempt is RUNNING.
	AllRunning bool
	// Finishing: every task ended; the job's final commit runs.
	Finishing bool
	// State is the job's state, for messages.
	State string
	// Failure is the root cause of the current failure, for messages.
	Failure string
	// Now is the job's clock: the timestamps of stats and metadata.
	Now time.Time
	// Mono is a monotonic clock reading: min pause and durations.
	Mono time.Time
}

type stage int

const (
	acking stage = iota
	writing
	committing
)

// pending is one checkpoint not yet completed or aborted.
type pending struct {
	id        int64
	attempt   int64
	savepoint bool
	stop      bool
	spID      string
	dir       string // the checkpoint's directory
	spDir     string // savepoints: the savepoint's directory
	triggered time.Time
	began     time.Time // monotonic, for the duration
	stage     stage
	waiting   map[string]bool // executions that owe an ack
	acks      map[string]checkpoint.Ack
	meta      *checkpoint.Metadata
	expired   bool
	waiter    int64 // savepoints: who asked; 0 none
}

func (p *pending) location() string {
	if p.savepoint {
		return p.spDir
	}
	return p.dir
}

func (p *pending) stats(status, reason string, end time.Time, size int64) checkpoint.Stats {
	s := checkpoint.Stats{
		ID: p.id, Savepoint: p.savepoint, SavepointID: p.spID, Status: status,
		Triggered: p.triggered, Size: size, Reason: reason, Location: p.location(),
		Subtasks: len(p.waiting) + len(p.acks), Acknowledged: len(p.acks),
	}
	for _, a := range p.acks {
		s.Alignment = max(s.Alignment, a.Alignment)
	}
	if !end.IsZero() {
		s.Duration = end.Sub(p.triggered)
	}
	return s
}

// Coordinator is one job's checkpoint coordinator. It is not safe for
// concurrent use: one goroutine (the JobMaster's) feeds it.
type Coordinator struct {
	cfg     Config
	log     *slog.Logger
	nextID  int64
	pending map[int64]*pending
	// completed are the retained completed checkpoints of this job, by id.
	completed []int64
	// latest is the restore point: the newest checkpoint whose metadata is
	// written, or the Restore the job started from.
	latest *checkpoint.Metadata
	// history holds ended checkpoints, oldest first.
	history   []checkpoint.Stats
	counts    Counts    // every checkpoint that ended, history or not
	failures  int       // periodic checkpoints failed in a row
	lastEnd   time.Time // last completion or abort (monotonic)
	tickArmed bool
	stopping  bool // a stop-with-savepoint completed: tasks are being canceled
	// undeleted are directories whose deletion failed (the store was
	// down): deleted again once a checkpoint completes, as the store works
	// again then.
	undeleted map[string]int64
	// tasks and splits are those of attempt tasksOf.
	tasksOf int64
	tasks   []Task
	splits  map[int][]checkpoint.Split
	// known are the object keys each following text source has found.
	known map[int]map[string]bool

	// During Handle: the view and the commands so far.
	v   View
	out []Command
}

// New returns the coordinator of a job that has taken no checkpoint yet.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NewSavepointID == nil {
		cfg.NewSavepointID = newSavepointID
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, nextID: 1, pending: map[int64]*pending{}, latest: cfg.Restore, tasksOf: -1}
	if r := cfg.Restore; r != nil && r.JobID == cfg.JobID {
		// The same job on a new JobManager (a failover): its ids go on
		// after the restore point, which stays retained until subsumed.
		c.nextID = r.ID + 1
		c.completed = []int64{r.ID}
	}
	return c
}

func newSavepointID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sp-" + hex.EncodeToString(b[:])
}

// Handle applies ev, seen with the job as v, and returns what the
// JobMaster must do, in order. Carrying out a command may lead to further
// events (FailJob, for one, ends the attempt: AttemptEnding); feed them
// after this call returned.
//
// # Errors
//
// The answer for the sender of ev, when it is refused: an Acked whose
// state or file-sink parts lie outside the checkpoint's or the job's
// directories (ErrInvalidArgument; the checkpoint aborts).
func (c *Coordinator) Handle(v View, ev Event) ([]Command, error) {
	c.v, c.out = v, nil
	err := c.handle(ev)
	out := c.out
	c.v, c.out = View{}, nil
	return out, err
}

func (c *Coordinator) emit(cmd Command) { c.out = append(c.out, cmd) }

func (c *Coordinator) handle(ev Event) error {
	switch ev := ev.(type) {
	case Deployed:
		c.tasksOf, c.tasks, c.splits = c.v.Attempt, slices.Clone(ev.Tasks), maps.Clone(ev.Splits)
		c.known = map[int]map[string]bool{}
		for v, keys := range ev.Discovered {
			c.known[v] = map[string]bool{}
			for _, k := range keys {
				c.known[v][k] = true
			}
		}
	case SplitsDiscovered:
		if c.known[ev.Vertex] == nil {
			return nil // not deployed yet: Deployed will carry them
		}
		// The JobMaster sent Deployed copies of its splits: appending
		// touches only the coordinator's.
		c.splits[ev.Vertex] = append(c.splits[ev.Vertex], ev.Splits...)
		for _, k := range ev.Keys {
			c.known[ev.Vertex][k] = true
		}
	case Restarted:
		c.tickArmed, c.stopping = false, false
		c.tasksOf, c.tasks, c.splits, c.known = -1, nil, nil, nil
	case TaskStarted:
		if c.periodicAllowed() {
			c.armTick(c.cfg.Interval)
		}
	case TaskFinished:
		c.taskFinished(ev.ExecutionID)
	case AttemptEnding:
		for _, p := range c.inFlight() {
			if p.stage == acking {
				c.abort(p, ev.Reason, false)
			}
		}
	case JobEnded:
		c.jobEnded()
	case Tick:
		c.tick(ev.Attempt)
	case Expired:
		c.expired(ev.ID)
	case TriggerFailed:
		if p := c.pending[ev.ID]; p != nil && p.stage == acking {
			// A source that is not running (it just finished, or is not
			// there yet) is a race with its report, not a failure.
			notReady := errors.Is(ev.Err, rpcerr.ErrFailedPrecondition) || errors.Is(ev.Err, rpcerr.ErrNotFound)
			c.abort(p, fmt.Sprintf("trigger at %s: %v", c.task(ev.ExecutionID).describe(), ev.Err), !notReady)
		}
	case Acked:
		return c.acked(ev.Ack)
	case LateAck:
		c.discard(ev.Ack)
	case Declined:
		d := ev.Decline
		if p := c.pending[d.CheckpointID]; p != nil && p.stage == acking {
			c.abort(p, fmt.Sprintf("%s declined: %s", c.task(d.ExecutionID).describe(), d.Reason), true)
		}
	case Written:
		c.written(ev.ID, ev.Err)
	case Committed:
		if p := c.pending[ev.ID]; p != nil && p.stage == committing {
			if ev.Err != nil {
				// Only when the attempt ended: its metadata exists, so it
				// stays the restore point and the restore commits the parts.
				c.log.Info("checkpoint commit interrupted; the restore commits its parts", "checkpoint", ev.ID, "err", ev.Err)
			}
			c.complete(p)
		}
	case SavepointRequested:
		c.savepoint(ev)
	case DeleteFailed:
		if c.undeleted == nil {
			c.undeleted = map[string]int64{}
		}
		c.undeleted[ev.Dir] = ev.ID
	default:
		panic(fmt.Sprintf("checkpointing: unknown event %T", ev))
	}
	return nil
}

// attemptTasks are the executions of the current attempt (none before
// it was deployed).
func (c *Coordinator) attemptTasks() []Task {
	if c.tasksOf != c.v.Attempt {
		return nil
	}
	return c.tasks
}

func (c *Coordinator) task(execID string) *Task {
	for i, t := range c.attemptTasks() {
		if t.ExecutionID == execID {
			return &c.attemptTasks()[i]
		}
	}
	return nil
}

// inFlight returns the pending checkpoints by id.
func (c *Coordinator) inFlight() []*pending {
	out := slices.Collect(maps.Values(c.pending))
	slices.SortFunc(out, func(a, b *pending) int { return cmp.Compare(a.id, b.id) })
	return out
}

// periodicAllowed: the job runs every task and is not stopping.
func (c *Coordinator) periodicAllowed() bool {
	return c.v.Running && c.v.AllRunning && !c.stopping
}

// armTick schedules the next periodic trigger in d, once.
func (c *Coordinator) armTick(d time.Duration) {
	if c.cfg.Interval <= 0 || c.tickArmed {
		return
	}
	c.tickArmed = true
	c.emit(ArmTick{Attempt: c.v.Attempt, After: d})
}

func (c *Coordinator) tick(attempt int64) {
	if attempt != c.v.Attempt {
		return // a timer of an old attempt; the current one arms its own
	}
	c.tickArmed = false
	if !c.periodicAllowed() || c.stopPending() {
		return // re-armed when every task runs again (next attempt)
	}
	periodic := 0
	for _, p := range c.pending {
		if !p.savepoint {
			periodic++
		}
	}
	if periodic >= c.cfg.MaxConcurrent || (c.cfg.MinPause > 0 && periodic > 0) {
		c.armTick(c.cfg.Interval)
		return
	}
	if c.cfg.MinPause > 0 && !c.lastEnd.IsZero() {
		if wait := c.cfg.MinPause - c.v.Mono.Sub(c.lastEnd); wait > 0 {
			c.armTick(wait)
			return
		}
	}
	c.trigger(false, false, false) // a bad key fails the savepoints that need one
	c.armTick(c.cfg.Interval)
}

// stopPending reports whether a stop-with-savepoint is under way: its
// sources emit no further barriers, so no checkpoint may start.
func (c *Coordinator) stopPending() bool {
	for _, p := range c.pending {
		if p.stop {
			return true
		}
	}
	return false
}

// trigger starts a checkpoint at every source of the attempt.
func (c *Coordinator) trigger(savepoint, stop, drain bool) (*pending, error) {
	id := c.nextID
	dir, err := c.cfg.Keys.Checkpoint(c.cfg.JobID, uint64(id))
	if err != nil {
		return nil, err
	}
	c.nextID++
	p := &pending{
		id: id, attempt: c.v.Attempt, savepoint: savepoint, stop: stop, dir: dir,
		triggered: c.v.Now, began: c.v.Mono, stage: acking,
		waiting: map[string]bool{}, acks: map[string]checkpoint.Ack{},
	}
	if savepoint {
		p.spID = c.cfg.NewSavepointID()
		if p.spDir, err = c.cfg.Keys.Savepoint(p.spID); err != nil {
			return nil, err
		}
	}
	tasks := c.attemptTasks()
	for _, t := range tasks {
		p.waiting[t.ExecutionID] = true
	}
	c.pending[id] = p
	tr := checkpoint.Trigger{ID: id, TimestampMs: c.v.Now.UnixMilli(), Savepoint: savepoint, Stop: stop, Drain: drain}
	sources := 0
	for _, t := range tasks {
		if t.Source {
			sources++
			c.emit(SendTrigger{ExecutionID: t.ExecutionID, Trigger: tr})
		}
	}
	c.emit(ArmExpiry{ID: id, After: c.cfg.Timeout})
	c.log.Info("checkpoint triggered", "checkpoint", id, "savepoint", savepoint, "stop", stop, "attempt", c.v.Attempt, "sources", sources)
	return p, nil
}

func (c *Coordinator) savepoint(ev SavepointRequested) {
	refuse := func(format string, args ...any) {
		c.emit(AnswerSavepoint{Waiter: ev.Waiter, Err: rpcerr.Errorf(rpcerr.ErrFailedPrecondition, "job %s: "+format, append([]any{c.cfg.JobID}, args...)...)})
	}
	switch {
	case !c.cfg.Store:
		refuse("no blob store to keep savepoints in: configure the JobManager's blob store")
	case !c.v.Running || c.stopping || c.v.Finishing:
		refuse("cannot take a savepoint while the job is %s: wait until it is RUNNING", c.stateWord())
	case !c.v.AllRunning:
		refuse("cannot take a savepoint until every task is RUNNING (some are deploying or have finished)")
	case c.stopPending():
		refuse("a stop-with-savepoint is in progress")
	default:
		p, err := c.trigger(true, ev.Stop, ev.Stop && ev.Drain)
		if err != nil {
			c.emit(AnswerSavepoint{Waiter: ev.Waiter, Err: rpcerr.Errorf(rpcerr.ErrInternal, "job %s: savepoint: %v", c.cfg.JobID, err)})
			return
		}
		p.waiter = ev.Waiter
	}
}

func (c *Coordinator) stateWord() string {
	switch {
	case c.v.Finishing:
		return "finishing"
	case c.stopping:
		return "stopping"
	}
	return c.v.State
}

func (c *Coordinator) expired(id int64) {
	p := c.pending[id]
	if p == nil || p.stage != acking {
		return
	}
	var missing []string
	for _, t := range c.attemptTasks() {
		if p.waiting[t.ExecutionID] {
			missing = append(missing, fmt.Sprintf("%q %d/%d", t.Name, t.Subtask+1, t.Parallelism))
		}
	}
	if n := len(missing); n > maxMissingNamed {
		missing = append(missing[:maxMissingNamed], fmt.Sprintf("and %d more", n-maxMissingNamed))
	}
	p.expired = true
	c.abort(p, fmt.Sprintf("checkpoint %d expired after %v before all tasks acknowledged (missing: %s)", id, c.cfg.Timeout, strings.Join(missing, ", ")), true)
}

func (c *Coordinator) acked(a checkpoint.Ack) error {
	p := c.pending[a.CheckpointID]
	if p == nil || p.stage != acking {
		c.discard(a)
		return nil
	}
	if !p.waiting[a.ExecutionID] {
		return nil // a repeated ack
	}
	if err := c.checkAck(p, a); err != nil {
		c.abort(p, fmt.Sprintf("%s sent a bad acknowledgement: %v", c.task(a.ExecutionID).describe(), err), true)
		return err
	}
	delete(p.waiting, a.ExecutionID)
	p.acks[a.ExecutionID] = a
	if len(p.waiting) == 0 {
		c.write(p)
	}
	return nil
}

// checkAck makes sure an ack names only objects the checkpoint may own or
// commit, so a faulty task cannot make the JobMaster copy or delete other
// keys of the store.
func (c *Coordinator) checkAck(p *pending, a checkpoint.Ack) error {
	if a.State != nil && (!strings.HasPrefix(a.State.Key, p.dir) || a.State.KeyGroupStart > a.State.KeyGroupEnd) {
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "state %q (key groups %d..%d) is not in the checkpoint's directory %s",
			a.State.Key, a.State.KeyGroupStart, a.State.KeyGroupEnd, p.dir)
	}
	return c.CheckSinkParts(a.SinkParts)
}

// CheckSinkParts requires file-sink parts whose pending key is under the
// job's pending directory and whose final key is under the tenant's files,
// so that a commit moves only what the job may move.
//
// # Errors
//
// ErrInvalidArgument naming the first part that is not.
func (c *Coordinator) CheckSinkParts(parts []checkpoint.SinkPart) error {
	if len(parts) == 0 {
		return nil
	}
	job, _ := c.cfg.Keys.Job(c.cfg.JobID)
	files := c.cfg.Keys.Prefix() + "files/"
	for _, sp := range parts {
		if !strings.HasPrefix(sp.Pending, job+"pending/") || !strings.HasPrefix(sp.Final, files) {
			return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "file-sink part %q -> %q: want a pending key under %spending/ and a final key under %s", sp.Pending, sp.Final, job, files)
		}
	}
	return nil
}

// discard deletes the state object of an ack that arrived too late: its
// checkpoint aborted (or never existed here).
func (c *Coordinator) discard(a checkpoint.Ack) {
	if a.State == nil || !c.cfg.Store || c.pending[a.CheckpointID] != nil || slices.Contains(c.completed, a.CheckpointID) || a.CheckpointID < 1 {
		return
	}
	dir, err := c.cfg.Keys.Checkpoint(c.cfg.JobID, uint64(a.CheckpointID))
	if err != nil || !strings.HasPrefix(a.State.Key, dir) {
		return
	}
	c.log.Info("late checkpoint ack: deleting its state", "checkpoint", a.CheckpointID, "execution", a.ExecutionID, "key", a.State.Key)
	c.emit(DeleteState{ID: a.CheckpointID, Key: a.State.Key})
}

// write has p's metadata (and, for a savepoint, first its copy) written.
func (c *Coordinator) write(p *pending) {
	p.stage = writing
	p.meta = c.metadata(p)
	w := WriteMetadata{ID: p.id, Dir: p.dir, Meta: p.meta}
	if p.savepoint {
		sp := *p.meta
		sp.Savepoint, sp.SavepointID = true, p.spID
		sp.Tasks = slices.Clone(p.meta.Tasks)
		for i := range sp.Tasks {
			from := sp.Tasks[i].State.Key
			to := p.spDir + strings.TrimPrefix(from, p.dir)
			w.Copies = append(w.Copies, Copy{From: from, To: to})
			sp.Tasks[i].State.Key = to
		}
		w.SavepointDir, w.SavepointMeta = p.spDir, &sp
	}
	c.emit(w)
}

// metadata is the metadata of p once every execution acked.
func (c *Coordinator) metadata(p *pending) *checkpoint.Metadata {
	m := &checkpoint.Metadata{
		JobID: c.cfg.JobID, Tenant: c.cfg.Tenant, ID: p.id,
		ModuleDigest: c.cfg.ModuleDigest, MaxParallelism: c.cfg.MaxParallelism,
		TriggeredMs: p.triggered.UnixMilli(), CompletedMs: c.v.Now.UnixMilli(),
	}
	seen := map[string]bool{}
	positions := map[int][]checkpoint.SourcePosition{}
	var texts []int
	for _, t := range c.attemptTasks() {
		a := p.acks[t.ExecutionID]
		if a.State != nil {
			m.Tasks = append(m.Tasks, checkpoint.TaskState{Vertices: slices.Clone(t.Vertices), Subtask: t.Subtask, Parallelism: t.Parallelism, State: *a.State})
		}
		if t.TextSource {
			v := t.Vertices[0]
			if !slices.Contains(texts, v) {
				texts = append(texts, v)
			}
			if a.Source != nil {
				positions[v] = append(positions[v], *a.Source)
			}
		}
		for _, sp := range a.SinkParts {
			if !seen[sp.Pending] {
				seen[sp.Pending] = true
				m.SinkParts = append(m.SinkParts, sp)
			}
		}
	}
	for _, v := range texts {
		if m.Sources == nil {
			m.Sources = map[int][]checkpoint.Split{}
		}
		rest := checkpoint.RemainingSplits(c.splits[v], positions[v])
		if rest == nil {
			rest = []checkpoint.Split{} // "nothing left", not "unknown"
		}
		m.Sources[v] = rest
		if known := c.known[v]; known != nil {
			if m.Discovered == nil {
				m.Discovered = map[int][]string{}
			}
			m.Discovered[v] = append([]string{}, slices.Sorted(maps.Keys(known))...) // [] for none, not null
		}
	}
	return m
}

func (c *Coordinator) written(id int64, err error) {
	p := c.pending[id]
	if p == nil || p.stage != writing {
		return
	}
	if err != nil {
		c.abort(p, err.Error(), true)
		c.emit(Proceed{})
		return
	}
	// The checkpoint exists: it is the restore point from now on.
	if l := c.latest; l == nil || l.JobID != c.cfg.JobID || p.id > l.ID {
		c.latest = p.meta
	}
	if !slices.Contains(c.completed, id) {
		c.completed = append(c.completed, id)
		slices.Sort(c.completed)
	}
	if len(p.meta.SinkParts) == 0 || p.attempt != c.v.Attempt || !c.v.Running {
		// Nothing to commit, or the attempt ended: a restore commits the
		// parts again.
		c.complete(p)
		return
	}
	p.stage = committing
	c.emit(CommitSinkParts{ID: id, Parts: p.meta.SinkParts})
}

// complete marks p COMPLETED: tasks are told, old checkpoints deleted, a
// savepoint's caller answered.
func (c *Coordinator) complete(p *pending) {
	c.end(p)
	c.lastEnd = c.v.Mono
	c.failures = 0
	size := p.meta.Size()
	st := p.stats(checkpoint.StatusCompleted, "", c.v.Now, size)
	c.record(st)
	live := p.attempt == c.v.Attempt && c.v.Running
	if live {
		c.emit(Notify{ID: p.id, Completed: true})
	}
	c.log.Info("checkpoint completed", "checkpoint", p.id, "savepoint", p.savepoint, "size", size, "duration", c.v.Mono.Sub(p.began), "location", p.location())
	c.retain()
	for _, dir := range slices.Sorted(maps.Keys(c.undeleted)) {
		c.emit(DeleteDirs{What: "aborted checkpoint (again)", ID: c.undeleted[dir], Dirs: []string{dir}})
	}
	clear(c.undeleted)
	if p.waiter != 0 {
		a := AnswerSavepoint{Waiter: p.waiter, Stats: st}
		if p.stop && !live {
			a.Err = rpcerr.Errorf(rpcerr.ErrUnavailable,
				"savepoint %s completed at %s but the job failed before it could stop (%s): it keeps running from its restart", p.spID, p.spDir, c.v.Failure)
		}
		c.emit(a)
	}
	if p.stop && live && !c.v.Finishing {
		c.stopping = true
		c.emit(StopTasks{})
	}
	c.emit(Proceed{})
}

// retain deletes the completed checkpoints beyond Retained, oldest first,
// never the restore point.
func (c *Coordinator) retain() {
	for len(c.completed) > c.cfg.Retained {
		id := c.completed[0]
		if l := c.latest; l != nil && l.JobID == c.cfg.JobID && l.ID == id {
			break
		}
		c.completed = c.completed[1:]
		dir, err := c.cfg.Keys.Checkpoint(c.cfg.JobID, uint64(id))
		if err != nil {
			continue
		}
		c.emit(DeleteDirs{What: "subsumed checkpoint", ID: id, Dirs: []string{dir}})
	}
}

// abort ends p as ABORTED. counted failures of periodic checkpoints count
// towards TolerableFailures.
func (c *Coordinator) abort(p *pending, reason string, counted bool) {
	c.end(p)
	c.lastEnd = c.v.Mono
	st := p.stats(checkpoint.StatusAborted, reason, c.v.Now, 0)
	c.record(st)
	c.log.Warn("checkpoint aborted", "checkpoint", p.id, "savepoint", p.savepoint, "reason", reason)
	if p.attempt == c.v.Attempt {
		c.emit(Notify{ID: p.id, Completed: false})
	}
	if c.cfg.Store {
		dirs := []string{p.dir}
		if p.stage == writing && p.spDir != "" {
			dirs = append(dirs, p.spDir) // the copy may have started
		}
		c.emit(DeleteDirs{What: "aborted checkpoint", ID: p.id, Dirs: dirs})
	}
	if p.waiter != 0 {
		kind := rpcerr.ErrUnavailable
		if p.expired {
			kind = rpcerr.ErrDeadlineExceeded
		}
		c.emit(AnswerSavepoint{Waiter: p.waiter, Stats: st, Err: rpcerr.Errorf(kind, "savepoint of job %s aborted: %s", c.cfg.JobID, reason)})
	}
	if !counted || p.savepoint {
		return
	}
	c.failures++
	if k := c.cfg.TolerableFailures; k >= 0 && c.failures > k {
		c.failures = 0 // the next attempt gets its own allowance
		c.emit(FailJob{Cause: fmt.Sprintf("checkpoint %d failed: %s (more than %d checkpoints failed in a row)", p.id, reason, k)})
	}
}

// end removes p from the pending checkpoints.
func (c *Coordinator) end(p *pending) {
	delete(c.pending, p.id)
	c.emit(DisarmExpiry{ID: p.id})
}

// taskFinished aborts the checkpoints that wait for execID, which will
// never acknowledge them.
func (c *Coordinator) taskFinished(execID string) {
	for _, p := range c.inFlight() {
		if p.waiting[execID] && p.stage == acking {
			c.abort(p, fmt.Sprintf("%s finished before it acknowledged checkpoint %d (no checkpoints once a task finished)", c.task(execID).describe(), p.id), false)
		}
	}
}

// jobEnded ends every pending checkpoint; the JobMaster's cleanup deletes
// what the job leaves.
func (c *Coordinator) jobEnded() {
	reason := fmt.Sprintf("the job ended %s before the checkpoint completed", c.v.State)
	for _, p := range c.inFlight() {
		c.emit(DisarmExpiry{ID: p.id})
		c.record(p.stats(checkpoint.StatusAborted, reason, c.v.Now, 0))
		if p.waiter != 0 {
			c.emit(AnswerSavepoint{Waiter: p.waiter, Err: rpcerr.Errorf(rpcerr.ErrUnavailable, "savepoint of job %s: %s", c.cfg.JobID, reason)})
		}
	}
	clear(c.pending)
}

// record adds an ended checkpoint to the history.
func (c *Coordinator) record(s checkpoint.Stats) {
	if s.Status == checkpoint.StatusCompleted {
		c.counts.Completed++
	} else {
		c.counts.Failed++
	}
	c.history = append(c.history, s)
	if n := len(c.history) - maxHistory; n > 0 {
		c.history = slices.Delete(c.history, 0, n)
	}
}

// Counts are how many checkpoints and savepoints of a job completed and
// failed (aborted), since the JobMaster started.
type Counts struct{ Completed, Failed int64 }

// Counts returns how many checkpoints ended each way.
func (c *Coordinator) Counts() Counts { return c.counts }

// Stats returns the job's checkpoints and savepoints, newest first: those
// in progress and the last 100 that ended.
func (c *Coordinator) Stats() []checkpoint.Stats {
	out := make([]checkpoint.Stats, 0, len(c.history)+len(c.pending))
	out = append(out, c.history...)
	for _, p := range c.pending {
		out = append(out, p.stats(checkpoint.StatusInProgress, "", time.Time{}, 0))
	}
	slices.SortFunc(out, func(a, b checkpoint.Stats) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > maxHistory {
		out = out[:maxHistory]
	}
	return out
}

// Writing reports whether some checkpoint is writing its metadata or
// committing its file-sink parts; a Proceed follows when none is.
func (c *Coordinator) Writing() bool {
	for _, p := range c.pending {
		if p.stage != acking {
			return true
		}
	}
	return false
}

// Stopping reports whether a stop-with-savepoint completed and the tasks
// are being canceled (until Restarted).
func (c *Coordinator) Stopping() bool { return c.stopping }

// Latest returns the restore point: the newest checkpoint whose metadata
// is written, else the Restore the job started from (nil: none).
func (c *Coordinator) Latest() *checkpoint.Metadata { return c.latest }

// Completed returns the ids of the retained completed checkpoints of this
// job, oldest first.
func (c *Coordinator) Completed() []int64 { return slices.Clone(c.completed) }
