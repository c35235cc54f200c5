package dispatcher

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/jm/jobmaster"
	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// DefaultTenant is the tenant of every call until tenants arrive.
const DefaultTenant = "default"

// Defaults for Config fields left zero.
const (
	DefaultModuleSizeLimit     = 64 << 20
	DefaultParallelism         = 1
	DefaultMaxParallelismLimit = 1 << 15 // Flink's upper bound on key groups
	DefaultRetention           = time.Hour
	DefaultSplitSize           = 4 << 20
	// MaxWait bounds one WaitJob call; clients poll again.
	MaxWait = 5 * time.Minute
)

// Planner validates modules and runs their plan export in a sandbox. The
// JobManager implements it with wasmhost; tests use fakes.
type Planner interface {
	// Validate checks that wasm is a module the cluster can run (it
	// compiles, declares the ABI version, imports only the host ABI), on
	// behalf of tenant. Errors should wrap rpcerr.ErrInvalidModule; a
	// tenant with too much work in progress gets rpcerr.ErrResourceExhausted.
	Validate(ctx context.Context, tenant string, wasm []byte) error
	// Plan runs the module's plan export with args for tenant, under the
	// sandbox's limits narrowed by the tenant's lim, and returns the job
	// graph it declared. A guest failure should wrap
	// rpcerr.ErrInvalidArgument and carry the guest's message; a tenant
	// with too many plans in progress gets rpcerr.ErrResourceExhausted.
	Plan(ctx context.Context, tenant string, wasm []byte, args []string, lim control.TaskLimits) (*jobgraph.Graph, error)
}

// Resources is the ResourceManager as the Dispatcher sees it.
type Resources interface {
	jobmaster.SlotPool
	Overview() resourcemanager.Overview
}

// Config configures a Dispatcher. Zero fields take their defaults.
type Config struct {
	Blob      blob.Store
	Planner   Planner
	Resources Resources
	Gateway   jobmaster.TaskExecutorGateway
	// Observer reads the TaskManagers' kept logs and guest stacks (Logs,
	// TaskManagerLogs, Stacks); nil makes those ErrUnavailable.
	Observer TaskObserver
	// OpenCluster says every client is the default tenant (no tenants
	// file): TaskManagerLogs then shows every line of a TaskManager's log,
	// not only the caller's.
	OpenCluster bool
	// Address returns the JobManager's RPC address, told to every task; it
	// is a function because the server binds after the Dispatcher exists.
	Address func() string
	// LeaderSession goes into every fencing token; New picks a random one
	// when empty.
	LeaderSession string
	// Store, when set, is the HA job store of this leader's term: every
	// job is recorded there before it starts, with its latest completed
	// checkpoint and its outcome, so a new leader recovers it (Recover).
	// Nil means no HA.
	Store ha.JobStore

	ModuleSizeLimit     int64
	DefaultParallelism  int
	MaxParallelismLimit int // the most key groups (max parallelism) a job may declare
	// MaxJobSlots is the most slots one job may need; 0 means no limit
	// beyond MaxParallelismLimit.
	MaxJobSlots int
	Restart     jobmaster.RestartStrategy // default for jobs that set none
	Retention   time.Duration
	// SplitSize is the largest input split; a source's splits are smaller
	// when its input is small for its parallelism (see splitSizeFor).
	SplitSize     int64
	CancelTimeout time.Duration
	RPCTimeout    time.Duration
	// Quotas returns a tenant's quotas; nil means none.
	Quotas func(tenant string) Quotas
	// Policy returns what a tenant's jobs may ask for (checkPolicy); nil
	// means no policy at all (an open cluster: even the privileged
	// settings are allowed).
	Policy func(tenant string) auth.Policy
	// JobStarted, when set, is told the module of every job submitted. It
	// is called with the Dispatcher's lock held: it must return at once
	// and not call the Dispatcher.
	JobStarted func(control.ModuleRef)

	Logger *slog.Logger
	Now    func() time.Time
}

// Quotas bound one tenant. A zero field means no limit of the tenant's own.
type Quotas struct {
	Slots            int   // slots the tenant's live jobs may need in all
	RunningJobs      int   // jobs of the tenant not yet ended
	SubmitsPerMinute int   // jobs the tenant may submit per minute (submitBucket)
	ModuleBytes      int64 // the largest module the tenant may upload
	// Limits go with every task of the tenant's jobs.
	Limits control.TaskLimits
}

// Submission is a job to run.
type Submission struct {
	ModuleDigest string
	Args         []string
	Parallelism  int // default parallelism of vertices that set none; 0 means the cluster's
	Config       map[string]string
	Name         string
	// FromSavepoint, when set, is a savepoint id of the tenant the job
	// starts from (at any parallelism up to its max parallelism).
	FromSavepoint string
	// FromCheckpoint, when set, is a retained checkpoint of the tenant the
	// job starts from, "<job>/<n>" or its blob directory (at any
	// parallelism up to its max parallelism). Not with FromSavepoint.
	FromCheckpoint string
}

// Overview is the cluster at one moment.
type Overview struct {
	resourcemanager.Overview
	JobsByState map[jobmaster.JobState]int
}

// Dispatcher owns the jobs. Its methods are safe for concurrent use.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	jobs map[string]*jobmaster.JobMaster
	need map[string]int // slots each job needs, for the tenant slot quota
	// submits are the tenants' submission buckets (SubmitsPerMinute).
	submits map[string]*submitBucket
	subs    map[string]Submission // what each job was submitted as, for Rescale
	// ended are the jobs that ended under an earlier leader, from the
	// store: their outcome stays queryable after a failover.
	ended map[string]ha.Job
	// endedRecords are the records of one of ended, as last read.
	endedRecords cachedRecords
	// recovering are the live jobs of the store Recover has yet to start
	// (id → tenant): asked for meanwhile, they are unavailable, not
	// missing.
	recovering map[string]string
	closed     bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a Dispatcher and starts its retention sweeper.
//
// # Errors
//
// ErrInvalidArgument when a required dependency is missing.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Blob == nil || cfg.Planner == nil || cfg.Resources == nil || cfg.Gateway == nil || cfg.Address == nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "dispatcher: Blob, Planner, Resources, Gateway and Address are required")
	}
	if cfg.ModuleSizeLimit <= 0 {
		cfg.ModuleSizeLimit = DefaultModuleSizeLimit
	}
	if cfg.DefaultParallelism <= 0 {
		cfg.DefaultParallelism = DefaultParallelism
	}
	if cfg.MaxParallelismLimit <= 0 {
		cfg.MaxParallelismLimit = DefaultMaxParallelismLimit
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.SplitSize <= 0 {
		cfg.SplitSize = DefaultSplitSize
	}
	if cfg.LeaderSession == "" {
		cfg.LeaderSession = randomID()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dispatcher{cfg: cfg, log: cfg.Logger, jobs: map[string]*jobmaster.JobMaster{}, need: map[string]int{}, submits: map[string]*submitBucket{}, subs: map[string]Submission{}, ended: map[string]ha.Job{}, stop: make(chan struct{})}
	d.wg.Add(1)
	go d.sweep()
	return d, nil
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close stops every live job (they end SUSPENDED) and the sweeper.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	close(d.stop)
	jobs := slices.Collect(maps.Values(d.jobs))
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() { defer wg.Done(); j.Close() }()
	}
	wg.Wait()
	d.wg.Wait()
}

// UploadModule validates a module and stores it content-addressed in the
// tenant's namespace, returning its digest ("sha256-<hex>") and size.
// Uploading the same bytes again is cheap.
//
// # Errors
//
// ErrModuleTooLarge, ErrInvalidModule (with what is wrong), the blob
// store's errors as ErrUnavailable.
func (d *Dispatcher) UploadModule(ctx context.Context, tenant string, wasm []byte) (string, int64, error) {
	if q := d.quotas(tenant); q.ModuleBytes > 0 && int64(len(wasm)) > q.ModuleBytes {
		return "", 0, rpcerr.Errorf(rpcerr.ErrResourceExhausted, "tenant %q: module size quota %d bytes exceeded (module is %d bytes)", tenant, q.ModuleBytes, len(wasm))
	}
	if int64(len(wasm)) > d.cfg.ModuleSizeLimit {
		return "", 0, rpcerr.Errorf(rpcerr.ErrModuleTooLarge, "module is %d bytes, over the limit of %d bytes", len(wasm), d.cfg.ModuleSizeLimit)
	}
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return "", 0, rpcerr.Errorf(rpcerr.ErrInvalidModule, "invalid module: not a WebAssembly binary (no \\0asm header): build it with GOOS=wasip1 GOARCH=wasm")
	}
	if err := d.cfg.Planner.Validate(ctx, tenant, wasm); err != nil {
		if rpcerr.CodeOf(err) == rpcerr.CodeUnknown {
			err = rpcerr.Errorf(rpcerr.ErrInvalidModule, "invalid module: %w", err)
		}
		return "", 0, err
	}
	digest, size, err := blob.PutModule(ctx, d.cfg.Blob, tenant, bytes.NewReader(wasm))
	if err != nil {
		return "", 0, classifyBlob("store module", err)
	}
	d.log.Info("module uploaded", "tenant", tenant, "digest", digest, "size", size)
	return digest, size, nil
}

// SubmitJob plans, validates and starts a job, returning its id. Every check
// happens before any slot is requested: a bad submission changes nothing.
//
// # Errors
//
//   - ErrInvalidArgument: a malformed digest, parallelism or config; a plan
//     that failed; an invalid job graph (jobgraph.ErrInvalidGraph, every
//     problem listed); a job needing more slots than the cluster allows.
//   - ErrModuleNotFound: no module with that digest; upload it first.
//   - ErrNotFound / ErrPermissionDenied: an input path names nothing / a
//     foreign tenant's data; ErrNotFound: no such savepoint or retained
//     checkpoint of the tenant.
//   - ErrPermissionDenied: a config setting or connector the tenant's
//     policy does not allow (checkPolicy), whether the job starts fresh,
//     from a savepoint or checkpoint, or is a rescale's new job.
//
// A tenant over its submission rate (Quotas.SubmitsPerMinute) is refused
// before anything of the job is read or planned.
func (d *Dispatcher) SubmitJob(ctx context.Context, tenant string, s Submission) (string, error) {
	if err := d.takeSubmit(tenant); err != nil {
		return "", err
	}
	return d.start(ctx, tenant, s, "", time.Time{}, "", 0)
}

// submitBucket is a tenant's token bucket of submissions: it holds a
// sixth of the per-minute rate (at least 1) and refills at the rate.
type submitBucket struct {
	tokens float64
	last   time.Time
}

// takeSubmit takes one submission from tenant's bucket, or says when the
// next one will be there. Every submission counts, including those refused
// later for another reason: planning is what the rate bounds.
func (d *Dispatcher) takeSubmit(tenant string) error {
	rate := d.quotas(tenant).SubmitsPerMinute
	if rate <= 0 {
		return nil
	}
	now := d.cfg.Now()
	capacity := max(float64(rate)/6, 1)
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.submits[tenant]
	if b == nil {
		b = &submitBucket{tokens: capacity, last: now}
		d.submits[tenant] = b
	}
	b.tokens = min(capacity, b.tokens+now.Sub(b.last).Minutes()*float64(rate))
	b.last = now
	if b.tokens < 1 {
		wait := time.Duration((1 - b.tokens) / float64(rate) * float64(time.Minute))
		return rpcerr.Errorf(rpcerr.ErrResourceExhausted, "tenant %q: submission quota of %d jobs per minute reached: submit again in %s", tenant, rate, wait.Round(time.Millisecond))
	}
	b.tokens--
	return nil
}

// start starts a job: a new one (id empty), or with restoreRef (a
// checkpoint "<job>/<n>", or none) job id recovered from the HA store.
func (d *Dispatcher) start(ctx context.Context, tenant string, s Submission, id string, submitted time.Time, restoreRef string, firstAttempt int64) (string, error) {
	if err := blob.ValidateDigest(s.ModuleDigest); err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "module digest %q: want the \"sha256-<hex>\" UploadModule returned", s.ModuleDigest)
	}
	p := s.Parallelism
	switch {
	case p == 0:
		p = d.cfg.DefaultParallelism
	case p < 0 || p > d.cfg.MaxParallelismLimit:
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "parallelism %d: must be in [1, %d] (0 for the cluster default %d)", p, d.cfg.MaxParallelismLimit, d.cfg.DefaultParallelism)
	}
	// The config is parsed here, once; everything after takes its part of
	// the struct.
	conf, err := jobconfig.Parse(s.Config)
	if err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%w", err)
	}
	restart, err := jobmaster.RestartFromConfig(conf.Restart, d.cfg.Restart)
	if err != nil {
		return "", err
	}
	wasm, err := d.readModule(ctx, tenant, s.ModuleDigest)
	if err != nil {
		return "", err
	}
	g, err := d.cfg.Planner.Plan(ctx, tenant, wasm, s.Args, d.quotas(tenant).Limits)
	if err != nil {
		if rpcerr.CodeOf(err) == rpcerr.CodeUnknown {
			err = rpcerr.Errorf(rpcerr.ErrInvalidArgument, "plan of module %s failed: %w", s.ModuleDigest, err)
		}
		return "", err
	}
	if err := jobgraph.Validate(g, p, d.cfg.MaxParallelismLimit); err != nil {
		return "", err
	}
	// From here on the graph holds the job's secrets: it goes to the
	// JobMaster and the tasks, never to a client.
	if err := jobgraph.ResolveSecrets(g, conf.Secrets); err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%w", err)
	}
	if err := conf.CheckGraph(g); err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%w", err)
	}
	if err := d.checkPolicy(tenant, s.Config, conf, g); err != nil {
		return "", err
	}
	if err := checkJetStream(ctx, g); err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%w", err)
	}
	if err := checkKafka(ctx, g); err != nil {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%w", err)
	}
	need := 0
	for _, c := range jobgraph.Chains(g, p) {
		need = max(need, c.Parallelism)
	}
	if d.cfg.MaxJobSlots > 0 && need > d.cfg.MaxJobSlots {
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "job needs %d slots (its largest parallelism), above the cluster's limit of %d per job: lower the parallelism", need, d.cfg.MaxJobSlots)
	}
	splits, err := resolveSplits(ctx, d.cfg.Blob, tenant, g, conf.Inputs, p, d.cfg.SplitSize)
	if err != nil {
		return "", err
	}
	var restore *checkpoint.Metadata
	var released [][]byte
	switch {
	case restoreRef != "":
		if restore, err = d.restoreFromCheckpoint(ctx, tenant, restoreRef, g); err != nil {
			return "", err
		}
		released = d.releasedThrough(ctx, tenant, id, restore.ID)
	case s.FromSavepoint != "" && s.FromCheckpoint != "":
		return "", rpcerr.Errorf(rpcerr.ErrInvalidArgument, "start from savepoint %q or from checkpoint %q, not both", s.FromSavepoint, s.FromCheckpoint)
	case s.FromSavepoint != "":
		if restore, err = d.restoreFrom(ctx, tenant, s.FromSavepoint, g); err != nil {
			return "", err
		}
	case s.FromCheckpoint != "":
		if restore, err = d.restoreFromCheckpoint(ctx, tenant, s.FromCheckpoint, g); err != nil {
			return "", err
		}
	}

	q := d.quotas(tenant)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return "", rpcerr.Errorf(rpcerr.ErrUnavailable, "the job manager is shutting down")
	}
	recovered := id != ""
	if !recovered {
		// A recovered job was admitted by the leader that first ran it.
		if err := d.checkQuotaLocked(tenant, q, need); err != nil {
			return "", err
		}
		id, submitted = randomID(), d.cfg.Now()
	}
	name := s.Name
	if name == "" {
		name = g.Name
	}
	rec := ha.Job{ID: id, Tenant: tenant, Name: s.Name, ModuleDigest: s.ModuleDigest, Args: s.Args, Parallelism: s.Parallelism,
		Config: s.Config, FromSavepoint: s.FromSavepoint, FromCheckpoint: s.FromCheckpoint, Submitted: submitted}
	var stored func(context.Context, *checkpoint.Metadata, int64) error
	var still func(context.Context) error
	if st := d.cfg.Store; st != nil {
		still = st.Check
		if !recovered {
			// Recorded before it starts: a job this leader runs is one the
			// next leader recovers. Under d.mu, so a deposed leader (whose
			// write fails) starts nothing.
			if err := st.PutJob(ctx, rec); err != nil {
				return "", jobStoreErr("record the job", err)
			}
		}
		stored = func(ctx context.Context, m *checkpoint.Metadata, attempt int64) error {
			return st.PutCheckpoint(ctx, id, fmt.Sprintf("%s/%d", id, m.ID), attempt)
		}
	}
	jm, err := jobmaster.Start(jobmaster.Config{
		JobID:              id,
		Name:               name,
		Tenant:             tenant,
		ModuleDigest:       s.ModuleDigest,
		Args:               slices.Clone(s.Args),
		Graph:              g,
		DefaultParallelism: p,
		JobConfig:          conf,
		Splits:             splits,
		Discover:           discoverer(d.cfg.Blob, tenant, g, conf.Inputs, p, d.cfg.SplitSize),
		Restart:            restart,
		Blob:               d.cfg.Blob,
		Restore:            restore,
		Released:           released,
		LeaderSession:      d.cfg.LeaderSession,
		Address:            d.cfg.Address(),
		Slots:              d.cfg.Resources,
		Gateway:            d.cfg.Gateway,
		CancelTimeout:      d.cfg.CancelTimeout,
		RPCTimeout:         d.cfg.RPCTimeout,
		Limits:             q.Limits,
		Logger:             d.log,
		Now:                d.cfg.Now,
		CheckpointStored:   stored,
		StillLeader:        still,
		FirstAttempt:       firstAttempt,
	})
	if err != nil {
		if d.cfg.Store != nil && !recovered {
			d.cfg.Store.DeleteJob(ctx, id)
		}
		return "", err
	}
	if d.cfg.Store != nil {
		d.wg.Add(1)
		go d.recordEnd(jm, rec)
	}
	d.jobs[id] = jm
	d.need[id] = need
	s.Args, s.Config = slices.Clone(s.Args), maps.Clone(s.Config)
	d.subs[id] = s
	d.log.Info("job submitted", "job", id, "tenant", tenant, "name", name, "module", s.ModuleDigest, "slots", need, "from_savepoint", s.FromSavepoint, "from_checkpoint", s.FromCheckpoint, "recovered", recovered, "restore", restoreRef)
	if d.cfg.JobStarted != nil {
		d.cfg.JobStarted(control.ModuleRef{Tenant: tenant, Digest: s.ModuleDigest})
	}
	return id, nil
}

func (d *Dispatcher) quotas(tenant string) Quotas {
	if d.cfg.Quotas == nil {
		return Quotas{}
	}
	return d.cfg.Quotas(tenant)
}

// checkQuotaLocked refuses a job of tenant needing need slots when the
// tenant's live jobs already reach its running-jobs or slot quota. Slots
// are counted as the jobs need them, whether granted yet or not.
func (d *Dispatcher) checkQuotaLocked(tenant string, q Quotas, need int) error {
	if q.RunningJobs <= 0 && q.Slots <= 0 {
		return nil
	}
	running, slots := 0, 0
	for id, j := range d.jobs {
		if j.Tenant() != tenant || j.Details().State.Terminal() {
			continue
		}
		running++
		slots += d.need[id]
	}
	if q.RunningJobs > 0 && running >= q.RunningJobs {
		return rpcerr.Errorf(rpcerr.ErrResourceExhausted, "tenant %q: running jobs quota %d reached: wait for a job to end or cancel one", tenant, q.RunningJobs)
	}
	if q.Slots > 0 && slots+need > q.Slots {
		return rpcerr.Errorf(rpcerr.ErrResourceExhausted, "tenant %q: slots quota %d: %d in use, the job needs %d: lower its parallelism or wait", tenant, q.Slots, slots, need)
	}
	return nil
}

// readModule fetches and verifies a module.
func (d *Dispatcher) readModule(ctx context.Context, tenant, digest string) ([]byte, error) {
	rc, err := blob.GetModule(ctx, d.cfg.Blob, tenant, digest)
	if err != nil {
		if errors.Is(err, blob.ErrNotFound) {
			return nil, rpcerr.Errorf(rpcerr.ErrModuleNotFound, "module %q not found: upload it first", digest)
		}
		return nil, classifyBlob("read module", err)
	}
	defer rc.Close()
	wasm, err := io.ReadAll(io.LimitReader(rc, d.cfg.ModuleSizeLimit+1))
	if err != nil {
		return nil, classifyBlob("read module", err)
	}
	if int64(len(wasm)) > d.cfg.ModuleSizeLimit {
		return nil, rpcerr.Errorf(rpcerr.ErrModuleTooLarge, "module %s is over the limit of %d bytes", digest, d.cfg.ModuleSizeLimit)
	}
	return wasm, nil
}

func classifyBlob(op string, err error) error {
	switch {
	case errors.Is(err, blob.ErrInvalidKey), errors.Is(err, blob.ErrInvalidArgument):
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%s: %w", op, err)
	case errors.Is(err, blob.ErrDigestMismatch):
		return rpcerr.Errorf(rpcerr.ErrInternal, "%s: %w", op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	}
	return rpcerr.Errorf(rpcerr.ErrUnavailable, "%s: blob store: %w", op, err)
}

// job returns tenant's job id; foreign and unknown jobs alike are not found.
func (d *Dispatcher) job(tenant, id string) (*jobmaster.JobMaster, error) {
	d.mu.Lock()
	jm, ok := d.jobs[id]
	recovering := d.recovering[id] == tenant
	d.mu.Unlock()
	switch {
	case ok && jm.Tenant() == tenant:
		return jm, nil
	case !ok && recovering:
		return nil, rpcerr.Errorf(rpcerr.ErrUnavailable, "job %s is being recovered after a JobManager failover: retry in a moment", id)
	}
	return nil, rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", id)
}

// JobMaster returns the JobMaster of a job, for the RPCs tasks make (they
// are fenced by the job's token rather than by tenant).
func (d *Dispatcher) JobMaster(id string) (*jobmaster.JobMaster, error) {
	d.mu.Lock()
	jm, ok := d.jobs[id]
	d.mu.Unlock()
	if !ok {
		return nil, rpcerr.Errorf(rpcerr.ErrJobNotFound, "job %q not found", id)
	}
	return jm, nil
}

// JobMasters returns the JobMaster of every job it holds, of every tenant
// (for the JobManager's metrics, which an operator reads, not a tenant).
func (d *Dispatcher) JobMasters() []*jobmaster.JobMaster {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Collect(maps.Values(d.jobs))
}

// RunningModules returns the modules of the jobs that have not ended, of
// every tenant, newest job first, each module once: what a TaskManager
// with free slots may be asked to run next.
func (d *Dispatcher) RunningModules() []control.ModuleRef {
	d.mu.Lock()
	jobs := slices.Collect(maps.Values(d.jobs))
	d.mu.Unlock()
	var ds []jobmaster.Details
	for _, j := range jobs {
		if det := j.Details(); !det.State.Terminal() {
			ds = append(ds, det)
		}
	}
	slices.SortFunc(ds, func(a, b jobmaster.Details) int { return b.Start.Compare(a.Start) })
	var out []control.ModuleRef
	seen := map[control.ModuleRef]bool{}
	for _, det := range ds {
		r := control.ModuleRef{Tenant: det.Tenant, Digest: det.ModuleDigest}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// ListJobs returns the tenant's jobs, oldest first.
func (d *Dispatcher) ListJobs(ctx context.Context, tenant string) []jobmaster.Details {
	d.mu.Lock()
	jobs := slices.Collect(maps.Values(d.jobs))
	d.mu.Unlock()
	var out []jobmaster.Details
	for _, j := range jobs {
		if j.Tenant() == tenant {
			out = append(out, j.Details())
		}
	}
	out = append(out, d.endedOf(tenant)...)
	slices.SortFunc(out, func(a, b jobmaster.Details) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.JobID, b.JobID)
	})
	return out
}

// GetJob returns a job's details.
//
// # Errors
//
// ErrJobNotFound: `job "x" not found`.
func (d *Dispatcher) GetJob(ctx context.Context, tenant, id string) (jobmaster.Details, error) {
	jm, err := d.job(tenant, id)
	if err != nil {
		if j, ok := d.endedJob(tenant, id); ok {
			return endedDetails(j), nil
		}
		return jobmaster.Details{}, err
	}
	return jm.Details(), nil
}

// CancelJob asks a job to cancel and returns at once; wait for CANCELED
// with WaitJob. Canceling an ended job is not an error.
//
// # Errors
//
// ErrJobNotFound.
func (d *Dispatcher) CancelJob(ctx context.Context, tenant, id string) error {
	jm, err := d.job(tenant, id)
	if err != nil {
		return err
	}
	d.log.Info("cancel requested", "job", id, "tenant", tenant)
	return jm.Cancel(ctx)
}

// WaitJob waits up to timeout (at most MaxWait; 0 returns at once) for the
// job to end and returns its result then, ended or not. Its records come
// only once it FINISHED (a streaming reader uses WaitRecords).
//
// # Errors
//
// ErrJobNotFound.
func (d *Dispatcher) WaitJob(ctx context.Context, tenant, id string, timeout time.Duration) (jobmaster.Result, error) {
	jm, err := d.job(tenant, id)
	if err != nil {
		if j, ok := d.endedJob(tenant, id); ok {
			return d.endedResult(ctx, j, j.Ended.State == string(jobmaster.Finished))
		}
		return jobmaster.Result{}, err
	}
	r := jm.Result()
	if timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, min(timeout, MaxWait))
		defer cancel()
		r = jm.Wait(ctx)
	}
	if r.State != jobmaster.Finished {
		r.Records, r.RecordsOffset = nil, r.RecordsTotal
	}
	return r, nil
}

// WaitRecords waits up to timeout (at most MaxWait) until the job has
// released collect-sink records from index from on, or has ended, and
// returns its result then with only those records (a few MiB at most: ask
// again from RecordsOffset+len(Records)). A record is released once a
// completed checkpoint covers it, and all are once the job FINISHED, so
// what a reader got is never taken back by a restore.
//
// # Errors
//
// ErrJobNotFound; ErrInvalidArgument for a negative from.
func (d *Dispatcher) WaitRecords(ctx context.Context, tenant, id string, from int64, timeout time.Duration) (jobmaster.Result, error) {
	if from < 0 {
		return jobmaster.Result{}, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "wait for records of job %s: records_from %d is negative; start at 0", id, from)
	}
	jm, err := d.job(tenant, id)
	if err != nil {
		if j, ok := d.endedJob(tenant, id); ok {
			r, err := d.endedResult(ctx, j, true)
			return r.RecordsFrom(from), err
		}
		return jobmaster.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, min(timeout, MaxWait))
	defer cancel()
	return jm.WaitRecords(ctx, from), nil
}

// Overview describes the cluster: TaskManagers, slots, and the tenant's
// jobs by state.
func (d *Dispatcher) Overview(ctx context.Context, tenant string) Overview {
	o := Overview{Overview: d.cfg.Resources.Overview(), JobsByState: map[jobmaster.JobState]int{}}
	for _, j := range d.ListJobs(ctx, tenant) {
		o.JobsByState[j.State]++
	}
	return o
}

// ReportTaskMetrics hands each job's task figures (from a TaskManager's
// heartbeat) to its JobMaster; figures of unknown jobs are dropped.
func (d *Dispatcher) ReportTaskMetrics(ms []control.ExecutionMetrics) {
	byJob := map[string][]control.ExecutionMetrics{}
	for _, m := range ms {
		byJob[m.JobID] = append(byJob[m.JobID], m)
	}
	for id, ms := range byJob {
		if jm, err := d.JobMaster(id); err == nil {
			jm.ReportMetrics(ms)
		}
	}
}

// TaskManagerLost tells the job that held the allocations about them.
func (d *Dispatcher) TaskManagerLost(l resourcemanager.Lost) {
	if jm, err := d.JobMaster(l.JobID); err == nil {
		jm.TaskManagerLost(l)
	}
}

// sweep forgets jobs that ended more than the retention time ago.
func (d *Dispatcher) sweep() {
	defer d.wg.Done()
	period := min(max(d.cfg.Retention/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.expire()
	}
}

func (d *Dispatcher) expire() {
	now := d.cfg.Now()
	d.expireEnded(now)
	var gone []*jobmaster.JobMaster
	var ids []expired
	d.mu.Lock()
	for id, jm := range d.jobs {
		det := jm.Details()
		if det.State.Terminal() && !det.End.IsZero() && now.Sub(det.End) > d.cfg.Retention {
			delete(d.jobs, id)
			delete(d.need, id)
			delete(d.subs, id)
			gone = append(gone, jm)
			ids = append(ids, expired{tenant: det.Tenant, id: id})
			d.log.Info("job result expired", "job", id, "tenant", det.Tenant, "state", det.State)
		}
	}
	d.mu.Unlock()
	for _, jm := range gone {
		jm.Close() // ended already: waits for its last slot frees
	}
	d.forget(ids)
}
